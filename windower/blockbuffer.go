package windower

import (
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// blockBuffer gathers the rows that one column of a range bucket gets
// from successive chunks until they make a spilled block.
//
// With many buckets, what a chunk deals to one bucket is a piece smaller
// than a block. Handing each piece to the bucket's writer meant copying it
// into memory of its own (the chunk's storage takes the next chunk), and
// the writer copying the pieces again into the block when it filled: two
// copies of every spilled byte, and two allocations a piece, which the
// collector cleared. A blockBuffer holds one block's Arrow buffers, made
// once and refilled: a piece is copied once, into the buffer, and a full
// buffer is written as the block.
//
// The buffers are laid out as Arrow lays out the column's type: a
// validity bitmap, then the values (fixed-width values, or a bitmap for
// booleans), or 32-bit offsets and the bytes for strings and binary, the
// types a container holds (columnar). Their bytes come from the grant's
// budget and go back to it with free.
type blockBuffer struct {
	typ   arrow.DataType
	mem   memory.Allocator
	width int // bytes of a fixed-width value; 0: bits (bool), -1: offsets and bytes
	cap   int // rows a block holds
	// strBytes is the string bytes a row is planned to hold (the input's
	// average): a block's string bytes are first made that many a row,
	// and grow by a quarter more than they need, so that what the
	// buffers of many buckets hold stays near what their rows planned.
	strBytes int64
	rows     int
	nulls    int
	valid    []byte // cap bits; set for the valid rows
	// values holds fixed-width values or a boolean bitmap; for strings, the
	// bytes of the rows, its length the bytes used.
	values  []byte
	offsets []int32 // strings: rows+1 offsets into values
}

// newBlockBuffer returns an empty buffer of rows rows of typ, of strBytes
// string bytes a row if typ holds strings, allocating from mem when first
// written; it fails for a type a container does not hold.
func newBlockBuffer(typ arrow.DataType, rows int, strBytes int64, mem memory.Allocator) (*blockBuffer, error) {
	bb := &blockBuffer{typ: typ, mem: mem, cap: rows, strBytes: strBytes}
	switch t := typ.(type) {
	case *arrow.BooleanType:
		bb.width = 0
	case *arrow.StringType, *arrow.BinaryType:
		bb.width = -1
	case arrow.FixedWidthDataType:
		if t.BitWidth()%8 != 0 {
			return nil, fmt.Errorf("spill block of %s: %d-bit values", typ, t.BitWidth())
		}
		bb.width = t.BitWidth() / 8
	default:
		return nil, fmt.Errorf("spill block of %s: not a type a container holds", typ)
	}
	return bb, nil
}

// room is how many more rows the block takes.
func (bb *blockBuffer) room() int { return bb.cap - bb.rows }

// full reports whether the block holds all its rows.
func (bb *blockBuffer) full() bool { return bb.rows == bb.cap }

// alloc makes the block's buffers, the string bytes' as planned
// (plannedStrings).
func (bb *blockBuffer) alloc() {
	bb.valid = bb.mem.Allocate(int(bitutil.BytesForBits(int64(bb.cap))))
	switch {
	case bb.width > 0:
		bb.values = bb.mem.Allocate(bb.cap * bb.width)
	case bb.width == 0:
		bb.values = bb.mem.Allocate(int(bitutil.BytesForBits(int64(bb.cap))))
	default:
		off := bb.mem.Allocate(4 * (bb.cap + 1))
		bb.offsets = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(off))), bb.cap+1)[:1]
		bb.offsets[0] = 0
		bb.values = bb.mem.Allocate(int(bb.plannedStrings()))[:0]
	}
}

// plannedStrings is the string bytes alloc makes: a block's rows at the
// planned bytes a row.
func (bb *blockBuffer) plannedStrings() int64 { return max(bb.strBytes*int64(bb.cap), 64) }

// fixedBytes is what alloc makes beside the string bytes: the validity
// bitmap, and the values or the offsets of a block's rows.
func (bb *blockBuffer) fixedBytes() int64 {
	n := bitutil.BytesForBits(int64(bb.cap))
	switch {
	case bb.width > 0:
		n += int64(bb.cap * bb.width)
	case bb.width == 0:
		n += bitutil.BytesForBits(int64(bb.cap))
	default:
		n += 4 * int64(bb.cap+1)
	}
	return n
}

// grownStrings is the string bytes a block of capacity have holds once
// it takes need bytes: have if they fit, else a quarter more than need.
func grownStrings(have, need int64) int64 {
	if need <= have {
		return have
	}
	return need + need/4
}

// bytesAfter is what the block's buffers will hold once n more rows are
// appended as writeColumn appends a piece: the rows that complete the
// block (then written and reset), the piece's whole blocks written from
// it, and the rest kept. strs gives the string bytes of the piece's rows
// [lo, hi) (strings only).
func (bb *blockBuffer) bytesAfter(n int, strs func(lo, hi int) int64) int64 {
	if n == 0 {
		return bb.bytes()
	}
	if bb.width >= 0 {
		return bb.fixedBytes()
	}
	have, used := bb.plannedStrings(), int64(0)
	if bb.valid != nil {
		have, used = int64(cap(bb.values)), int64(len(bb.values))
	}
	if bb.rows+n < bb.cap {
		return bb.fixedBytes() + grownStrings(have, used+strs(0, n))
	}
	off := 0
	if bb.rows > 0 {
		off = bb.room()
		have = grownStrings(have, used+strs(0, off))
	}
	whole := (n - off) / bb.cap * bb.cap
	return bb.fixedBytes() + grownStrings(have, strs(off+whole, n))
}

// append copies rows [lo, hi) of arr, which are at most room, to the end
// of the block.
func (bb *blockBuffer) append(arr arrow.Array, lo, hi int) {
	n := hi - lo
	if n <= 0 {
		return
	}
	d := arr.Data()
	at := d.Offset() + lo
	bufs := d.Buffers()
	if bb.valid == nil {
		bb.alloc()
	}
	if arr.NullN() == 0 || bufs[0] == nil {
		bitutil.SetBitsTo(bb.valid, int64(bb.rows), int64(n), true)
	} else {
		bitutil.CopyBitmap(bufs[0].Bytes(), at, n, bb.valid, bb.rows)
		bb.nulls += n - bitutil.CountSetBits(bb.valid, bb.rows, n)
	}
	switch {
	case bb.width > 0:
		w := bb.width
		copy(bb.values[bb.rows*w:], bufs[1].Bytes()[at*w:(at+n)*w])
	case bb.width == 0:
		bitutil.CopyBitmap(bufs[1].Bytes(), at, n, bb.values, bb.rows)
	default:
		src := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[at : at+n+1]
		data := bufs[2].Bytes()[src[0]:src[n]]
		if len(bb.values)+len(data) > cap(bb.values) {
			grown := bb.mem.Allocate(int(grownStrings(int64(cap(bb.values)), int64(len(bb.values)+len(data)))))[:len(bb.values)]
			copy(grown, bb.values)
			bb.mem.Free(bb.values[:cap(bb.values)])
			bb.values = grown
		}
		shift := int32(len(bb.values)) - src[0]
		for _, o := range src[1:] {
			bb.offsets = append(bb.offsets, o+shift)
		}
		bb.values = append(bb.values, data...)
	}
	bb.rows += n
}

// array returns the block's rows as an Arrow array over its buffers: it
// is valid until the block is reset or freed.
func (bb *blockBuffer) array() arrow.Array {
	var valid *memory.Buffer
	if bb.nulls > 0 {
		valid = memory.NewBufferBytes(bb.valid[:bitutil.BytesForBits(int64(bb.rows))])
	}
	var bufs []*memory.Buffer
	switch {
	case bb.width > 0:
		bufs = []*memory.Buffer{valid, memory.NewBufferBytes(bb.values[:bb.rows*bb.width])}
	case bb.width == 0:
		bufs = []*memory.Buffer{valid, memory.NewBufferBytes(bb.values[:bitutil.BytesForBits(int64(bb.rows))])}
	default:
		off := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(bb.offsets))), 4*len(bb.offsets))
		bufs = []*memory.Buffer{valid, memory.NewBufferBytes(off), memory.NewBufferBytes(bb.values)}
	}
	data := array.NewData(bb.typ, bb.rows, bufs, nil, bb.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// reset empties the block, keeping its buffers.
func (bb *blockBuffer) reset() {
	bb.rows, bb.nulls = 0, 0
	if bb.offsets != nil {
		bb.offsets = bb.offsets[:1]
		bb.values = bb.values[:0]
	}
}

// bytes is what the block's buffers hold.
func (bb *blockBuffer) bytes() int64 {
	return int64(len(bb.valid) + cap(bb.values) + 4*cap(bb.offsets))
}

// free gives the block's buffers back to the allocator.
func (bb *blockBuffer) free() {
	if bb.valid == nil {
		return
	}
	bb.mem.Free(bb.valid)
	bb.mem.Free(bb.values[:cap(bb.values)])
	if bb.offsets != nil {
		bb.mem.Free(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(bb.offsets))), 4*(bb.cap+1)))
	}
	bb.valid, bb.values, bb.offsets = nil, nil, nil
	bb.rows, bb.nulls = 0, 0
}
