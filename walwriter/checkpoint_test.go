package walwriter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// appendMany appends n updates of keys 0..keys-1 asynchronously and waits.
func appendMany(t *testing.T, w *WAL, prefix string, n, keys int, rng *rand.Rand) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		k := int64(i % keys)
		row := accountRow(k, rng)
		row[5] = []byte("fixed text of thirty characters")[:30]
		wg.Add(1)
		if err := w.AppendAsync(Update{EventID: fmt.Sprint(prefix, i), Table: "accounts", Key: key(k), Row: row}, func(_ LSN, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestCheckpointAndRemoveSegments(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 128 << 10, MaxRowBytes: 4096}
	w := openTest(t, dir, opts)
	rng := rand.New(rand.NewPCG(3, 3))
	appendMany(t, w, "a-", 3000, 50, rng)
	ckpt, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCheckpoint(dir); err != nil || got != ckpt {
		t.Fatalf("checkpoint file: %d, %v; want %d", got, err, ckpt)
	}
	appendMany(t, w, "b-", 200, 50, rng)
	removed, err := w.RemoveObsoleteSegments()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) == 0 {
		t.Fatal("no segment removed before the checkpoint")
	}
	w.Close()

	// Replay from the checkpoint needs nothing before it: every key's
	// first record after it is a full image.
	recs := readAll(t, dir, ckpt)
	if recs[0].LSN != ckpt || recs[0].Kind != KindCheckpoint {
		t.Fatalf("first record from the checkpoint: %+v", recs[0])
	}
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		if !seen[string(r.Key)] && r.Kind != KindFull {
			t.Fatalf("first record of key %x after the checkpoint is a %v", r.Key, r.Kind)
		}
		seen[string(r.Key)] = true
	}
	if len(recs) != 201 {
		t.Fatalf("%d records from the checkpoint, want 201", len(recs))
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	// A reopened WAL continues after the remaining segments.
	w = openTest(t, dir, opts)
	lsn, err := w.Append(context.Background(), Update{EventID: "c-1", Table: "accounts", Key: key(1), Row: accountRow(1, rng)})
	w.Close()
	if err != nil || lsn != recs[len(recs)-1].LSN+1 {
		t.Fatalf("append after reopen: LSN %d, %v", lsn, err)
	}
}

func TestReaderFromLSN(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{SegmentSize: 128 << 10, MaxRowBytes: 4096})
	appendMany(t, w, "r-", 2000, 20, rand.New(rand.NewPCG(4, 4)))
	w.Close()
	all := readAll(t, dir, 0)
	for _, from := range []LSN{1, 2, 777, 1999, 2000} {
		got := readAll(t, dir, from)
		want := all[from-1:]
		if len(got) != len(want) || got[0].LSN != from || !sameRow(got[0].Row, want[0].Row) {
			t.Errorf("from %d: %d records starting at %d, want %d", from, len(got), got[0].LSN, len(want))
		}
	}
	if got := readAll(t, dir, 5000); len(got) != 0 {
		t.Errorf("from past the end: %d records", len(got))
	}
}

func TestBatchWindowAndClose(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{BatchWindow: 20 * time.Millisecond, MaxBatchRecords: 100})
	appendMany(t, w, "w-", 300, 10, rand.New(rand.NewPCG(5, 5)))
	st := w.Stats()
	if st.Batches > 6 {
		t.Errorf("%d batches for 300 records queued at once with a 20ms window and 100-record batches", st.Batches)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(context.Background(), Update{EventID: "late", Table: "accounts", Key: key(1), Row: accountRow(1, rand.New(rand.NewPCG(1, 1)))}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestRegisterTable(t *testing.T) {
	w := openTest(t, t.TempDir(), Options{})
	defer w.Close()
	if err := w.RegisterTable(accounts); err != nil {
		t.Errorf("registering the same table again: %v", err)
	}
	if err := w.RegisterTable(Table{Name: "accounts", Columns: []messages.RowType{messages.RowInt64}}); err == nil {
		t.Error("registering a table again with other columns succeeded")
	}
	for _, bad := range []Table{{Name: "", Columns: []messages.RowType{messages.RowInt64}}, {Name: "t"}, {Name: "t", Columns: []messages.RowType{"decimal"}}} {
		if err := w.RegisterTable(bad); err == nil {
			t.Errorf("registering %+v succeeded", bad)
		}
	}
}

func TestOpenRejectsCorruptSealedSegment(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{SegmentSize: 128 << 10, MaxRowBytes: 4096})
	appendMany(t, w, "s-", 2000, 20, rand.New(rand.NewPCG(6, 6)))
	w.Close()
	segs, _ := listSegments(dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	flipByte(t, filepath.Join(dir, segs[0].Name), segmentHeaderSize+100)
	_, err := Verify(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != segs[0].Name {
		t.Fatalf("verify: %v, want a corruption in %s", err, segs[0].Name)
	}
	if _, err := os.Stat(filepath.Join(dir, segs[0].Name)); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFailureReopens fails a write the way a dying disk would (the
// segment's file is gone from under the WAL): the append waits, the WAL
// reopens its directory and a new segment, and the append becomes durable.
func TestWriteFailureReopens(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{})
	w.seg.Close()
	rng := rand.New(rand.NewPCG(8, 8))
	for _, id := range []string{"x-1", "x-2"} {
		if _, err := w.Append(context.Background(), Update{EventID: id, Table: "accounts", Key: key(1), Row: accountRow(1, rng)}); err != nil {
			t.Fatalf("append %s after a failed write: %v", id, err)
		}
	}
	if st := w.Stats(); st.WriteFailures != 1 || st.Recoveries != 1 {
		t.Errorf("%d write failures, %d recoveries: want 1 and 1", st.WriteFailures, st.Recoveries)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, dir, 2)
}

func TestDeltasAcrossSegmentsAndNoBase(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 128 << 10, MaxRowBytes: 4096, CheckpointBytes: -1}
	w := openTest(t, dir, opts)
	rng := rand.New(rand.NewPCG(10, 10))
	appendMany(t, w, "a-", 3000, 50, rng)
	st := w.Stats()
	if st.Segments < 2 || st.FullImages > 60 {
		t.Fatalf("%d segments, %d full images: want deltas to continue across segments", st.Segments, st.FullImages)
	}
	ckpt, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	appendMany(t, w, "b-", 200, 50, rng)
	if _, err := w.RemoveObsoleteSegments(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	segs, _ := listSegments(dir)
	if segs[0].First == 1 {
		t.Fatal("no segment was removed")
	}
	// Reading from before the checkpoint meets deltas whose base is gone.
	r, err := NewReader(dir, segs[0].First)
	if err != nil {
		t.Fatal(err)
	}
	var nextErr error
	for nextErr == nil {
		_, nextErr = r.Next()
	}
	r.Close()
	if !errors.Is(nextErr, ErrNoBase) {
		t.Fatalf("reading from LSN %d before the checkpoint %d: %v, want ErrNoBase", segs[0].First, ckpt, nextErr)
	}
	// Verify checks what it can and reports what it could not resolve.
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unresolved == 0 || rep.LastLSN != ckpt+200 {
		t.Fatalf("verify: %+v", rep)
	}
}

func TestAutomaticCheckpoints(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{SegmentSize: 128 << 10, MaxRowBytes: 4096, CheckpointBytes: 20 << 10})
	appendMany(t, w, "a-", 3000, 50, rand.New(rand.NewPCG(11, 11)))
	st := w.Stats()
	w.Close()
	if st.Checkpoints < 3 {
		t.Fatalf("%d automatic checkpoints, want several", st.Checkpoints)
	}
	ckpt, err := ReadCheckpoint(dir)
	if err != nil || ckpt == 0 {
		t.Fatalf("checkpoint file: %d, %v", ckpt, err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}
