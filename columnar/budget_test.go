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

func TestSubBudget(t *testing.T) {
	b := NewBudget(1000, nil)
	s1, s2 := b.Sub(600), b.Sub(600)
	if err := s1.Reserve(500); err != nil {
		t.Fatal(err)
	}
	if err := s1.Reserve(200); err == nil {
		t.Fatal("a sub-budget took more than its own limit")
	}
	if err := s2.Reserve(501); err == nil {
		t.Fatal("two sub-budgets took more than their budget's limit")
	}
	if got := s2.InUse(); got != 0 {
		t.Fatalf("a refused reserve left %d bytes counted in the sub-budget", got)
	}
	if err := s2.Reserve(400); err != nil {
		t.Fatal(err)
	}
	buf := s2.Allocate(64)
	if got, want := b.InUse(), int64(964); got != want {
		t.Fatalf("budget in use %d, want %d (both sub-budgets' reserves and allocations)", got, want)
	}
	s2.Free(buf)
	s1.Release(500)
	s2.Release(400)
	if b.InUse() != 0 || s1.InUse() != 0 || s2.InUse() != 0 {
		t.Fatalf("in use after release: budget %d, subs %d and %d", b.InUse(), s1.InUse(), s2.InUse())
	}
	if got := b.Peak(); got != 964 {
		t.Fatalf("budget peak %d, want 964", got)
	}
}
