// Package bufpool keeps the large buffers of a worker's finished jobs and
// lends them to the next.
//
// A windower job that runs in memory makes its columns anew: each int64
// and float64 column of its input and of its result is a buffer of as many
// values as the job has rows, which the runtime clears as it allocates it
// and which is garbage once the job's result is written. A worker that
// answers query after query over the same tables (a dashboard's) clears,
// fills and collects the same few buffers again and again, each time in
// memory the caches no longer hold; on the window suite's queries of a
// million rows that was a fifth to more than half of their time.
//
// A Pool keeps those buffers when a job is done with them and lends them
// to the next job that asks for one of the same size. Nothing clears a
// lent buffer: whoever borrows one writes every value it reads. A job
// borrows through a Lease, which it ends when it is done. A buffer
// returns to the pool once its lease has ended and every Arrow buffer
// made over it (Lease.Wrap) has been released, so a result batch that a
// reader still holds keeps its memory, and a batch released late never
// sees another job's values.
//
// The pool keeps at most its capacity in idle buffers, dropping the least
// recently returned to the collector first. A lent buffer is its job's
// memory, counted by the job's grant like any other; the idle buffers are
// the process's, as a block cache is. Requests under MinBytes are made
// fresh and never kept.
//
// Built with the strata_poison tag, every buffer is filled with
// columnar.PoisonByte as it is lent and as it returns, so a value read
// before it was written, or after its buffer went back, reads as garbage
// at once in the tests rather than as zero or as another job's value.
package bufpool

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/hugepage"
)

// MinBytes is the smallest buffer a Pool lends (unless WithMinBytes says
// otherwise): a smaller one costs little to clear and collect.
const MinBytes = 64 << 10

// Pool keeps idle buffers for Leases. It is safe for concurrent use; a nil
// *Pool keeps nothing, and its Lease is nil.
type Pool struct {
	capacity int64
	minBytes int

	mu    sync.Mutex
	idle  []*buffer // the least recently returned first
	bytes int64     // of idle
	stats Stats
}

// buffer is a buffer of the pool, lent or idle.
type buffer struct {
	b []byte
	// refs counts who holds a lent buffer: its lease until it ends, and
	// each Arrow buffer made over it until released. Guarded by Pool.mu.
	refs int
}

// Stats counts a Pool's work and holdings.
type Stats struct {
	Lent     int64 // buffers lent from the idle ones
	Made     int64 // buffers made because no idle one had the size
	Returned int64 // buffers that came back and were kept idle
	Dropped  int64 // buffers let go to stay within the capacity
	Buffers  int64 // idle buffers
	Bytes    int64 // idle bytes
	Capacity int64
}

// New returns a pool that keeps at most capacity bytes of idle buffers,
// or nil (no pool) if capacity is not positive.
func New(capacity int64) *Pool {
	if capacity <= 0 {
		return nil
	}
	return &Pool{capacity: capacity, minBytes: MinBytes}
}

// WithMinBytes makes p lend buffers of n bytes and more, not MinBytes
// and more, and returns p: tests lend small buffers to see them reused.
// It must be called before p lends any.
func (p *Pool) WithMinBytes(n int) *Pool {
	if p != nil {
		p.minBytes = max(n, 1)
	}
	return p
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Buffers, s.Bytes, s.Capacity = int64(len(p.idle)), p.bytes, p.capacity
	return s
}

// Lease starts a job's borrowing. A nil pool's lease is nil, which makes
// every buffer fresh.
func (p *Pool) Lease() *Lease {
	if p == nil {
		return nil
	}
	return &Lease{pool: p, lent: map[*byte]*buffer{}}
}

// take returns an idle buffer of size bytes, or nil.
func (p *Pool) take(size int) *buffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if b := p.idle[i]; len(b.b) == size {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.bytes -= int64(size)
			p.stats.Lent++
			return b
		}
	}
	p.stats.Made++
	return nil
}

// releaseLocked drops one reference to b, keeping b idle when it was the
// last. p.mu is held.
func (p *Pool) releaseLocked(b *buffer) {
	if b.refs--; b.refs > 0 {
		return
	}
	if int64(len(b.b)) > p.capacity {
		p.stats.Dropped++
		return
	}
	columnar.Poison(b.b)
	p.idle = append(p.idle, b)
	p.bytes += int64(len(b.b))
	p.stats.Returned++
	for p.bytes > p.capacity {
		p.bytes -= int64(len(p.idle[0].b))
		p.idle[0] = nil
		p.idle = p.idle[1:]
		p.stats.Dropped++
	}
}

// Lease is one job's borrowing from a Pool. Its methods are safe for
// concurrent use; a nil *Lease makes fresh buffers and keeps none.
type Lease struct {
	pool  *Pool
	lent  map[*byte]*buffer // by first byte; guarded by pool.mu
	ended bool
}

// Fixed are the element types a Lease lends: fixed-width values without
// pointers.
type Fixed interface {
	~int32 | ~uint32 | ~int64 | ~uint64 | ~float64
}

// Make returns a slice of n values lent by l, whose contents are
// undefined: the caller writes each before reading it. Under the pool's
// least size (MinBytes), or from a nil lease, the slice is made fresh
// (and zero), as hugepage.Make makes it.
func Make[T Fixed](l *Lease, n int) []T {
	size := int(unsafe.Sizeof(*new(T))) * n
	if l == nil || size < l.pool.minBytes {
		return hugepage.Make[T](n, n)
	}
	b := l.bytes(size, func() []byte { return bytesOf(hugepage.Make[T](n, n)) })
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// bytesOf is the memory of s as bytes.
func bytesOf[T Fixed](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), int(unsafe.Sizeof(*new(T)))*len(s))
}

// bytes lends a buffer of size bytes: an idle one, or one made by alloc
// (which the lease then holds and returns to the pool). Made outside the
// pool's lock: clearing a large buffer takes a while, and a job makes its
// columns on several goroutines at once.
func (l *Lease) bytes(size int, alloc func() []byte) []byte {
	b := l.pool.take(size)
	if b == nil {
		b = &buffer{b: alloc()}
	}
	columnar.Poison(b.b)
	l.pool.mu.Lock()
	defer l.pool.mu.Unlock()
	if l.ended {
		return b.b // lent after End: the caller keeps it, the pool does not
	}
	b.refs = 1
	l.lent[unsafe.SliceData(b.b)] = b
	return b.b
}

// Wrap returns an Arrow buffer over b, and whether b starts at a buffer l
// lent. If it does, the Arrow buffer holds that buffer, which returns to
// the pool only once the Arrow buffer (with every array and slice over
// it) is released and the lease has ended; if not, the Arrow buffer is
// memory.NewBufferBytes(b). Either way the caller releases it.
func (l *Lease) Wrap(b []byte) (*memory.Buffer, bool) {
	if l == nil || len(b) == 0 {
		return memory.NewBufferBytes(b), false
	}
	p := l.pool
	p.mu.Lock()
	lent := l.lent[unsafe.SliceData(b)]
	if lent != nil {
		lent.refs++
	}
	p.mu.Unlock()
	if lent == nil {
		return memory.NewBufferBytes(b), false
	}
	return memory.NewBufferWithAllocator(b, &holder{pool: p, b: lent}), true
}

// End gives back the lease's hold on every buffer it lent: those that no
// Arrow buffer holds return to the pool now, the others when released.
// The job must not touch a lent buffer after End but through an Arrow
// buffer from Wrap. End may be called more than once.
func (l *Lease) End() {
	if l == nil {
		return
	}
	p := l.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	for _, b := range l.lent {
		p.releaseLocked(b)
	}
	l.lent = nil
}

// holder is the memory.Allocator of an Arrow buffer made by Wrap: freeing
// the buffer drops its reference to the lent buffer. Such a buffer is not
// resizable, so Allocate and Reallocate are not called by Arrow; they
// allocate plainly, as memory.DefaultAllocator would.
type holder struct {
	pool *Pool
	b    *buffer
}

func (h *holder) Allocate(size int) []byte { return make([]byte, size) }

func (h *holder) Reallocate(size int, b []byte) []byte {
	out := make([]byte, size)
	copy(out, b)
	return out
}

func (h *holder) Free([]byte) {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	h.pool.releaseLocked(h.b)
}
