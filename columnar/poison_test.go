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
