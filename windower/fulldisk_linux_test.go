//go:build linux

package windower

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
)

// TestSpillRangeBucketsFullDisk spills a query's range buckets into a
// real 1.5MiB tmpfs, which fills while the chunks are dealt (at 2MiB it
// fills only when the buckets are committed), on one thread and on two
// (where each chunk is dealt while the next is read): the run fails with
// ENOSPC, naming what it was writing, and leaves nothing behind: no
// grant counted, no spill directory, no goroutine still dealing or
// reading. It needs to mount, so it is skipped where that is not
// allowed.
func TestSpillRangeBucketsFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	tmp := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1536k", "tmpfs", tmp).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", tmp).Run() })
	dir, q := rowNumberByK(t, 13, 14)
	before := bucketStages.Load()
	for _, threads := range []int{1, 2} {
		goroutines, overlapped := runtime.NumGoroutine(), chunksReadBehind.Load()
		budget := columnar.NewBudget(MinGrant, nil)
		res, err := Run(context.Background(), q, []string{dir}, Options{Budget: budget, Threads: threads, TempDir: tmp})
		if err == nil {
			res.Close()
			t.Fatalf("%d threads: the run over a full disk succeeded", threads)
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%d threads: %v, want ENOSPC", threads, err)
		}
		t.Logf("%d threads: %v", threads, err)
		if msg := err.Error(); !strings.Contains(msg, "spill bucket ") || strings.Count(msg, "windower:") != 1 {
			t.Errorf("%d threads: %q, want the bucket named, with one \"windower:\"", threads, msg)
		}
		if threads > 1 && chunksReadBehind.Load() == overlapped {
			t.Errorf("%d threads: the disk filled before a chunk was dealt while the next was read", threads)
		}
		if n := budget.InUse(); n != 0 {
			t.Errorf("%d threads: %d bytes of the grant still counted after the failure", threads, n)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("%d threads: %d entries left in the spill directory, first %s", threads, len(left), left[0].Name())
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			t.Errorf("%d threads: %d goroutines after the failure, %d before", threads, n, goroutines)
		}
	}
	if bucketStages.Load() == before {
		t.Error("no stage was dealt to range buckets")
	}
}
