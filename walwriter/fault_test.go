package walwriter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fullDisk is a Faults that behaves like a file system with a byte budget:
// a write past it is cut short with ENOSPC (a partially written batch), and
// so is a segment creation (its preallocation).
type fullDisk struct {
	mu      sync.Mutex
	free    int64
	full    bool // the budget has run out at least once
	syncErr atomic.Int32
}

func (d *fullDisk) faults(segmentSize int64) *Faults {
	return &Faults{
		Write: func(_ string, _ int64, n int) (int, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if int64(n) > d.free {
				k := d.free
				d.free, d.full = 0, true
				return int(k), syscall.ENOSPC
			}
			d.free -= int64(n)
			return n, nil
		},
		Sync: func(string) error {
			if d.syncErr.Add(-1) >= 0 {
				return syscall.EIO
			}
			return nil
		},
		Create: func(string) error {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.free < segmentSize {
				d.full = true
				return syscall.ENOSPC
			}
			return nil
		},
	}
}

func (d *fullDisk) setFree(n int64) {
	d.mu.Lock()
	d.free = n
	d.mu.Unlock()
}

// TestWriteFailureRecovers appends from many producers onto a disk that
// fills up (writes cut short, segments not created), checks the WAL reports
// itself unhealthy and holds the appends instead of failing them, then frees
// space and checks every update is durable exactly once, in a WAL that reads
// back cleanly.
func TestWriteFailureRecovers(t *testing.T) {
	dir := t.TempDir()
	const segSize = 256 << 10
	disk := &fullDisk{free: 600 << 10}
	w := openTest(t, dir, Options{SegmentSize: segSize, MaxRowBytes: 4096, Faults: disk.faults(segSize)})
	const producers, perProducer = 8, 800
	var wg sync.WaitGroup
	errs := make(chan error, producers*perProducer)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			for i := range perProducer {
				id := int64(p*perProducer + i)
				if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprintf("p%d-%d", p, i), Table: "accounts", Key: key(id % 300), Row: accountRow(id, rng)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	// Wait for the disk to fill and the WAL to say so.
	deadline := time.Now().Add(20 * time.Second)
	for w.Health() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the WAL never reported the full disk")
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Health(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("health %v: want it to wrap ENOSPC", err)
	}
	time.Sleep(100 * time.Millisecond) // some retries against the full disk
	if err := w.Health(); err == nil {
		t.Fatal("healthy again before space was freed")
	}
	disk.setFree(1 << 40)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("append: %v", err)
	}
	if err := w.Health(); err != nil {
		t.Errorf("health after space was freed: %v", err)
	}
	st := w.Stats()
	if st.WriteFailures == 0 || st.Recoveries == 0 {
		t.Errorf("stats %+v: want write failures and recoveries counted", st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, dir, producers*perProducer)
	if _, err := Verify(dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
	// And the WAL opens again and keeps the dedup window.
	w = openTest(t, dir, Options{SegmentSize: segSize, MaxRowBytes: 4096})
	if _, err := w.Append(context.Background(), Update{EventID: "p0-0", Table: "accounts", Key: key(0), Row: accountRow(0, rand.New(rand.NewPCG(0, 7)))}); err != nil {
		t.Fatal(err)
	}
	if w.Stats().Duplicates != 1 {
		t.Error("a resent event was not dropped as a duplicate")
	}
	w.Close()
}

// checkOnce reads the WAL back and checks it holds n distinct events, each once.
func checkOnce(t *testing.T, dir string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, rec := range readAll(t, dir, 0) {
		if rec.Kind != KindCheckpoint {
			seen[rec.EventID]++
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct events in the WAL, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s written %d times", id, c)
		}
	}
}

// TestFsyncFailureRewrites fails an fdatasync after its write went through:
// the records are readable from the page cache but must not be trusted
// (after a failed fsync Linux may have dropped them), so the WAL writes them
// again, and each must still be in the WAL once.
func TestFsyncFailureRewrites(t *testing.T) {
	dir := t.TempDir()
	disk := &fullDisk{free: 1 << 40}
	w := openTest(t, dir, Options{Faults: disk.faults(64 << 20)})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10 {
		if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprint("a", i), Table: "accounts", Key: key(int64(i)), Row: accountRow(int64(i), rng)}); err != nil {
			t.Fatal(err)
		}
	}
	disk.syncErr.Store(3)
	for i := range 10 {
		if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprint("b", i), Table: "accounts", Key: key(int64(i)), Row: accountRow(int64(i), rng)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, dir, 20)
	if _, err := Verify(dir); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestCloseWhileFailing closes a WAL that cannot write: Close returns, the
// pending appends fail with ErrFailed (they were never durable), and the
// WAL opens again with what was durable.
func TestCloseWhileFailing(t *testing.T) {
	dir := t.TempDir()
	disk := &fullDisk{free: 1 << 40}
	w := openTest(t, dir, Options{Faults: disk.faults(64 << 20)})
	rng := rand.New(rand.NewPCG(1, 3))
	if _, err := w.Append(context.Background(), Update{EventID: "ok", Table: "accounts", Key: key(1), Row: accountRow(1, rng)}); err != nil {
		t.Fatal(err)
	}
	disk.setFree(0)
	res := make(chan error, 1)
	if err := w.AppendAsync(Update{EventID: "lost", Table: "accounts", Key: key(2), Row: accountRow(2, rng)}, func(_ LSN, err error) { res <- err }); err != nil {
		t.Fatal(err)
	}
	for w.Health() == nil {
		time.Sleep(time.Millisecond)
	}
	if err := w.Close(); !errors.Is(err, ErrFailed) {
		t.Errorf("close: %v, want ErrFailed", err)
	}
	if err := <-res; !errors.Is(err, ErrFailed) {
		t.Errorf("pending append: %v, want ErrFailed", err)
	}
	checkOnce(t, dir, 1)
}

// TestFullDiskBeforeFirstRecord fills the disk before anything was written:
// the empty segment the WAL cuts back to is removed by the first retry, and
// later retries must still work.
func TestFullDiskBeforeFirstRecord(t *testing.T) {
	dir := t.TempDir()
	disk := &fullDisk{free: 1 << 40}
	w := openTest(t, dir, Options{Faults: disk.faults(64 << 20), RetryBackoff: 20 * time.Millisecond})
	disk.setFree(0)
	res := make(chan error, 1)
	go func() {
		_, err := w.Append(context.Background(), Update{EventID: "first", Table: "accounts", Key: key(1), Row: accountRow(1, rand.New(rand.NewPCG(4, 4)))})
		res <- err
	}()
	for w.Health() == nil {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	disk.setFree(1 << 40)
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("append still waiting after space was freed: %v", w.Health())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, dir, 1)
}

// TestOpenOnFullDisk opens a WAL on a disk too full for a new segment: Open
// succeeds (a service must not exit on a transient error), the WAL reports
// the failure, and appends made meanwhile become durable once space is freed.
func TestOpenOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{})
	rng := rand.New(rand.NewPCG(5, 5))
	if _, err := w.Append(context.Background(), Update{EventID: "before", Table: "accounts", Key: key(1), Row: accountRow(1, rng)}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	disk := &fullDisk{free: 0}
	w, err := Open(dir, Options{Tables: []Table{accounts}, Faults: disk.faults(64 << 20), RetryBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	if err := w.Health(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("health %v: want ENOSPC", err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := w.Append(context.Background(), Update{EventID: "after", Table: "accounts", Key: key(2), Row: accountRow(2, rng)})
		res <- err
	}()
	time.Sleep(100 * time.Millisecond)
	disk.setFree(1 << 40)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, dir, 2)
}
