package windower

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/hugepage"
)

// Vectors: columns in evaluation form, and their conversion from and to
// Arrow arrays.

// kind is the evaluation representation of a column: every integer-like
// Arrow type (intN, uintN up to 32 bits, uint64 values that fit, date32,
// timestamp) evaluates as int64, floats as float64, utf8/binary as string.
type kind uint8

const (
	kindInt kind = iota
	kindFloat
	kindString
	kindBool // stored in ints as 0/1
)

func (k kind) String() string {
	switch k {
	case kindInt:
		return "integer"
	case kindFloat:
		return "float"
	case kindString:
		return "string"
	case kindBool:
		return "boolean"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// vector is one column in evaluation form. nulls is nil when no value is
// NULL; otherwise nulls[i] is true for a NULL at row i.
type vector struct {
	kind   kind
	typ    arrow.DataType // the Arrow type results of this column are written as
	ints   []int64
	floats []float64
	strs   []string
	nulls  []bool
	// payload is the bytes of string values appendArrow copied for this
	// vector (gathered copies share them and count none).
	payload int64
	// spare is the unused tail of the buffer appendArrow copies string
	// values into (stringBuffer), of spareSize bytes in all.
	spare     []byte
	spareSize int
	// strHint is the bytes of the column's strings when they are known
	// and the result returns them as they are read (0: not). Then the
	// first buffer stringBuffer makes is that large, and is kept as
	// whole: its bytes are never written again, and an Arrow array of
	// strings laid out back to back in it uses them as they are
	// (stringArray). Only that one is kept: a vector that takes chunk
	// after chunk must not hold every chunk's buffer.
	strHint int
	whole   []byte
	// strExpect is the bytes of strings the vector is expected to take
	// in all (0: not known), and strTaken those it took: a new buffer is
	// no larger than what is still expected (nor than the strings it
	// must hold), so that a load of long strings, whose blocks take the
	// buffers' doubling to its largest soon, does not hold twice what
	// its reservation counted.
	strExpect, strTaken int64
}

func (v *vector) len() int {
	switch v.kind {
	case kindFloat:
		return len(v.floats)
	case kindString:
		return len(v.strs)
	}
	return len(v.ints)
}

// newVector returns n zero values of kind k, written as typ, each with a
// NULL flag (all false) when nullable.
func newVector(k kind, typ arrow.DataType, n int, nullable bool) *vector {
	return leasedVector(nil, k, typ, n, nullable)
}

// leasedVector is newVector with its integer or float values lent by l
// (made fresh when l is nil). A lent buffer holds whatever its last
// borrower left, so the caller writes every row that is not NULL; the
// NULL flags are made fresh, all false.
func leasedVector(l *bufpool.Lease, k kind, typ arrow.DataType, n int, nullable bool) *vector {
	v := &vector{kind: k, typ: typ}
	switch k {
	case kindFloat:
		v.floats = bufpool.Make[float64](l, n)
	case kindString:
		v.strs = hugepage.Make[string](n, n)
	default:
		v.ints = bufpool.Make[int64](l, n)
	}
	if nullable {
		v.nulls = hugepage.Make[bool](n, n)
	}
	return v
}

// slice returns rows [from, to) of v sharing its storage, capped so that
// an append to the view cannot write past to. It counts no payload.
func (v *vector) slice(from, to int) *vector {
	w := &vector{kind: v.kind, typ: v.typ}
	switch v.kind {
	case kindFloat:
		w.floats = v.floats[from:to:to]
	case kindString:
		w.strs, w.whole = v.strs[from:to:to], v.whole
	default:
		w.ints = v.ints[from:to:to]
	}
	if v.nulls != nil {
		w.nulls = v.nulls[from:to:to]
	}
	return w
}

// appendVector appends src's rows to v. Strings are shared, not copied:
// their bytes are never written again.
func (v *vector) appendVector(src *vector) {
	base, n := v.len(), src.len()
	switch {
	case src.nulls != nil:
		if v.nulls == nil {
			v.nulls = make([]bool, base, base+n)
		}
		v.nulls = append(v.nulls, src.nulls...)
	case v.nulls != nil:
		v.nulls = append(v.nulls, make([]bool, n)...)
	}
	switch src.kind {
	case kindFloat:
		v.floats = append(v.floats, src.floats...)
	case kindString:
		v.strs = append(v.strs, src.strs...)
	default:
		v.ints = append(v.ints, src.ints...)
	}
}

// truncate keeps v's first n rows.
func (v *vector) truncate(n int) {
	switch v.kind {
	case kindFloat:
		v.floats = v.floats[:n]
	case kindString:
		v.strs = v.strs[:n]
	default:
		v.ints = v.ints[:n]
	}
	if v.nulls != nil {
		v.nulls = v.nulls[:n]
	}
}

func (v *vector) isNull(i int) bool { return v.nulls != nil && v.nulls[i] }

// bytes is the memory the vector holds, for the budget.
func (v *vector) bytes() int64 {
	return int64(len(v.ints))*8 + int64(len(v.floats))*8 + int64(len(v.strs))*16 + int64(len(v.nulls)) + v.payload
}

// kindOf maps an Arrow type to its evaluation kind.
func kindOf(t arrow.DataType) (kind, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.DATE32, arrow.TIMESTAMP:
		return kindInt, nil
	case arrow.FLOAT32, arrow.FLOAT64:
		return kindFloat, nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return kindString, nil
	case arrow.BOOL:
		return kindBool, nil
	}
	return 0, fmt.Errorf("%w: column type %s", ErrUnsupported, t)
}

// appendArrow appends the values of arr to v (whose kind matches arr's type).
func (v *vector) appendArrow(arr arrow.Array) error {
	n := arr.Len()
	base := v.len()
	if arr.NullN() > 0 {
		if v.nulls == nil {
			v.nulls = make([]bool, base, base+n)
		}
		for i := 0; i < n; i++ {
			v.nulls = append(v.nulls, arr.IsNull(i))
		}
	} else if v.nulls != nil {
		v.nulls = append(v.nulls, make([]bool, n)...)
	}
	switch a := arr.(type) {
	case *array.Int64:
		v.ints = append(v.ints, a.Int64Values()...)
	case *array.Int32:
		v.ints = appendWidened(v.ints, a.Int32Values())
	case *array.Int16:
		v.ints = appendWidened(v.ints, a.Int16Values())
	case *array.Int8:
		v.ints = appendWidened(v.ints, a.Int8Values())
	case *array.Uint8:
		v.ints = appendWidened(v.ints, a.Uint8Values())
	case *array.Uint16:
		v.ints = appendWidened(v.ints, a.Uint16Values())
	case *array.Uint32:
		v.ints = appendWidened(v.ints, a.Uint32Values())
	case *array.Uint64:
		for i, x := range a.Uint64Values() {
			if x > math.MaxInt64 && a.IsValid(i) {
				return fmt.Errorf("%w: uint64 value %d does not fit in int64", ErrUnsupported, x)
			}
			v.ints = append(v.ints, int64(x))
		}
	case *array.Date32:
		v.ints = appendWidened(v.ints, a.Date32Values())
	case *array.Timestamp:
		v.ints = appendWidened(v.ints, a.TimestampValues())
	case *array.Float64:
		v.floats = append(v.floats, a.Float64Values()...)
	case *array.Float32:
		v.floats = appendWidened(v.floats, a.Float32Values())
	case *array.String:
		appendStrings(v, a.ValueOffsets(), a.ValueBytes(), n)
	case *array.LargeString:
		appendStrings(v, a.ValueOffsets(), a.ValueBytes(), n)
	case *array.Binary:
		appendStrings(v, a.ValueOffsets(), a.ValueBytes(), n)
	case *array.LargeBinary:
		appendStrings(v, a.ValueOffsets(), a.ValueBytes(), n)
	case *array.Boolean:
		for i := 0; i < n; i++ {
			b := int64(0)
			if a.Value(i) {
				b = 1
			}
			v.ints = append(v.ints, b)
		}
	default:
		return fmt.Errorf("%w: column type %s", ErrUnsupported, arr.DataType())
	}
	return nil
}

// appendStrings appends the n values of a utf8 array (its offsets and
// value bytes) to v. The bytes are copied first, once for the whole
// array, into v's string buffer (counted in its payload): an array's
// buffers go back to the allocator when it is released (the recycler
// hands them out again for the next block), and a string must not
// outlive the memory it points into.
func appendStrings[O int32 | int64](v *vector, offsets []O, data []byte, n int) {
	if n == 0 {
		return
	}
	base := offsets[0]
	buf := v.stringBuffer(int(offsets[n] - base))
	copy(buf, data)
	for i := 0; i < n; i++ {
		lo, hi := offsets[i]-base, offsets[i+1]-base
		if lo == hi {
			v.strs = append(v.strs, "")
			continue
		}
		v.strs = append(v.strs, unsafe.String(&buf[lo], int(hi-lo)))
	}
}

// stringBuffer returns n bytes for string values, cut from the spare
// tail of the last buffer it made when they fit, else from a new one,
// which it counts whole in v's payload (its tail is memory v holds). A
// new buffer is twice the size of the one before, from
// minStringBuffer up to hugepage.MinBytes, and at least n: a block's
// strings are a fraction of that, and one buffer a block faulted its
// pages in one by one, while a vector of a few strings should not hold
// megabytes. The first is strHint bytes when that is more: a column
// whose bytes are known is one buffer.
func (v *vector) stringBuffer(n int) []byte {
	if n > len(v.spare) {
		size := max(n, min(max(2*v.spareSize, minStringBuffer), hugepage.MinBytes))
		first := v.spareSize == 0 && v.strHint > 0
		if first {
			size = max(size, v.strHint)
		}
		if v.strExpect > 0 {
			size = max(n, min(size, int(v.strExpect-v.strTaken)))
		}
		v.spare, v.spareSize = hugepage.Make[byte](size, size), size
		if first {
			v.whole = v.spare
		}
		v.payload += int64(size)
	}
	buf := v.spare[:n:n]
	v.spare = v.spare[n:]
	v.strTaken += int64(n)
	return buf
}

// minStringBuffer is the size of a vector's first string buffer.
const minStringBuffer = 64 << 10

// gather returns v's rows in the order perm (nil: v itself), reusing dst's storage.
func (v *vector) gather(perm []int32, dst *vector) *vector {
	if perm == nil {
		return v
	}
	dst.kind, dst.typ = v.kind, v.typ
	n := len(perm)
	switch v.kind {
	case kindFloat:
		dst.floats = grow(dst.floats, n)
		src, out := v.floats, dst.floats
		for i, p := range perm {
			out[i] = src[p]
		}
	case kindString:
		dst.strs = grow(dst.strs, n)
		src, out := v.strs, dst.strs
		for i, p := range perm {
			out[i] = src[p]
		}
	default:
		dst.ints = grow(dst.ints, n)
		src, out := v.ints, dst.ints
		for i, p := range perm {
			out[i] = src[p]
		}
	}
	if v.nulls == nil {
		dst.nulls = nil
	} else {
		dst.nulls = grow(dst.nulls, n)
		src, out := v.nulls, dst.nulls
		for i, p := range perm {
			out[i] = src[p]
		}
	}
	return dst
}

// scatter returns v's rows grouped by bucket (of[i] is row i's bucket,
// start[x] where bucket x begins in dst), each bucket's rows in input
// order: what gather gives with the permutation that orders rows stably
// by bucket, but reading v once in order and writing one stream per
// bucket instead of reading v once per bucket.
func (v *vector) scatter(of []uint16, start []int, dst *vector) *vector {
	dst.kind, dst.typ = v.kind, v.typ
	n := len(of)
	switch v.kind {
	case kindFloat:
		dst.floats = grow(dst.floats, n)
		scatterValues(dst.floats, v.floats, of, start)
	case kindString:
		dst.strs = grow(dst.strs, n)
		scatterValues(dst.strs, v.strs, of, start)
	default:
		dst.ints = grow(dst.ints, n)
		scatterValues(dst.ints, v.ints, of, start)
	}
	if v.nulls == nil {
		dst.nulls = nil
	} else {
		dst.nulls = grow(dst.nulls, n)
		scatterValues(dst.nulls, v.nulls, of, start)
	}
	return dst
}

// scatterValues writes src[i] to out at the next place of bucket of[i],
// the places of bucket x starting at start[x].
func scatterValues[T any](out, src []T, of []uint16, start []int) {
	next := slices.Clone(start)
	for i, x := range src[:len(of)] {
		b := of[i]
		out[next[b]] = x
		next[b]++
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return hugepage.Make[T](n, n)
}

// byteSpan is where a run of strings' bytes lie when each non-empty one
// starts where the one before it ends (backToBack): from first to end.
// They are addresses, not pointers: end is one past the last byte, which
// the collector must not take for a pointer into whatever follows, and
// the strings keep their bytes alive.
type byteSpan struct {
	backToBack bool
	first, end uintptr // first 0: no byte yet
}

// spanOf returns the span of strs's bytes, or one not back to back when
// they are not.
func spanOf(strs []string) byteSpan {
	var first, end uintptr
	for _, x := range strs {
		if len(x) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(x)))
		if first == 0 {
			first = p
		} else if p != end {
			return byteSpan{}
		}
		end = p + uintptr(len(x))
	}
	return byteSpan{backToBack: true, first: first, end: end}
}

// join extends the span by the next range's, r.
func (sp *byteSpan) join(r byteSpan) {
	switch {
	case !sp.backToBack:
	case !r.backToBack:
		sp.backToBack = false
	case r.first == 0: // no byte
	case sp.first == 0:
		sp.first, sp.end = r.first, r.end
	case r.first != sp.end:
		sp.backToBack = false
	default:
		sp.end = r.end
	}
}

// within returns the span's bytes as a slice of buf, or nil when buf does
// not hold them all (they may not be read as one slice across two
// allocations, even adjacent ones).
func (sp *byteSpan) within(buf []byte) []byte {
	if !sp.backToBack || sp.first == 0 {
		return nil
	}
	first, end := sp.first, sp.end
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	if first >= lo && end <= lo+uintptr(len(buf)) {
		return buf[first-lo : end-lo : end-lo]
	}
	return nil
}

// fill sets every element of s to x.
func fill[T any](s []T, x T) {
	for i := range s {
		s[i] = x
	}
}

// wrapFixed makes an Arrow array of a fixed-width type over values
// without copying them; the array keeps the Go memory alive. The validity
// bitmap is built on up to threads goroutines.
func wrapFixed(typ arrow.DataType, values []byte, nulls []bool, n, threads int, lease *bufpool.Lease) arrow.Array {
	buf, lent := lease.Wrap(values)
	defer buf.Release() // the array's data holds it
	var under []uint64
	if lent {
		// A lent buffer holds its last borrower's values where nothing
		// wrote: those under NULLs are zeroed as the bitmap is built.
		under = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(values))), n)
	}
	bitmap, nullN := validityBitmap(nulls, n, threads, under)
	data := array.NewData(typ, n, []*memory.Buffer{bitmap, buf}, nil, nullN, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// validityBitmap returns the validity bitmap of the first n of nulls (nil:
// no NULL, and then no bitmap), built on up to threads goroutines, and the
// number of NULLs; it sets under[i] to zero where nulls[i] (under nil:
// nothing to set).
func validityBitmap(nulls []bool, n, threads int, under []uint64) (*memory.Buffer, int) {
	if nulls == nil {
		return nil, 0
	}
	bm := make([]byte, bitutil.BytesForBits(int64(n)))
	if nullN := fillValidity(bm, nulls[:n], threads, under); nullN > 0 {
		return memory.NewBufferBytes(bm), nullN
	}
	return nil, 0
}

// byteRanges cuts rows 0..n-1 into up to threads ranges that start at
// multiples of 8 rows, so that each writes whole bytes of a bitmap (one
// range below parallelMinRows rows).
func byteRanges(n, threads int) [][2]int {
	if threads < 1 || n < parallelMinRows {
		threads = 1
	}
	ranges := make([][2]int, 0, threads)
	for k := 0; k < threads; k++ {
		lo, hi := k*n/threads&^7, (k+1)*n/threads&^7
		if k == threads-1 {
			hi = n
		}
		if lo < hi {
			ranges = append(ranges, [2]int{lo, hi})
		}
	}
	return ranges
}

// fillValidity writes the validity bitmap of nulls into bm (set: not
// NULL; bm may hold anything) on up to threads goroutines and returns
// the number of NULLs. Where nulls[i], it sets under[i] to zero (under
// nil: nothing to set).
//
// Eight flags are read at once as the bytes of a word, each 0 or 1: their
// count is the word's set bits, and multiplying by 0x0102040810204080
// gathers byte j's low bit into bit j of the top byte.
func fillValidity(bm []byte, nulls []bool, threads int, under []uint64) int {
	ranges := byteRanges(len(nulls), threads)
	counts := make([]int, len(ranges))
	flags := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(nulls))), len(nulls))
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1] // lo is a multiple of 8
		c, i := 0, lo
		for ; i+8 <= hi; i += 8 {
			x := binary.LittleEndian.Uint64(flags[i:])
			if x == 0 {
				bm[i/8] = 0xff
				continue
			}
			c += bits.OnesCount64(x)
			bm[i/8] = ^byte(x * 0x0102040810204080 >> 56)
			if under != nil {
				for j, null := range nulls[i : i+8] {
					if null {
						under[i+j] = 0
					}
				}
			}
		}
		if i < hi {
			var b byte
			for j, null := range nulls[i:hi] {
				if null {
					c++
					if under != nil {
						under[i+j] = 0
					}
				} else {
					b |= 1 << j
				}
			}
			bm[i/8] = b
		}
		counts[r] = c
	})
	nullN := 0
	for _, c := range counts {
		nullN += c
	}
	return nullN
}

// toArrow builds an Arrow array of v's type from v.
func (v *vector) toArrow(mem memory.Allocator) arrow.Array { return v.toArrowParallel(mem, 1, nil) }

// toArrowParallel is toArrow on up to threads goroutines (string columns
// are filled in ranges of rows). Integer and float values that lease lent
// are wrapped through it (bufpool.Lease.Wrap), so the array holds them
// until released, and their values under NULLs are set to zero: a lent
// buffer holds its last borrower's values where nothing wrote.
func (v *vector) toArrowParallel(mem memory.Allocator, threads int, lease *bufpool.Lease) arrow.Array {
	n := v.len()
	valid := func(i int) bool { return v.nulls == nil || !v.nulls[i] }
	validBytes := func() []bool {
		if v.nulls == nil {
			return nil
		}
		out := make([]bool, n)
		for i, x := range v.nulls {
			out[i] = !x
		}
		return out
	}
	switch v.typ.ID() {
	case arrow.INT64, arrow.TIMESTAMP:
		return wrapFixed(v.typ, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v.ints))), 8*n), v.nulls, n, threads, lease)
	case arrow.FLOAT64:
		return wrapFixed(v.typ, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v.floats))), 8*n), v.nulls, n, threads, lease)
	case arrow.STRING, arrow.BINARY:
		if arr := stringArray[int32](v, mem, threads); arr != nil {
			return arr
		}
		b := array.NewBuilder(mem, v.typ).(*array.BinaryBuilder)
		defer b.Release()
		b.Reserve(n)
		b.AppendStringValues(v.strs, validBytes())
		return b.NewArray()
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return stringArray[int64](v, mem, threads)
	}
	b := array.NewBuilder(mem, v.typ)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		if !valid(i) {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.Int32Builder:
			bb.Append(int32(v.ints[i]))
		case *array.Int16Builder:
			bb.Append(int16(v.ints[i]))
		case *array.Int8Builder:
			bb.Append(int8(v.ints[i]))
		case *array.Uint8Builder:
			bb.Append(uint8(v.ints[i]))
		case *array.Uint16Builder:
			bb.Append(uint16(v.ints[i]))
		case *array.Uint32Builder:
			bb.Append(uint32(v.ints[i]))
		case *array.Uint64Builder:
			bb.Append(uint64(v.ints[i]))
		case *array.Date32Builder:
			bb.Append(arrow.Date32(v.ints[i]))
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(v.ints[i]))
		case *array.Float32Builder:
			bb.Append(float32(v.floats[i]))
		case *array.BooleanBuilder:
			bb.Append(v.ints[i] != 0)
		default:
			// Types are checked when the query is planned; reaching here is a bug.
			panic(fmt.Sprintf("windower: no builder for %s", v.typ))
		}
	}
	return b.NewArray()
}

// stringArray builds a utf8 or binary array of v's type (offsets of type
// O) from v.strs: one offsets buffer and one data buffer, from mem and
// sized from the values, filled in ranges of rows on up to threads
// goroutines. When the values lie back to back in v's whole buffer (an
// input column read whole, returned in input order), the data buffer
// is those bytes, not a copy: Go memory the array keeps alive, which
// goMemoryBytes counts. It returns nil when the values' bytes overflow O.
func stringArray[O int32 | int64](v *vector, mem memory.Allocator, threads int) arrow.Array {
	n := len(v.strs)
	ranges := byteRanges(n, threads)
	sizes := make([]int64, len(ranges)+1) // the bytes of range r, then its offset
	nulls := make([]int, len(ranges))
	spans := make([]byteSpan, len(ranges))
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		var total int64
		if v.whole != nil {
			spans[r] = spanOf(v.strs[lo:hi])
		}
		if sp := spans[r]; sp.backToBack {
			total = int64(sp.end - sp.first)
		} else {
			for _, x := range v.strs[lo:hi] {
				total += int64(len(x))
			}
		}
		sizes[r] = total
		if v.nulls != nil {
			c := 0
			for _, null := range v.nulls[lo:hi] {
				if null {
					c++
				}
			}
			nulls[r] = c
		}
	})
	var total int64
	nullN := 0
	for r := range ranges {
		total, sizes[r] = total+sizes[r], total
		nullN += nulls[r]
	}
	sizes[len(ranges)] = total
	if int64(O(total)) != total {
		return nil
	}
	width := int(unsafe.Sizeof(O(0)))
	offsetsBuf := memory.NewResizableBuffer(mem)
	offsetsBuf.Resize((n + 1) * width)
	var dataBuf *memory.Buffer
	borrowed := total > 0 && v.whole != nil
	if borrowed {
		sp := byteSpan{backToBack: true}
		for _, r := range spans {
			sp.join(r)
		}
		in := sp.within(v.whole)
		if borrowed = int64(len(in)) == total; borrowed {
			dataBuf = memory.NewBufferBytes(in)
		}
	}
	if !borrowed {
		dataBuf = memory.NewResizableBuffer(mem)
		dataBuf.Resize(int(total))
	}
	var bitmapBuf *memory.Buffer
	if nullN > 0 {
		bitmapBuf = memory.NewResizableBuffer(mem)
		bitmapBuf.Resize(int(bitutil.BytesForBits(int64(n))))
	}
	offsets := unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(offsetsBuf.Bytes()))), n+1)
	data := dataBuf.Bytes()
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		at := sizes[r]
		if borrowed {
			for i, x := range v.strs[lo:hi] {
				offsets[lo+i] = O(at)
				at += int64(len(x))
			}
		} else {
			for i, x := range v.strs[lo:hi] {
				offsets[lo+i] = O(at)
				at += int64(copy(data[at:], x))
			}
		}
		if bitmapBuf != nil {
			bm := bitmapBuf.Bytes()
			// Whole bytes: a range starts at a multiple of 8 rows.
			clear(bm[lo/8 : (hi+7)/8])
			for i, null := range v.nulls[lo:hi] {
				if !null {
					bitutil.SetBit(bm, lo+i)
				}
			}
		}
	})
	offsets[n] = O(total)
	ad := array.NewData(v.typ, n, []*memory.Buffer{bitmapBuf, offsetsBuf, dataBuf}, nil, nullN, 0)
	for _, b := range []*memory.Buffer{bitmapBuf, offsetsBuf, dataBuf} {
		if b != nil {
			b.Release() // the array data holds them
		}
	}
	defer ad.Release()
	return array.MakeFromData(ad)
}

// appendWidened appends src to dst, converting each value to dst's wider type.
func appendWidened[D int64 | float64, S ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~float32](dst []D, src []S) []D {
	for _, x := range src {
		dst = append(dst, D(x))
	}
	return dst
}
