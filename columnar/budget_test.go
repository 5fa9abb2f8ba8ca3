package columnar

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestBudget(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	b := NewBudget(1000, checked)
	x := b.Allocate(600)
	if b.InUse() != 600 || b.Exceeded() {
		t.Fatalf("in use %d exceeded %v", b.InUse(), b.Exceeded())
	}
	if err := b.Reserve(500); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("reserve over the limit: %v", err)
	}
	if b.InUse() != 600 {
		t.Fatalf("failed reserve counted: %d", b.InUse())
	}
	if err := b.Reserve(300); err != nil {
		t.Fatal(err)
	}
	x = b.Reallocate(800, x) // 1100 > 1000: recorded, not refused
	if !b.Exceeded() || b.Peak() != 1100 {
		t.Fatalf("exceeded %v peak %d", b.Exceeded(), b.Peak())
	}
	b.Free(x)
	b.Release(300)
	if b.InUse() != 0 || b.Peak() != 1100 {
		t.Fatalf("in use %d peak %d", b.InUse(), b.Peak())
	}
	checked.AssertSize(t, 0)
	if NewBudget(0, nil).Available() <= 0 {
		t.Fatal("unlimited budget has nothing available")
	}
}
