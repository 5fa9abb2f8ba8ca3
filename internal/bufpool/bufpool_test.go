package bufpool

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// rows is a column size over MinBytes.
const rows = 3 * MinBytes / 8

// poisoned reports whether this build poisons buffers (strata_poison).
func poisoned() bool {
	b := []byte{0}
	columnar.Poison(b)
	return b[0] == columnar.PoisonByte
}

// int64Array wraps v as an Arrow int64 array through l.
func int64Array(l *Lease, v []int64) *array.Int64 {
	buf, _ := l.Wrap(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v)))
	data := array.NewData(arrow.PrimitiveTypes.Int64, len(v), []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release() // the data holds it
	defer data.Release()
	return array.NewInt64Data(data)
}

func fill(v []int64, base int64) {
	for i := range v {
		v[i] = base + int64(i)
	}
}

func TestLeaseLendsReturnedBuffers(t *testing.T) {
	p := New(64 << 20)
	l1 := p.Lease()
	a := Make[int64](l1, rows)
	if len(a) != rows || cap(a) != rows {
		t.Fatalf("Make(%d): len %d cap %d", rows, len(a), cap(a))
	}
	fill(a, 0)
	l1.End()
	if s := p.Stats(); s.Made != 1 || s.Returned != 1 || s.Buffers != 1 || s.Bytes != 8*rows {
		t.Fatalf("after the first lease: %+v, want one buffer made, returned and idle", s)
	}

	l2 := p.Lease()
	b := Make[int64](l2, rows)
	if unsafe.SliceData(b) != unsafe.SliceData(a) {
		t.Errorf("the second lease got a new buffer, want the one the first returned")
	}
	if poisonedInt64 := int64(-0x5a5a5a5a5a5a5a5b); poisoned() && b[0] != poisonedInt64 { // 0xa5 in every byte
		t.Errorf("a lent buffer reads %#x, want it poisoned", b[0])
	}
	f := Make[float64](l2, rows) // the same size, but that buffer is lent
	if unsafe.Pointer(unsafe.SliceData(f)) == unsafe.Pointer(unsafe.SliceData(b)) {
		t.Errorf("one buffer lent twice")
	}
	other := Make[int64](l2, rows+1)
	l2.End()
	if s := p.Stats(); s.Lent != 1 || s.Made != 3 || s.Returned != 4 || s.Buffers != 3 {
		t.Errorf("after the second lease: %+v, want 1 lent from idle, 3 made, 4 returned, 3 idle", s)
	}
	_ = other

	small := p.Lease()
	x := Make[int64](small, MinBytes/8-1)
	small.End()
	if s := p.Stats(); s.Made != 3 || s.Buffers != 3 {
		t.Errorf("a buffer under MinBytes went through the pool: %+v", s)
	}
	_ = x
}

// TestWrapHoldsBufferPastEnd: a result batch still held when its job's
// lease ends keeps its values while the next job borrows, and its buffer
// returns when the batch is released.
func TestWrapHoldsBufferPastEnd(t *testing.T) {
	p := New(64 << 20)
	l1 := p.Lease()
	a := Make[int64](l1, rows)
	fill(a, 1000)
	arr := int64Array(l1, a)
	slice := array.NewSlice(arr, 10, 20).(*array.Int64)
	arr.Release()
	own, lent := l1.Wrap(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 8))
	own.Release()
	if !lent {
		t.Fatal("Wrap: the lease's own buffer not reported lent")
	}
	l1.End()
	if s := p.Stats(); s.Buffers != 0 {
		t.Fatalf("a buffer an array holds went back at End: %+v", s)
	}

	l2 := p.Lease()
	b := Make[int64](l2, rows)
	if unsafe.SliceData(b) == unsafe.SliceData(a) {
		t.Fatal("the next lease got the buffer a slice still holds")
	}
	fill(b, -1)
	for i := range slice.Len() {
		if got, want := slice.Value(i), int64(1010+i); got != want {
			t.Fatalf("the held slice's row %d reads %d after the next job wrote, want %d", i, got, want)
		}
	}
	l2.End()
	slice.Release()
	if s := p.Stats(); s.Buffers != 2 || s.Returned != 2 {
		t.Errorf("after the slice's release: %+v, want both buffers idle", s)
	}
	l3 := p.Lease()
	defer l3.End()
	if c := Make[int64](l3, rows); unsafe.SliceData(c) != unsafe.SliceData(b) && unsafe.SliceData(c) != unsafe.SliceData(a) {
		t.Error("the third lease made a buffer with two of its size idle")
	}
}

func TestWrapOfOtherMemory(t *testing.T) {
	p := New(64 << 20)
	l := p.Lease()
	defer l.End()
	own := make([]int64, rows)
	arr := int64Array(l, own)
	arr.Release()
	if s := p.Stats(); s.Returned != 0 || s.Made != 0 {
		t.Errorf("memory the lease did not lend went through the pool: %+v", s)
	}
	var none *Lease
	v := Make[int64](none, rows)
	Make[int64](none, 0)
	int64Array(none, v).Release()
	none.End()
	if New(0) != nil || New(0).Lease() != nil || (New(0).Stats() != Stats{}) {
		t.Error("a pool of no capacity is not nil")
	}
}

func TestPoolKeepsAtMostCapacity(t *testing.T) {
	p := New(3 * 8 * rows)
	var held [][]int64
	l := p.Lease()
	for range 5 {
		held = append(held, Make[int64](l, rows))
	}
	l.End()
	s := p.Stats()
	if s.Bytes > s.Capacity || s.Buffers != 3 || s.Dropped != 2 {
		t.Fatalf("after 5 returned to a pool of 3: %+v", s)
	}
	big := p.Lease()
	Make[int64](big, 4*rows) // larger than the pool: never kept
	big.End()
	if s := p.Stats(); s.Dropped != 3 || s.Buffers != 3 {
		t.Errorf("a buffer larger than the pool: %+v, want it dropped and the idle ones kept", s)
	}
	_ = held
}

func TestLeasesConcurrent(t *testing.T) {
	p := New(8 * 8 * rows)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 50 {
				l := p.Lease()
				n := rows + (g+it)%3
				a := Make[int64](l, n)
				fill(a, int64(g*1_000_000+it))
				arr := int64Array(l, a)
				l.End()
				for i := 0; i < n; i += 997 {
					if arr.Value(i) != int64(g*1_000_000+it+i) {
						t.Errorf("goroutine %d run %d row %d: %d", g, it, i, arr.Value(i))
						break
					}
				}
				arr.Release()
			}
		}()
	}
	wg.Wait()
	if s := p.Stats(); s.Bytes > s.Capacity || s.Lent == 0 {
		t.Errorf("after concurrent leases: %+v", s)
	}
}
