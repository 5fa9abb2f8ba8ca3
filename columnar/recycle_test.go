package columnar

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestRecyclerAccounting: kept buffers come back zeroed and stay counted by
// the parent budget until Close gives them back.
func TestRecyclerAccounting(t *testing.T) {
	budget := NewBudget(0, memory.DefaultAllocator)
	r := NewRecycler(budget, 4, 16)
	b := memory.NewResizableBuffer(r)
	b.Resize(1000)
	for i := range b.Bytes() {
		b.Bytes()[i] = 0xaa
	}
	held := budget.InUse()
	b.Release()
	if budget.InUse() != held {
		t.Fatalf("in use %d after the free, want %d kept", budget.InUse(), held)
	}
	b = memory.NewResizableBuffer(r)
	b.Resize(990) // fits the kept buffer
	if budget.InUse() != held {
		t.Fatalf("in use %d after reuse, want %d", budget.InUse(), held)
	}
	for i, v := range b.Buf() {
		if v != 0 {
			t.Fatalf("byte %d of a reused buffer is %#x, want 0", i, v)
		}
	}
	c := memory.NewResizableBuffer(r)
	c.Resize(100) // too small for any kept buffer: a new one
	if budget.InUse() <= held {
		t.Fatalf("in use %d after a new allocation, want more than %d", budget.InUse(), held)
	}
	b.Release()
	r.Close()
	c.Release() // after Close: straight to the budget
	if n := budget.InUse(); n != 0 {
		t.Fatalf("in use %d after Close, want 0", n)
	}
}

// TestRecyclerKeepAtMost: past its bound in bytes the recycler gives freed
// buffers to the parent, and the bound set later gives back what it kept
// beyond it.
func TestRecyclerKeepAtMost(t *testing.T) {
	budget := NewBudget(0, memory.DefaultAllocator)
	r := NewRecycler(budget, 8, 0)
	defer r.Close()
	bufs := make([]*memory.Buffer, 4)
	for i := range bufs {
		bufs[i] = memory.NewResizableBuffer(r)
		bufs[i].Resize(1024)
	}
	for _, b := range bufs {
		b.Release()
	}
	kept := budget.InUse()
	if kept < 4*1024 {
		t.Fatalf("in use %d after four 1KiB frees, want them kept", kept)
	}
	r.KeepAtMost(kept / 2)
	if n := budget.InUse(); n > kept/2 {
		t.Fatalf("in use %d after KeepAtMost(%d), want at most that", n, kept/2)
	}
	a, b := memory.NewResizableBuffer(r), memory.NewResizableBuffer(r)
	a.Resize(1024)
	b.Resize(1024)
	c := memory.NewResizableBuffer(r)
	c.Resize(1024)
	before := budget.InUse()
	a.Release()
	b.Release()
	c.Release() // the third is past the bound
	if n := budget.InUse(); n > kept/2 {
		t.Fatalf("in use %d after three frees, want at most the bound %d (was %d)", n, kept/2, before)
	}
}

// TestRecyclerKeepAtMostCountsLent: under a bound, the buffers a recycler
// keeps and those it has handed out stay within the bound together. A
// reader whose blocks change size (strings) frees a block's buffers, which
// are kept, and then asks for buffers none of them fits: the kept ones go
// back to the parent first, so that the reader never holds two blocks.
func TestRecyclerKeepAtMostCountsLent(t *testing.T) {
	budget := NewBudget(0, memory.DefaultAllocator)
	r := NewRecycler(budget, 16, 0)
	defer r.Close()
	const block = 3 << 20
	r.KeepAtMost(block)
	sizes := [][]int{{1 << 20, 2 << 20}, {1<<20 + 4096, 2<<20 - 8192}, {1 << 20, 2<<20 + 4096}, {4096, 2 << 20}}
	for i, blk := range sizes {
		var bufs [][]byte
		for _, n := range blk {
			bufs = append(bufs, r.Allocate(n))
			if held := budget.InUse(); held > block+4096 {
				t.Fatalf("block %d: %d bytes held with a %d-byte block in hand, want at most one block", i, held, n)
			}
		}
		for _, b := range bufs {
			r.Free(b)
		}
	}
	if held := budget.InUse(); held > block+4096 {
		t.Fatalf("%d bytes kept after the last block, want at most %d", held, block)
	}
}

// reserveOnAllocate is a Go allocator that, before each allocation, runs
// reserve: another goroutine's Reserve landing at the worst moment.
type reserveOnAllocate struct {
	memory.GoAllocator
	reserve func()
}

func (a *reserveOnAllocate) Allocate(size int) []byte {
	if a.reserve != nil {
		a.reserve()
	}
	return a.GoAllocator.Allocate(size)
}

// TestRecyclerSwapKeepsItsRoom: a recycler under a bound that gives kept
// buffers back to make room for a new one keeps that room its own across
// the exchange. Before, it freed them and then allocated: a Reserve on
// another goroutine in between (a bucket deal's, beside a reader's
// blocks) took the freed room, and the allocation, which cannot be
// refused, took the budget past its grant.
func TestRecyclerSwapKeepsItsRoom(t *testing.T) {
	const block = 1 << 20
	parent := &reserveOnAllocate{}
	budget := NewBudget(2*block, parent)
	r := NewRecycler(budget, 4, 0)
	defer r.Close()
	r.KeepAtMost(block)
	r.Free(r.Allocate(block)) // kept: the reader's room for its next block
	if err := budget.Reserve(block - 4096); err != nil {
		t.Fatal(err)
	}
	var reserved error
	parent.reserve = func() { reserved = budget.Reserve(block) }
	b := r.Allocate(block - 1024) // no kept buffer fits: the kept one goes back
	parent.reserve = nil
	if reserved == nil {
		t.Errorf("a Reserve during the exchange took the room the recycler gave back")
	}
	if budget.Exceeded() {
		t.Errorf("the budget went past its %d-byte limit: peak %d", budget.Limit(), budget.Peak())
	}
	r.Free(b)
}
