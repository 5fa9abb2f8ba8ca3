package walwriter

import (
	"context"
	"math/rand/v2"
	"testing"
)

func TestSegmentsSealedAndGuard(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 128 << 10, MaxRowBytes: 4096}
	w := openTest(t, dir, opts)
	segs, err := w.Segments()
	if err != nil || len(segs) != 1 || segs[0].Sealed {
		t.Fatalf("new WAL: segments %+v, %v; want one, not sealed", segs, err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	appendMany(t, w, "a-", 3000, 50, rng)
	select {
	case <-w.Changed():
	default:
		t.Fatal("no change signalled after segments were sealed")
	}
	segs, err = w.Segments()
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %+v, %v; want several", segs, err)
	}
	for i, s := range segs {
		if want := i < len(segs)-1; s.Sealed != want {
			t.Fatalf("segment %d of %d (%s): sealed %v, want %v", i, len(segs), s.Name, s.Sealed, want)
		}
		if s.Size <= segmentHeaderSize {
			t.Fatalf("segment %s: size %d", s.Name, s.Size)
		}
	}
	if _, err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Changed():
	default:
		t.Fatal("no change signalled after a checkpoint")
	}
	// The guard keeps what it is asked to keep.
	kept := segs[0].Name
	w.SetRemoveGuard(func(seg string) bool { return seg == kept })
	removed, err := w.RemoveObsoleteSegments()
	if err != nil || len(removed) == 0 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	for _, r := range removed {
		if r == kept {
			t.Fatalf("removed %s, which the guard keeps", r)
		}
	}
	last := segs[len(segs)-1].Name
	w.Close()

	// Reopened, every segment on disk is sealed: appends go to a new one.
	w = openTest(t, dir, opts)
	defer w.Close()
	segs, err = w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs[:len(segs)-1] {
		if !s.Sealed {
			t.Fatalf("after reopen, segment %s not sealed", s.Name)
		}
		if s.Name == last && s.Size >= opts.SegmentSize {
			t.Fatalf("segment %s being written at close: %d bytes after reopen, want it cut to its records", s.Name, s.Size)
		}
	}
	if segs[0].Name != kept {
		t.Fatalf("first segment %s, want the kept %s", segs[0].Name, kept)
	}
	if s := segs[len(segs)-1]; s.Sealed || s.Name == last {
		t.Fatalf("after reopen, current segment %+v", s)
	}
}

// A clean Close cuts the segment being written after its records and seals
// it; the next Open has nothing to cut there. A segment with no records is
// left unsealed (Open removes it).
func TestCloseSealsCurrentSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 128 << 10, MaxRowBytes: 4096}
	w := openTest(t, dir, opts)
	appendMany(t, w, "a-", 500, 50, rand.New(rand.NewPCG(6, 6)))
	segs, err := w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	current := segs[len(segs)-1]
	if current.Sealed || current.Size != opts.SegmentSize {
		t.Fatalf("segment being written %+v: want it preallocated, not sealed", current)
	}
	w.Close()
	select {
	case <-w.Changed():
	default:
		t.Fatal("no change signalled by the seal at close")
	}
	segs, err = w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	closed := segs[len(segs)-1]
	if closed.Name != current.Name || !closed.Sealed || closed.Size >= opts.SegmentSize {
		t.Fatalf("after Close: %+v; want %s sealed and cut to its records", closed, current.Name)
	}
	s, err := scanSegment(dir, segmentInfo{First: closed.First, Name: closed.Name}, false)
	if err != nil || s.end != closed.Size {
		t.Fatalf("records of %s end at %d (%v), file is %d bytes", closed.Name, s.end, err, closed.Size)
	}

	// Reopened and closed with nothing written: the new segment holds no
	// record and is not sealed.
	w = openTest(t, dir, opts)
	w.Close()
	segs, err = w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if last := segs[len(segs)-1]; last.Name == closed.Name || last.Sealed || last.Size != opts.SegmentSize {
		t.Fatalf("empty segment after Close: %+v; want a new one, not sealed", last)
	}
	if prev := segs[len(segs)-2]; prev.Name != closed.Name || prev.Size != closed.Size {
		t.Fatalf("segment closed before: %+v, want %+v unchanged by the open", prev, closed)
	}
}
