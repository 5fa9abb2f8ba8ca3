package walwriter

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepairGarbledOlderSegment garbles a record in the first of several
// segments: Open refuses and names the segment, the offset and the repair
// command; Repair cuts the segment there, keeps the rest as .broken and
// reports the records lost; the WAL then verifies, reads across the gap and
// opens for appends again.
func TestRepairGarbledOlderSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 128 << 10, MaxRowBytes: 4096, CheckpointBytes: -1}
	w := openTest(t, dir, opts)
	appendMany(t, w, "s-", 2000, 2000, rand.New(rand.NewPCG(6, 7)))
	w.Close()
	segs, _ := listSegments(dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	seg0 := filepath.Join(dir, segs[0].Name)
	st0, _ := os.Stat(seg0)
	const damageAt = 40 << 10
	flipByte(t, seg0, damageAt)

	_, err := Open(dir, Options{Tables: []Table{accounts}, SegmentSize: opts.SegmentSize, MaxRowBytes: opts.MaxRowBytes})
	if err == nil || !strings.Contains(err.Error(), segs[0].Name) || !strings.Contains(err.Error(), "strata wal repair") || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("open of a WAL with a damaged older segment: %v; want the segment, offset and repair command named", err)
	}

	// A dry run reports and changes nothing.
	rep, err := Repair(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cuts) != 1 || rep.Cuts[0].Broken != "" {
		t.Fatalf("dry run: %+v", rep)
	}
	if st, _ := os.Stat(seg0); st.Size() != st0.Size() {
		t.Fatal("a dry run changed the segment")
	}

	rep, err = Repair(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cuts) != 1 {
		t.Fatalf("cuts %+v, want one", rep.Cuts)
	}
	c := rep.Cuts[0]
	if c.Segment != segs[0].Name || c.Offset > damageAt || c.Offset < damageAt-8<<10 || !c.LostKnown || c.RecordsLost == 0 {
		t.Errorf("cut %+v: want %s cut just before %d with the records lost counted", c, segs[0].Name, damageAt)
	}
	if c.LastLostLSN != segs[1].First-1 || c.FirstLostLSN+LSN(c.RecordsLost) != segs[1].First {
		t.Errorf("cut %+v: lost LSNs do not end before the next segment's %d", c, segs[1].First)
	}
	broken, err := os.ReadFile(filepath.Join(dir, c.Broken))
	if err != nil || int64(len(broken)) != c.Bytes || c.Bytes == 0 {
		t.Errorf("broken file %s: %d bytes, %v; want %d", c.Broken, len(broken), err, c.Bytes)
	}
	if st, _ := os.Stat(seg0); st.Size() != c.Offset {
		t.Errorf("segment is %d bytes after the cut, want %d", st.Size(), c.Offset)
	}
	if rep, err := Repair(dir, false); err != nil || len(rep.Cuts) != 0 {
		t.Errorf("second repair: %+v, %v; want nothing to cut", rep, err)
	}

	vr, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify after repair: %v", err)
	}
	if len(vr.Gaps) != 1 || uint64(vr.Records) != 2000-c.RecordsLost {
		t.Errorf("verify: %d records, gaps %v; want %d records and one gap", vr.Records, vr.Gaps, 2000-c.RecordsLost)
	}
	r, err := NewReader(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after repair: %v", err)
		}
		if rec.LSN >= c.FirstLostLSN && rec.LSN <= c.LastLostLSN {
			t.Fatalf("read lost LSN %d", rec.LSN)
		}
		n++
	}
	r.Close()
	if uint64(n) != 2000-c.RecordsLost {
		t.Errorf("read %d records, want %d", n, 2000-c.RecordsLost)
	}

	w = openTest(t, dir, opts)
	if _, err := w.Append(context.Background(), Update{EventID: "after-repair", Table: "accounts", Key: key(1), Row: accountRow(1, rand.New(rand.NewPCG(1, 1)))}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRepairHeaderAndClean: a clean WAL needs no cut; a segment whose
// header is garbled is set aside whole.
func TestRepairHeaderAndClean(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{SegmentSize: 128 << 10, MaxRowBytes: 4096})
	appendMany(t, w, "h-", 1500, 1500, rand.New(rand.NewPCG(2, 2)))
	w.Close()
	if rep, err := Repair(dir, false); err != nil || len(rep.Cuts) != 0 {
		t.Fatalf("repair of a clean WAL: %+v, %v", rep, err)
	}
	segs, _ := listSegments(dir)
	flipByte(t, filepath.Join(dir, segs[1].Name), 3)
	rep, err := Repair(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cuts) != 1 || rep.Cuts[0].Offset != 0 || rep.Cuts[0].RecordsLost != uint64(segs[2].First-segs[1].First) {
		t.Fatalf("cuts %+v", rep.Cuts)
	}
	if _, err := os.Stat(filepath.Join(dir, segs[1].Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("segment with a bad header still there: %v", err)
	}
	if _, err := Verify(dir); err != nil {
		t.Errorf("verify: %v", err)
	}
}
