package merger

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// maxRecycled bounds the buffers a recycler keeps: those of one output block
// (validity, values or offsets, bytes) and one more.
const maxRecycled = 4

// recycler is the allocator of one gather's output blocks. A block's buffers
// are freed when the writer is done with it, just before the gather starts
// the next block of the same shape; the recycler keeps them and hands them
// out again, zeroed as a fresh allocation is, instead of giving them back to
// its parent and taking new ones, which would be memory the garbage
// collector must reclaim and the cache has not seen. A kept buffer stays
// counted by the parent (the merge's budget) until close gives it back, so
// the accounting is that of the buffers held.
type recycler struct {
	parent memory.Allocator
	mu     sync.Mutex
	free   [][]byte
	closed bool
}

func newRecycler(parent memory.Allocator) *recycler {
	return &recycler{parent: parent}
}

// Allocate implements memory.Allocator: a kept buffer of at least size
// bytes and at most 1/16 more, or a new one.
func (r *recycler) Allocate(size int) []byte {
	r.mu.Lock()
	best := -1
	for i, b := range r.free {
		if len(b) >= size && len(b) <= size+size/16 && (best < 0 || len(b) < len(r.free[best])) {
			best = i
		}
	}
	if best < 0 {
		r.mu.Unlock()
		return r.parent.Allocate(size)
	}
	b := r.free[best]
	last := len(r.free) - 1
	r.free[best] = r.free[last]
	r.free[last] = nil
	r.free = r.free[:last]
	r.mu.Unlock()
	clear(b)
	return b
}

// Reallocate implements memory.Allocator.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	return r.parent.Reallocate(size, b)
}

// Free implements memory.Allocator: b is kept while there is room and the
// recycler is open.
func (r *recycler) Free(b []byte) {
	r.mu.Lock()
	if !r.closed && len(r.free) < maxRecycled && len(b) > 0 {
		r.free = append(r.free, b)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.parent.Free(b)
}

// close gives the kept buffers back to the parent; buffers freed after it
// go straight to the parent.
func (r *recycler) close() {
	r.mu.Lock()
	free := r.free
	r.free, r.closed = nil, true
	r.mu.Unlock()
	for _, b := range free {
		r.parent.Free(b)
	}
}
