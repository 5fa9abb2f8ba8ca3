package columnar

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Recycler is a memory.Allocator that keeps a few freed buffers and hands
// them out again, zeroed as a fresh allocation is, instead of giving them
// back to its parent and taking new ones. An engine that decodes or
// builds block after block of the same shape (a reader's blocks, a
// gather's output blocks) would otherwise take new memory for each, which
// a short-lived process pays for in page faults and the garbage collector
// in scans. A kept buffer stays counted by the parent (a job's Budget)
// until Close gives it back, so the accounting is that of the buffers
// held. Built with the strata_poison tag a kept buffer is poisoned (see
// Poison), as the parent poisons the others.
type Recycler struct {
	parent memory.Allocator
	max    int // buffers kept at most
	slack  int // a kept buffer may be 1/slack larger than asked for; 0: exactly the size
	mu     sync.Mutex
	keep   bool  // false after Close: everything passes through
	most   int64 // bytes kept and lent at most; 0: no bound but max
	bytes  int64 // bytes kept
	lent   int64 // bytes handed out and not yet freed
	pool   [][]byte
}

// NewRecycler returns a Recycler over parent that keeps up to max freed
// buffers and hands one out for a request of at least its size and at
// most 1/slack more (slack 0: only of exactly its size).
func NewRecycler(parent memory.Allocator, max, slack int) *Recycler {
	return &Recycler{parent: parent, max: max, slack: slack, keep: true}
}

// Allocate implements memory.Allocator: the smallest kept buffer that
// fits, or a new one from the parent.
func (r *Recycler) Allocate(size int) []byte {
	most := size
	if r.slack > 0 {
		most += size / r.slack
	}
	r.mu.Lock()
	best := -1
	for i, b := range r.pool {
		if len(b) >= size && len(b) <= most && (best < 0 || len(b) < len(r.pool[best])) {
			best = i
		}
	}
	if best < 0 {
		// Under a bound, kept buffers that would take what is kept and
		// lent past it go back first: a reader asking for a block of
		// another size would otherwise hold it beside the last one's.
		var give [][]byte
		if r.most > 0 {
			give = r.trim(r.most - r.lent - int64(size))
		}
		r.lent += int64(size)
		r.mu.Unlock()
		if x, ok := r.parent.(exchanger); ok && len(give) > 0 {
			return x.Exchange(give, size) // the room stays the reader's
		}
		for _, b := range give {
			r.parent.Free(b)
		}
		return r.parent.Allocate(size)
	}
	b := r.pool[best]
	r.bytes -= int64(len(b))
	r.lent += int64(len(b))
	last := len(r.pool) - 1
	r.pool[best] = r.pool[last]
	r.pool[last] = nil
	r.pool = r.pool[:last]
	r.mu.Unlock()
	clear(b) // as the parent would hand it out
	return b
}

// exchanger is a parent that frees buffers and allocates another in one
// step of its count (Budget.Exchange).
type exchanger interface {
	Exchange(bufs [][]byte, size int) []byte
}

// trim takes kept buffers out of the pool, the largest first, until at
// most n bytes are kept, and returns them for the caller to give back to
// the parent once the lock is let go. r.mu is held.
func (r *Recycler) trim(n int64) [][]byte {
	var give [][]byte
	for len(r.pool) > 0 && r.bytes > max(n, 0) {
		largest := 0
		for i, b := range r.pool {
			if len(b) > len(r.pool[largest]) {
				largest = i
			}
		}
		b := r.pool[largest]
		last := len(r.pool) - 1
		r.pool[largest] = r.pool[last]
		r.pool[last] = nil
		r.pool = r.pool[:last]
		r.bytes -= int64(len(b))
		give = append(give, b)
	}
	return give
}

// Reallocate implements memory.Allocator.
func (r *Recycler) Reallocate(size int, b []byte) []byte {
	buf := r.parent.Reallocate(size, b)
	r.mu.Lock()
	r.lent += int64(len(buf) - len(b))
	r.mu.Unlock()
	return buf
}

// Free implements memory.Allocator: b is kept while there is room and the
// recycler is open.
func (r *Recycler) Free(b []byte) {
	r.mu.Lock()
	r.lent -= int64(len(b))
	if r.keep && len(r.pool) < r.max && len(b) > 0 && (r.most == 0 || r.bytes+int64(len(b)) <= r.most) {
		Poison(b)
		r.pool = append(r.pool, b)
		r.bytes += int64(len(b))
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.parent.Free(b)
}

// KeepAtMost bounds the bytes of the buffers kept: a freed buffer that
// would take them past n goes to the parent, and so do kept buffers
// beyond n now. An allocation that no kept buffer fits first gives back
// kept buffers until they and the buffers handed out, with the new one,
// are within n (or none is kept); a Budget parent counts that exchange as
// one step (Budget.Exchange), so no Reserve takes the room meanwhile. A reader that holds little beside its
// blocks (a spilling window query) so holds about a block's buffers, not
// the last block's beside the next one's when their sizes differ, nor up
// to max blocks of strings of sizes that never come again.
func (r *Recycler) KeepAtMost(n int64) {
	r.mu.Lock()
	r.most = n
	give := r.trim(n)
	r.mu.Unlock()
	for _, b := range give {
		r.parent.Free(b)
	}
}

// Close gives the kept buffers back to the parent; buffers freed after it
// go straight to the parent. It may be called more than once.
func (r *Recycler) Close() {
	r.mu.Lock()
	pool := r.pool
	r.pool, r.keep, r.bytes = nil, false, 0
	r.mu.Unlock()
	for _, b := range pool {
		r.parent.Free(b)
	}
}

// Available is the parent budget's room, so readers that read ahead only
// when there is room see it through the recycler.
func (r *Recycler) Available() int64 {
	if b, ok := r.parent.(interface{ Available() int64 }); ok {
		return b.Available()
	}
	return 1<<63 - 1
}
