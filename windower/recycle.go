package windower

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// recycler is a memory.Allocator that keeps a few freed buffers for the
// next allocation of the same size. Reading a container decodes every
// block into fresh buffers of the same size; without reuse each is new
// memory, which a short-lived process pays for in page faults and the
// garbage collector in scans. Pooled buffers stay counted by the parent
// (the budget) until drain returns them.
type recycler struct {
	parent memory.Allocator
	mu     sync.Mutex
	keep   bool // pool freed buffers (false: pass everything through)
	pool   [][]byte
}

// maxPooled bounds the buffers a recycler keeps: a block's columns and
// their compressed forms.
const maxPooled = 16

func newRecycler(parent memory.Allocator) *recycler {
	return &recycler{parent: parent, keep: true}
}

// Allocate implements memory.Allocator.
func (r *recycler) Allocate(size int) []byte {
	r.mu.Lock()
	for i, b := range r.pool {
		if len(b) == size {
			last := len(r.pool) - 1
			r.pool[i] = r.pool[last]
			r.pool[last] = nil
			r.pool = r.pool[:last]
			r.mu.Unlock()
			clear(b) // as the parent would hand it out
			return b
		}
	}
	r.mu.Unlock()
	return r.parent.Allocate(size)
}

// Reallocate implements memory.Allocator.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	return r.parent.Reallocate(size, b)
}

// Free implements memory.Allocator. Built with the strata_poison tag a
// pooled buffer is poisoned (see columnar.Poison), as the parent poisons
// the others.
func (r *recycler) Free(b []byte) {
	r.mu.Lock()
	if r.keep && len(r.pool) < maxPooled && len(b) > 0 {
		columnar.Poison(b)
		r.pool = append(r.pool, b)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.parent.Free(b)
}

// drain frees the pooled buffers and stops pooling.
func (r *recycler) drain() {
	r.mu.Lock()
	pool := r.pool
	r.pool, r.keep = nil, false
	r.mu.Unlock()
	for _, b := range pool {
		r.parent.Free(b)
	}
}

// Available is the parent budget's room, so readers that read ahead only
// when there is room see it through the recycler.
func (r *recycler) Available() int64 {
	if b, ok := r.parent.(interface{ Available() int64 }); ok {
		return b.Available()
	}
	return 1<<63 - 1
}
