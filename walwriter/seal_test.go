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
