//go:build linux

package walwriter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRealFullDisk runs the WAL on a real 4MiB tmpfs until it is full, then
// grows the tmpfs (remount) and checks every append is durable once. It
// needs to mount, so it is skipped where that is not allowed.
func TestRealFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	w, err := Open(dir, Options{Tables: []Table{accounts}, SegmentSize: 1 << 20, MaxRowBytes: 4096, RetryBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const producers, perProducer = 4, 5000 // about 5MiB of records
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 9))
			for i := range perProducer {
				id := int64(p*perProducer + i)
				if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprintf("t%d-%d", p, i), Table: "accounts", Key: key(id), Row: accountRow(id, rng)}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	deadline := time.Now().Add(time.Minute)
	for w.Health() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the tmpfs never filled")
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Health(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("health %v: want ENOSPC", err)
	}
	time.Sleep(200 * time.Millisecond)
	if out, err := exec.Command("mount", "-o", "remount,size=64m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("append: %v", err)
	}
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("write failures %d, recoveries %d, segments %d", st.WriteFailures, st.Recoveries, st.Segments)
	checkOnce(t, dir, producers*perProducer)
	if _, err := Verify(dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
}
