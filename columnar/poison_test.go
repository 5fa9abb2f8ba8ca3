package columnar

import "testing"

// TestBudgetPoisonsFreed checks that, built with the strata_poison tag, a
// buffer the budget takes back reads as poison, and a buffer a
// reallocation moved from too.
func TestBudgetPoisonsFreed(t *testing.T) {
	if !poisonFreed {
		t.Skip("built without the strata_poison tag: freed memory is not poisoned (make test runs the engine suites with it)")
	}
	b := NewBudget(0, nil)
	buf := b.Allocate(100)
	copy(buf, "live data")
	kept := buf[:9]
	b.Free(buf)
	for i, c := range kept {
		if c != PoisonByte {
			t.Fatalf("byte %d of a freed buffer is %#x, want %#x", i, c, PoisonByte)
		}
	}
	old := b.Allocate(64)
	copy(old, "moved")
	kept = old[:5]
	grown := b.Reallocate(1<<20, old)
	if string(grown[:5]) != "moved" {
		t.Fatalf("reallocation lost the data: %q", grown[:5])
	}
	if &grown[0] != &kept[0] && kept[0] != PoisonByte {
		t.Fatalf("the buffer a reallocation moved from is not poisoned: %q", kept)
	}
	b.Free(grown)
	if b.InUse() != 0 {
		t.Fatalf("%d bytes in use after freeing everything", b.InUse())
	}
}

// TestReusedBufferPoisoned checks that, built with the strata_poison tag,
// an uncompressed block's array kept past the next read of a reader that
// reuses its buffers (ReuseBuffers) reads as poison, not as the next
// block.
func TestReusedBufferPoisoned(t *testing.T) {
	if !poisonFreed {
		t.Skip("built without the strata_poison tag: reused buffers are not poisoned (make test runs the engine suites with it)")
	}
	dir := t.TempDir()
	ms, err := Generate(dir, GenOptions{Columns: 1, Containers: 1, RowsPerContainer: 300, BlockRows: 100, Seed: 3, Compression: CompressionNone, NullFraction: -1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenColumn(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.ReuseBuffers()
	kept, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Release()
	next, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release()
	values := kept.Data().Buffers()[1].Bytes()
	for i, b := range values[:8] {
		if b != PoisonByte {
			t.Fatalf("byte %d of a block kept past the next read is %#x, want %#x", i, b, PoisonByte)
		}
	}
}
