package windower

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/internal/hugepage"
)

// Aggregate state: count, sum, avg, min and max over a set of rows, and
// the structures that keep it over sliding frames (monotonic deque,
// segment tree).

// aggState is the state of one aggregate over a set of rows. Integer sums
// are kept in 128 bits so add/remove never loses a carry and overflow of
// the final result is detected exactly.
type aggState struct {
	cnt int64
	lo  uint64  // low word of the integer sum
	hi  int64   // high word of the integer sum
	f   float64 // float sum
	m   int32   // row holding the min/max so far; -1 for none
	// nonFinite is set when an infinity or NaN was added to the float
	// sum: an infinite sum without one overflowed (overflows).
	nonFinite bool
}

func (s *aggState) reset() { *s = aggState{m: -1} }

// overflows reports whether the float sum overflowed: it is infinite,
// and every value added was finite. PostgreSQL's float8pl and float4pl
// (sum) and float8_accum (avg) make that an error (22003) rather than
// infinity; added in row order, as a whole partition and a running
// frame are, the sum is infinite exactly when one of PostgreSQL's
// additions was.
func (s *aggState) overflows() bool { return !s.nonFinite && math.IsInf(s.f, 0) }

// aggInput is an aggregate's argument column and filter, in sorted order.
type aggInput struct {
	fn     fn
	kind   kind // argument kind (kindInt for count(*))
	ints   []int64
	floats []float64
	strs   []string
	incl   []bool // rows that count (non-NULL argument, FILTER true); nil: all
	// prefixes, when not nil, are the first 8 bytes of each string value,
	// big-endian, zero-padded (stringPrefixes): min and max compare them
	// before the strings, whose bytes are scattered in memory.
	prefixes []uint64
	// overflow is set when an integer sum did not fit in int64, or a
	// float sum of finite values in its type (s.overflows).
	overflow bool
	// single is a sum of real (float4), added in float4 as PostgreSQL's
	// float4pl adds: each addition rounded to float4, so that a sum in
	// row order is PostgreSQL's bit for bit.
	single bool
}

func (a *aggInput) included(r int) bool { return a.incl == nil || a.incl[r] }

// add adds row r (which must be included) to s.
func (a *aggInput) add(s *aggState, r int) {
	s.cnt++
	switch a.fn {
	case fnSum, fnAvg:
		if a.single {
			s.f = a.add32(s.f, a.floats[r])
		} else if a.kind == kindFloat {
			x := a.floats[r]
			s.f += x
			if x-x != 0 { // infinite or NaN
				s.nonFinite = true
			}
		} else {
			v := a.ints[r]
			var c uint64
			s.lo, c = bits.Add64(s.lo, uint64(v), 0)
			s.hi += v>>63 + int64(c)
		}
	case fnMin, fnMax:
		if s.m < 0 || a.better(r, int(s.m)) {
			s.m = int32(r)
		}
	}
}

// remove takes row r out of s; only for count and integer sums.
func (a *aggInput) remove(s *aggState, r int) {
	s.cnt--
	if a.fn == fnSum || a.fn == fnAvg {
		v := a.ints[r]
		var b uint64
		s.lo, b = bits.Sub64(s.lo, uint64(v), 0)
		s.hi -= v>>63 + int64(b)
	}
}

// merge adds the rows of src to dst.
func (a *aggInput) merge(dst, src *aggState) {
	dst.cnt += src.cnt
	var c uint64
	dst.lo, c = bits.Add64(dst.lo, src.lo, 0)
	dst.hi += src.hi + int64(c)
	if a.single {
		dst.f = a.add32(dst.f, src.f)
	} else {
		dst.f += src.f
	}
	dst.nonFinite = dst.nonFinite || src.nonFinite
	if src.m >= 0 && (dst.m < 0 || a.better(int(src.m), int(dst.m))) {
		dst.m = src.m
	}
}

// add32 is x + y in float4, as PostgreSQL's float4pl: an overflow of
// finite values is an error (22003), not infinity.
func (a *aggInput) add32(x, y float64) float64 {
	s := float32(x) + float32(y)
	if math.IsInf(float64(s), 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
		a.overflow = true
	}
	return float64(s)
}

// better reports whether row r beats row cur for min (smaller) or max (larger).
func (a *aggInput) better(r, cur int) bool {
	var c int
	switch a.kind {
	case kindFloat:
		c = compareFloat(a.floats[r], a.floats[cur])
	case kindString:
		if a.prefixes != nil && a.prefixes[r] != a.prefixes[cur] {
			c = cmp.Compare(a.prefixes[r], a.prefixes[cur])
		} else {
			c = strings.Compare(a.strs[r], a.strs[cur])
		}
	default:
		c = cmpInt(a.ints[r], a.ints[cur])
	}
	if a.fn == fnMin {
		return c < 0
	}
	return c > 0
}

// invertible reports whether rows can be removed from a state.
func (a *aggInput) invertible() bool {
	switch a.fn {
	case fnCount:
		return true
	case fnSum, fnAvg:
		// Float sums are not inverted: removing a large value after
		// adding it loses the small ones (PostgreSQL does not either).
		return a.kind != kindFloat
	}
	return false
}

// write stores the result of s as row i of out.
func (a *aggInput) write(out *vector, i int, s *aggState) {
	switch a.fn {
	case fnCount:
		out.ints[i] = s.cnt
		return
	}
	if s.cnt == 0 {
		out.nulls[i] = true
		return
	}
	out.nulls[i] = false
	switch a.fn {
	case fnSum:
		if a.kind == kindFloat {
			a.overflow = a.overflow || s.overflows()
			out.floats[i] = s.f
			return
		}
		if s.hi != int64(s.lo)>>63 {
			a.overflow = true
		}
		out.ints[i] = int64(s.lo)
	case fnAvg:
		if a.kind == kindFloat {
			a.overflow = a.overflow || s.overflows()
			out.floats[i] = s.f / float64(s.cnt)
			return
		}
		out.floats[i] = int128ToFloat(s.hi, s.lo) / float64(s.cnt)
	case fnMin, fnMax:
		switch a.kind {
		case kindFloat:
			out.floats[i] = a.floats[s.m]
		case kindString:
			out.strs[i] = a.strs[s.m]
		default:
			out.ints[i] = a.ints[s.m]
		}
	}
}

func int128ToFloat(hi int64, lo uint64) float64 {
	if hi == int64(lo)>>63 {
		return float64(int64(lo)) // fits in 64 bits: one rounding
	}
	return float64(hi)*(1<<64) + float64(lo)
}

// deque is a monotonic deque of row numbers for sliding min/max: the
// values of its rows are strictly improving from back to front, so the
// front is the extreme of the window.
type deque struct {
	buf        []int32
	head, tail int
}

func (d *deque) reset(capacity int) {
	d.buf = grow(d.buf, capacity)
	d.head, d.tail = 0, 0
}

// push adds row r, dropping rows from the back that r makes irrelevant.
func (d *deque) push(a *aggInput, r int) {
	for d.tail > d.head && !a.better(int(d.buf[d.tail-1]), r) {
		d.tail--
	}
	d.buf[d.tail] = int32(r)
	d.tail++
}

// expire drops rows before start from the front.
func (d *deque) expire(start int) {
	for d.head < d.tail && int(d.buf[d.head]) < start {
		d.head++
	}
}

func (d *deque) front() int32 {
	if d.head == d.tail {
		return -1
	}
	return d.buf[d.head]
}

// segTree is a bottom-up segment tree of aggregate states over the rows
// of one partition, answering any range in O(log n).
type segTree struct {
	nodes []aggState
	size  int // leaves
	base  int // first row
}

func (t *segTree) build(a *aggInput, ps, pe int) {
	n := pe - ps
	t.size, t.base = n, ps
	t.nodes = grow(t.nodes, 2*n)
	for i := 0; i < n; i++ {
		st := &t.nodes[n+i]
		st.reset()
		if a.included(ps + i) {
			a.add(st, ps+i)
		}
	}
	for i := n - 1; i >= 1; i-- {
		st := &t.nodes[i]
		st.reset()
		a.merge(st, &t.nodes[2*i])
		a.merge(st, &t.nodes[2*i+1])
	}
}

// query merges the rows [l, r) (absolute row numbers) into dst.
func (t *segTree) query(a *aggInput, dst *aggState, l, r int) {
	l += t.size - t.base
	r += t.size - t.base
	// Collect right-side nodes in order so merges keep row order (float sums).
	var right [64]int
	nr := 0
	for l < r {
		if l&1 == 1 {
			a.merge(dst, &t.nodes[l])
			l++
		}
		if r&1 == 1 {
			r--
			right[nr] = r
			nr++
		}
		l >>= 1
		r >>= 1
	}
	for k := nr - 1; k >= 0; k-- {
		a.merge(dst, &t.nodes[right[k]])
	}
}

// stringPrefixes returns the first 8 bytes of each of strs as a
// big-endian word, zero-padded, on up to threads goroutines. Two strings
// whose words differ are ordered as their words: they differ in a byte
// both have, or one ends where the other has a byte above zero, a
// prefix of it. Equal words say nothing.
func stringPrefixes(strs []string, threads int) []uint64 {
	n := len(strs)
	out := hugepage.Make[uint64](n, n)
	if threads < 1 || n < parallelMinRows {
		threads = 1
	}
	ranges := splitRows(n, threads)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		for i, x := range strs[lo:hi] {
			out[lo+i] = stringPrefix(x)
		}
	})
	return out
}

// stringPrefix is x's first 8 bytes as a big-endian word, zeros past
// its end (see stringPrefixes).
func stringPrefix(x string) uint64 {
	if len(x) >= 8 {
		return binary.BigEndian.Uint64(unsafe.Slice(unsafe.StringData(x), 8))
	}
	var w uint64
	for k := 0; k < len(x); k++ {
		w |= uint64(x[k]) << (56 - 8*k)
	}
	return w
}

// sumsFloat32 reports whether c is a sum of real, added in float4
// (aggInput.single).
func (c *call) sumsFloat32() bool {
	return c.fn == fnSum && c.outKind == kindFloat && isFloat32(c.outTyp)
}

// isFloat32 reports whether t is float4 (real).
func isFloat32(t arrow.DataType) bool { return t != nil && t.ID() == arrow.FLOAT32 }
