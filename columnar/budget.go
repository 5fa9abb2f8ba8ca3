package columnar

import (
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/internal/hugepage"
)

// Budget is a memory.Allocator that counts every byte it hands out against a
// limit and records the peak. Arrow allocations cannot fail, so going over
// the limit through Allocate or Reallocate is not refused: it is recorded
// (Exceeded reports it) for the caller to treat as the bug it is. Go memory a
// job holds outside Arrow is counted with Reserve and Release, which do
// refuse to go over. A Budget is safe for concurrent use.
type Budget struct {
	parent   memory.Allocator
	up       *Budget // a sub-budget's budget (see Sub), nil for others
	limit    int64
	inUse    atomic.Int64
	peak     atomic.Int64
	exceeded atomic.Bool
}

var _ memory.Allocator = (*Budget)(nil)

// NewBudget returns a Budget of limit bytes (<= 0: no limit) allocating from
// parent (nil: the Go heap, with huge pages asked for the buffers of
// hugepage.MinBytes or more, such as a result's string data).
func NewBudget(limit int64, parent memory.Allocator) *Budget {
	if parent == nil {
		parent = hugepage.Allocator{}
	}
	return &Budget{parent: parent, limit: limit}
}

// Sub returns a budget of limit bytes, allocating as b does, whose every
// byte is counted against b as well: the share of a job's grant that one
// of its workers holds. Its Reserve refuses what would take either budget
// over its limit; b's peak is the peak of everything its sub-budgets held
// at once.
func (b *Budget) Sub(limit int64) *Budget {
	return &Budget{parent: b.parent, up: b, limit: limit}
}

// Allocate implements memory.Allocator.
func (b *Budget) Allocate(size int) []byte {
	buf := b.parent.Allocate(size)
	b.grow(int64(len(buf)))
	return buf
}

// Reallocate implements memory.Allocator.
func (b *Budget) Reallocate(size int, old []byte) []byte {
	oldLen := int64(len(old))
	buf := b.parent.Reallocate(size, old)
	if len(old) > 0 && (len(buf) == 0 || &buf[0] != &old[0]) {
		Poison(old[:cap(old)]) // moved: the old buffer is free
	}
	b.grow(int64(len(buf)) - oldLen)
	return buf
}

// Free implements memory.Allocator. Built with the strata_poison tag it
// poisons buf first (see Poison).
func (b *Budget) Free(buf []byte) {
	n := int64(len(buf))
	Poison(buf)
	b.parent.Free(buf)
	b.Release(n)
}

// Exchange frees bufs and allocates size bytes in one step of the count:
// the budget goes from holding bufs to holding the new buffer without
// counting less between, so a Reserve on another goroutine cannot take
// the room bufs held in the meantime (as it could between a Free and an
// Allocate). Built with the strata_poison tag it poisons bufs first.
func (b *Budget) Exchange(bufs [][]byte, size int) []byte {
	var freed int64
	for _, buf := range bufs {
		freed += int64(len(buf))
		Poison(buf)
		b.parent.Free(buf)
	}
	buf := b.parent.Allocate(size)
	b.grow(int64(len(buf)) - freed)
	return buf
}

func (b *Budget) grow(n int64) {
	if b.up != nil {
		b.up.grow(n)
	}
	now := b.inUse.Add(n)
	for {
		p := b.peak.Load()
		if now <= p || b.peak.CompareAndSwap(p, now) {
			break
		}
	}
	if b.limit > 0 && now > b.limit {
		b.exceeded.Store(true)
	}
}

// Reserve counts n bytes of non-Arrow memory (Go slices a job holds). It
// fails with an error wrapping ErrBudgetExceeded, counting nothing, if that
// would take the budget over its limit.
func (b *Budget) Reserve(n int64) error {
	if n < 0 {
		return fmt.Errorf("columnar: reserve %d bytes: negative size", n)
	}
	for {
		cur := b.inUse.Load()
		if b.limit > 0 && cur+n > b.limit {
			return fmt.Errorf("%w: reserve %d bytes with %d of %d in use", ErrBudgetExceeded, n, cur, b.limit)
		}
		if !b.inUse.CompareAndSwap(cur, cur+n) {
			continue
		}
		if b.up != nil {
			if err := b.up.Reserve(n); err != nil {
				b.inUse.Add(-n)
				return err
			}
		}
		b.grow(0)
		return nil
	}
}

// Release returns n bytes counted by Reserve.
func (b *Budget) Release(n int64) {
	if b.up != nil {
		b.up.Release(n)
	}
	b.inUse.Add(-n)
}

// InUse returns the bytes counted now.
func (b *Budget) InUse() int64 { return b.inUse.Load() }

// Peak returns the most bytes ever counted at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// Limit returns the limit given to NewBudget.
func (b *Budget) Limit() int64 { return b.limit }

// Available returns the bytes left under the limit (never negative).
func (b *Budget) Available() int64 {
	if b.limit <= 0 {
		return 1<<63 - 1
	}
	return max(0, b.limit-b.inUse.Load())
}

// Exceeded reports whether Arrow allocations ever took the budget over its
// limit.
func (b *Budget) Exceeded() bool { return b.exceeded.Load() }
