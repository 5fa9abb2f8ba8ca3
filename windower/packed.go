package windower

import (
	"math"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// packedStrings is a string column of a chunk dealt to range buckets, laid
// out as an Arrow string array is: every row's bytes one after another in
// bucket order, and each row's first byte's offset. Bucket x's rows
// start[x] to start[x+1] are then an Arrow array over the same memory, with
// no copy: a vector's strings are copied once, into data, instead of their
// headers being dealt and the bytes copied again into a new Arrow array
// for each bucket, whose memory the collector cleared or the kernel
// faulted in. The storage is kept for the next chunk once this one is
// written (buckets.keepSpare), and holds no pointers for the collector to
// scan.
type packedStrings struct {
	offsets []int32 // row r's bytes are data[offsets[r]:offsets[r+1]]
	data    []byte
	nulls   []bool // nil: no row is NULL
	// active: the column of the chunk was dealt packed (deal reported
	// true), and is written from here.
	active bool
	// bucketBytes is scratch: the bytes dealt to each bucket, then where
	// the next row of each goes.
	bucketBytes []int32
}

// packable reports whether a string column of Arrow type typ is dealt
// packed: Arrow's string and binary types, whose offsets are 32 bits.
func packable(v *vector) bool {
	return v.kind == kindString && (v.typ.ID() == arrow.STRING || v.typ.ID() == arrow.BINARY)
}

// deal packs v's first len(of) rows into the buckets of, bucket x's rows
// (in input order) from start[x] on, or, when perm is not nil, the rows
// perm names in its order (which groups them by bucket). It reports false,
// leaving the column to be dealt as a vector, when its bytes pass what 32-bit
// offsets reach.
func (ps *packedStrings) deal(v *vector, of []uint16, perm []int32, start []int) bool {
	n, nb := len(of), len(start)-1
	strs := v.strs[:n]
	var total int64
	for _, s := range strs {
		total += int64(len(s))
	}
	if total > math.MaxInt32 {
		return false
	}
	ps.data = grow(ps.data, int(total))
	ps.offsets = grow(ps.offsets, n+1)
	ps.offsets[n] = int32(total)
	if perm != nil {
		at := int32(0)
		for k, i := range perm {
			ps.offsets[k] = at
			at += int32(copy(ps.data[at:], strs[i]))
		}
		ps.dealNulls(v, of, perm, start)
		return true
	}
	ps.bucketBytes = grow(ps.bucketBytes, nb)
	next := ps.bucketBytes
	clear(next)
	for i, s := range strs {
		next[of[i]] += int32(len(s))
	}
	at := int32(0)
	for x, b := range next {
		next[x] = at
		at += b
	}
	row := slices.Clone(start[:nb])
	for i, s := range strs {
		x := of[i]
		r, o := row[x], next[x]
		ps.offsets[r] = o
		copy(ps.data[o:], s)
		row[x], next[x] = r+1, o+int32(len(s))
	}
	ps.dealNulls(v, of, perm, start)
	return true
}

// dealNulls deals v's NULL flags as deal dealt its values.
func (ps *packedStrings) dealNulls(v *vector, of []uint16, perm []int32, start []int) {
	n := len(of)
	if v.nulls == nil {
		ps.nulls = nil
		return
	}
	ps.nulls = grow(ps.nulls, n)
	if perm == nil {
		scatterValues(ps.nulls, v.nulls, of, start)
		return
	}
	for k, i := range perm {
		ps.nulls[k] = v.nulls[i]
	}
}

// longest is the length of the longest of rows [lo, hi).
func (ps *packedStrings) longest(lo, hi int) int64 {
	var most int32
	for r := lo; r < hi; r++ {
		most = max(most, ps.offsets[r+1]-ps.offsets[r])
	}
	return int64(most)
}

// array returns rows [lo, hi) as an Arrow array of type typ over ps's
// memory, which it keeps alive; the validity bitmap is made anew.
func (ps *packedStrings) array(typ arrow.DataType, lo, hi int) arrow.Array {
	n := hi - lo
	var nulls []bool
	if ps.nulls != nil {
		nulls = ps.nulls[lo:hi]
	}
	bitmap, nullN := validityBitmap(nulls, n, 1, nil)
	offsets := unsafe.Slice((*byte)(unsafe.Pointer(&ps.offsets[lo])), 4*(n+1))
	data := array.NewData(typ, n, []*memory.Buffer{bitmap, memory.NewBufferBytes(offsets), memory.NewBufferBytes(ps.data)}, nil, nullN, 0)
	defer data.Release()
	return array.MakeFromData(data)
}
