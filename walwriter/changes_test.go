package walwriter

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
)

// Deletes and versions are logged and read back, across a reopen and a
// checkpoint, and a key's record after its delete is a full image.
func TestDeleteAndVersionReadBack(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	w := openTest(t, dir, Options{SegmentSize: 256 << 10})
	type want struct {
		key     []byte
		row     Row
		version uint64
		kind    RecordKind
	}
	var wants []want
	appendOne := func(u Update) {
		t.Helper()
		if _, err := w.Append(context.Background(), u); err != nil {
			t.Fatalf("append %s: %v", u.EventID, err)
		}
	}
	for i := range 300 {
		id := int64(i % 40)
		u := Update{EventID: "p-" + strconv.Itoa(i+1), Table: accounts.Name, Key: key(id), Version: uint64(1000 + i)}
		switch {
		case i%7 == 3:
			u.Delete = true
			wants = append(wants, want{key: u.Key, version: u.Version, kind: KindDelete})
		case i%11 == 5:
			u.Version = 0 // a change logged without a version reads back as 0
			u.Row = accountRow(id, rng)
			wants = append(wants, want{key: u.Key, row: u.Row, kind: KindFull})
		default:
			u.Row = accountRow(id, rng)
			wants = append(wants, want{key: u.Key, row: u.Row, version: u.Version})
		}
		appendOne(u)
		if i == 150 {
			if _, err := w.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if i == 200 {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w = openTest(t, dir, Options{SegmentSize: 256 << 10})
		}
	}
	if _, err := w.Append(context.Background(), Update{EventID: "bad", Table: accounts.Name, Key: key(1), Delete: true, Row: accountRow(1, rng)}); err == nil {
		t.Fatal("a delete with a row was accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []Record
	for _, r := range readAll(t, dir, 0) {
		if r.Kind != KindCheckpoint {
			got = append(got, r)
		}
	}
	if len(got) != len(wants) {
		t.Fatalf("read %d data records, want %d", len(got), len(wants))
	}
	deleted := map[string]bool{}
	for i, r := range got {
		wt := wants[i]
		if !bytes.Equal(r.Key, wt.key) || r.Version != wt.version {
			t.Fatalf("record %d: key %x version %d, want %x %d", i, r.Key, r.Version, wt.key, wt.version)
		}
		if wt.kind == KindDelete {
			if r.Kind != KindDelete || r.Row != nil {
				t.Fatalf("record %d: kind %s row %v, want a delete", i, r.Kind, r.Row)
			}
			deleted[string(r.Key)] = true
			continue
		}
		if r.Kind == KindDelete || !rowsEqual(r.Row, wt.row) {
			t.Fatalf("record %d (%s): row differs", i, r.Kind)
		}
		if deleted[string(r.Key)] && r.Kind != KindFull {
			t.Fatalf("record %d: the first record of key %x after its delete is a %s, want a full image", i, r.Key, r.Kind)
		}
		delete(deleted, string(r.Key))
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deletes == 0 || rep.Records != uint64(len(wants)) {
		t.Fatalf("verify: %d records, %d deletes; want %d records", rep.Records, rep.Deletes, len(wants))
	}
}

func rowsEqual(a, b Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) || (a[i] == nil) != (b[i] == nil) {
			return false
		}
	}
	return true
}

// RemoveSegmentsNotNeededFrom keeps every segment while the checkpoint is
// after the LSN a reader must still start from, and removes those wholly
// before the checkpoint once it is not; the reader then reads every record
// from that LSN, deltas resolved.
func TestRemoveSegmentsNotNeededFrom(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{SegmentSize: 128 << 10, MaxRowBytes: 4096})
	rng := rand.New(rand.NewPCG(4, 4))
	appendMany(t, w, "a-", 2000, 50, rng)
	ckpt, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := w.RemoveSegmentsNotNeededFrom(ckpt - 100); err != nil || len(removed) != 0 {
		t.Fatalf("from before the checkpoint: removed %v, %v; want nothing", removed, err)
	}
	appendMany(t, w, "b-", 500, 50, rng)
	from := ckpt + 300
	removed, err := w.RemoveSegmentsNotNeededFrom(from)
	if err != nil || len(removed) == 0 {
		t.Fatalf("from after the checkpoint: removed %v, %v; want the segments before it", removed, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	for _, r := range readAll(t, dir, from) {
		if r.LSN >= from && r.Kind != KindCheckpoint {
			if r.Row == nil {
				t.Fatalf("record %d read without its row", r.LSN)
			}
			n++
		}
	}
	if want := 2000 + 1 + 500 - int(from) + 1; n != want {
		t.Fatalf("read %d records from %d, want %d", n, from, want)
	}
}
