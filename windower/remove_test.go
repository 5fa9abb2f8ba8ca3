package windower

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-db/strata/columnar"
)

// TestRemover queues directories from several goroutines at once, some
// while others are being removed: wait returns once every one is gone,
// and a nil remover removes at once.
func TestRemover(t *testing.T) {
	tmp := t.TempDir()
	mkdir := func(name string) string {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := os.WriteFile(filepath.Join(dir, "sub", fmt.Sprint(i)), make([]byte, 1<<16), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	var r *remover
	r.remove(mkdir("now"))
	if _, err := os.Stat(filepath.Join(tmp, "now")); !os.IsNotExist(err) {
		t.Fatalf("a nil remover left its directory: %v", err)
	}
	r.wait()

	r = &remover{}
	const goroutines, each = 4, 25
	dirs := make([][]string, goroutines)
	for g := range dirs {
		for i := range each {
			dirs[g] = append(dirs[g], mkdir(fmt.Sprintf("g%d-%d", g, i)))
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for _, dir := range dirs[g] {
				r.remove(dir)
			}
		})
	}
	wg.Wait()
	r.wait()
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("%d directories left after wait: %v", len(left), left)
	}
	// Queued again after the goroutine that drained the queue ended.
	r.remove(mkdir("again"))
	r.wait()
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left after a second wait: %v", left)
	}
}

// TestSpillRangeBucketsRemoved reads a result streamed from range buckets
// to its end at every thread count: the rows are those of the run in
// memory, and once it is closed no spilled file is left, the buckets
// removed in the background included.
func TestSpillRangeBucketsRemoved(t *testing.T) {
	dir, q := rowNumberByK(t, 13, 14)
	want := func() []string {
		res, err := Run(context.Background(), q, []string{dir}, Options{Grant: 1 << 30, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		return drain(t, res)
	}()
	for _, threads := range []int{1, 2, 4} {
		budget := columnar.NewBudget(MinGrant, nil)
		tmp := t.TempDir()
		stages := bucketStages.Load()
		res, err := Run(context.Background(), q, []string{dir}, Options{Budget: budget, Threads: threads, TempDir: tmp})
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, res)
		if bucketStages.Load() == stages {
			t.Fatalf("threads %d: no stage was dealt to range buckets", threads)
		}
		res.Close()
		sameRows(t, fmt.Sprintf("threads %d", threads), got, want)
		if n := budget.InUse(); n != 0 {
			t.Errorf("threads %d: %d bytes of the grant still counted after Close", threads, n)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("threads %d: spill directory not removed: %v", threads, left)
		}
	}
}
