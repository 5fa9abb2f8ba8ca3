package merger

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// columnBuilder accumulates one output column by copying runs of rows out of
// source arrays of the same type, byte ranges at a time (no per-value
// boxing), into buffers taken from the merge's allocator. finish hands the
// rows gathered so far over as an array and starts a new one.
type columnBuilder interface {
	// appendRun copies rows [start, start+n) of src.
	appendRun(src *blockView, start, n int) error
	// len is the number of rows gathered since the last finish.
	len() int
	// finish returns the rows gathered as an array (the caller releases it).
	finish() arrow.Array
	// release frees the builder's buffers.
	release()
}

// newColumnBuilder returns a builder for t sized for capRows rows per array.
func newColumnBuilder(t arrow.DataType, mem memory.Allocator, capRows int) (columnBuilder, error) {
	switch t.ID() {
	case arrow.BOOL:
		return &boolBuilder{validity: validity{mem: mem, capRows: capRows}, dtype: t}, nil
	case arrow.STRING, arrow.BINARY:
		return &binaryBuilder{validity: validity{mem: mem, capRows: capRows}, dtype: t}, nil
	}
	if fw, ok := t.(arrow.FixedWidthDataType); ok && fw.BitWidth()%8 == 0 && fw.BitWidth() > 0 {
		return &fixedBuilder{validity: validity{mem: mem, capRows: capRows}, dtype: t, width: fw.BitWidth() / 8}, nil
	}
	return nil, fmt.Errorf("merger: cannot gather column type %s: %w", t, columnar.ErrUnsupportedType)
}

// blockView is a source array's buffers, looked up once per block rather
// than once per run.
type blockView struct {
	arr     arrow.Array
	len     int
	off     int     // the array's offset into its buffers
	valid   []byte  // validity bitmap, nil when the block has no NULLs
	values  []byte  // fixed-width values or the boolean bitmap
	offsets []int32 // utf8/binary offsets (from the array's offset)
	data    []byte  // utf8/binary bytes
}

// newBlockView describes arr; arr must stay alive while the view is used.
func newBlockView(arr arrow.Array) blockView {
	d := arr.Data()
	bufs := d.Buffers()
	v := blockView{arr: arr, len: arr.Len(), off: d.Offset()}
	if arr.NullN() > 0 && len(bufs) > 0 && bufs[0] != nil {
		v.valid = bufs[0].Bytes()
	}
	if len(bufs) > 1 && bufs[1] != nil {
		v.values = bufs[1].Bytes()
	}
	switch arr.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
		if v.len > 0 {
			v.offsets = arrow.Int32Traits.CastFromBytes(v.values)[v.off : v.off+v.len+1]
		}
		if len(bufs) > 2 && bufs[2] != nil {
			v.data = bufs[2].Bytes()
		}
	}
	return v
}

// copyBits copies n bits from src at srcOff to dst at dstOff. Runs in a
// merge are mostly a few rows long, where a plain loop beats the word-wise
// bitmap copy (which allocates its readers and writers).
func copyBits(src []byte, srcOff int, dst []byte, dstOff, n int) {
	if n >= 64 {
		bitutil.CopyBitmap(src, srcOff, n, dst, dstOff)
		return
	}
	for i := range n {
		s, d := srcOff+i, dstOff+i
		if src[s>>3]&(1<<(s&7)) != 0 {
			dst[d>>3] |= 1 << (d & 7)
		} else {
			dst[d>>3] &^= 1 << (d & 7)
		}
	}
}

// setBits sets n bits of dst from off.
func setBits(dst []byte, off, n int) {
	if n >= 64 {
		bitutil.SetBitsTo(dst, int64(off), int64(n), true)
		return
	}
	for i := off; i < off+n; i++ {
		dst[i>>3] |= 1 << (i & 7)
	}
}

// validity is the null bitmap shared by the builders, allocated only once a
// null shows up.
type validity struct {
	mem     memory.Allocator
	capRows int
	n       int            // rows gathered
	bits    *memory.Buffer // nil while every row is valid
}

func (v *validity) appendValidity(src *blockView, start, n int) {
	if src.valid == nil {
		if v.bits != nil {
			setBits(v.bits.Bytes(), v.n, n)
		}
		return
	}
	copyBits(src.valid, src.off+start, v.ensureBits(), v.n, n)
}

// ensureBits allocates the bitmap on the first NULL, marking the rows
// gathered before it valid, and returns it.
func (v *validity) ensureBits() []byte {
	if v.bits == nil {
		v.bits = memory.NewResizableBuffer(v.mem)
		v.bits.Resize(int(bitutil.BytesForBits(int64(v.capRows))))
		bitutil.SetBitsTo(v.bits.Bytes(), 0, int64(v.n), true)
	}
	return v.bits.Bytes()
}

// take returns the bitmap and null count of the rows gathered, and resets.
func (v *validity) take() (*memory.Buffer, int) {
	bits, nulls := v.bits, 0
	if bits != nil {
		nulls = v.n - bitutil.CountSetBits(bits.Bytes(), 0, v.n)
		resizeOut(bits, int(bitutil.BytesForBits(int64(v.n))), v.n < v.capRows)
	}
	v.bits = nil
	v.n = 0
	return bits, nulls
}

func (v *validity) release() {
	if v.bits != nil {
		v.bits.Release()
		v.bits = nil
	}
}

// resizeOut sets an output buffer's length; a partial block (the last of a
// column, which may wait in the writer) also gives back the unused capacity.
func resizeOut(b *memory.Buffer, n int, partial bool) {
	if partial {
		b.Resize(n)
	} else {
		b.ResizeNoShrink(n)
	}
}

func makeArray(t arrow.DataType, n int, bufs []*memory.Buffer, nulls int) arrow.Array {
	data := array.NewData(t, n, bufs, nil, nulls, 0)
	arr := array.MakeFromData(data)
	data.Release()
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return arr
}

// fixedBuilder gathers fixed-width values (integers, floats, dates, timestamps).
type fixedBuilder struct {
	validity
	dtype  arrow.DataType
	width  int
	values *memory.Buffer
}

// ensureValues allocates the values buffer of an output block.
func (b *fixedBuilder) ensureValues() {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
		b.values.Resize(b.capRows * b.width)
	}
}

func (b *fixedBuilder) appendRun(src *blockView, start, n int) error {
	b.ensureValues()
	if b.n+n > b.capRows {
		return fmt.Errorf("%w: builder overflow: %d+%d rows > %d", ErrInternal, b.n, n, b.capRows)
	}
	w := b.width
	from := (src.off + start) * w
	dst := b.values.Bytes()[b.n*w:]
	if n == 1 {
		// Most runs are one row: move the value without a memmove call.
		switch w {
		case 8:
			binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src.values[from:]))
		case 4:
			binary.LittleEndian.PutUint32(dst, binary.LittleEndian.Uint32(src.values[from:]))
		case 2:
			binary.LittleEndian.PutUint16(dst, binary.LittleEndian.Uint16(src.values[from:]))
		default:
			copy(dst[:w], src.values[from:from+w])
		}
	} else {
		copy(dst, src.values[from:from+n*w])
	}
	b.appendValidity(src, start, n)
	b.n += n
	return nil
}

func (b *fixedBuilder) len() int { return b.n }

func (b *fixedBuilder) finish() arrow.Array {
	n := b.n
	values := b.values
	if values == nil {
		values = memory.NewResizableBuffer(b.mem)
	}
	resizeOut(values, n*b.width, n < b.capRows)
	bits, nulls := b.take()
	b.values = nil
	return makeArray(b.dtype, n, []*memory.Buffer{bits, values}, nulls)
}

func (b *fixedBuilder) release() {
	b.validity.release()
	if b.values != nil {
		b.values.Release()
		b.values = nil
	}
}

// boolBuilder gathers booleans (a bitmap of values).
type boolBuilder struct {
	validity
	dtype  arrow.DataType
	values *memory.Buffer
}

func (b *boolBuilder) appendRun(src *blockView, start, n int) error {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
		b.values.Resize(int(bitutil.BytesForBits(int64(b.capRows))))
	}
	if b.n+n > b.capRows {
		return fmt.Errorf("%w: builder overflow: %d+%d rows > %d", ErrInternal, b.n, n, b.capRows)
	}
	copyBits(src.values, src.off+start, b.values.Bytes(), b.n, n)
	b.appendValidity(src, start, n)
	b.n += n
	return nil
}

func (b *boolBuilder) len() int { return b.n }

func (b *boolBuilder) finish() arrow.Array {
	n := b.n
	values := b.values
	if values == nil {
		values = memory.NewResizableBuffer(b.mem)
	}
	resizeOut(values, int(bitutil.BytesForBits(int64(n))), n < b.capRows)
	bits, nulls := b.take()
	b.values = nil
	return makeArray(b.dtype, n, []*memory.Buffer{bits, values}, nulls)
}

func (b *boolBuilder) release() {
	b.validity.release()
	if b.values != nil {
		b.values.Release()
		b.values = nil
	}
}

// binaryBuilder gathers utf8 and binary values (int32 offsets + bytes).
type binaryBuilder struct {
	validity
	dtype   arrow.DataType
	offsets *memory.Buffer
	data    *memory.Buffer
	size    int // bytes of data used
	// last is the bytes of data of the last full block: the next block's
	// data buffer starts at about that size instead of growing to it by
	// doubling, which copies the bytes gathered so far at every step.
	last int
}

// newData allocates the data buffer of an output block.
func (b *binaryBuilder) newData() {
	b.data = memory.NewResizableBuffer(b.mem)
	if b.last > 0 {
		b.data.Resize(b.last + b.last/16)
	}
}

// begin allocates the offsets and data buffers of an output block, the
// data buffer of dataBytes bytes (0: sized from the last full block).
func (b *binaryBuilder) begin(dataBytes int) {
	if b.offsets != nil {
		return
	}
	b.offsets = memory.NewResizableBuffer(b.mem)
	b.offsets.Resize((b.capRows + 1) * 4)
	arrow.Int32Traits.CastFromBytes(b.offsets.Bytes())[0] = 0
	if dataBytes > 0 {
		b.data = memory.NewResizableBuffer(b.mem)
		b.data.Resize(dataBytes)
		return
	}
	b.newData()
}

func (b *binaryBuilder) appendRun(src *blockView, start, n int) error {
	b.begin(0)
	if b.n+n > b.capRows {
		return fmt.Errorf("%w: builder overflow: %d+%d rows > %d", ErrInternal, b.n, n, b.capRows)
	}
	srcOffs := src.offsets[start : start+n+1]
	lo, hi := int(srcOffs[0]), int(srcOffs[n])
	if b.size+hi-lo > math.MaxInt32 {
		return fmt.Errorf("%w: a block of %s values exceeds 2GiB", ErrUnsupported, b.dtype)
	}
	if need := b.size + hi - lo; need > b.data.Len() {
		b.data.ResizeNoShrink(max(need, 2*b.data.Len(), 4096))
	}
	copy(b.data.Bytes()[b.size:], src.data[lo:hi])
	dst := arrow.Int32Traits.CastFromBytes(b.offsets.Bytes())[b.n+1 : b.n+1+n]
	delta := int32(b.size - lo)
	for i := range dst {
		dst[i] = srcOffs[i+1] + delta
	}
	b.size += hi - lo
	b.appendValidity(src, start, n)
	b.n += n
	return nil
}

func (b *binaryBuilder) len() int { return b.n }

func (b *binaryBuilder) finish() arrow.Array {
	n := b.n
	offsets, data := b.offsets, b.data
	if offsets == nil {
		offsets = memory.NewResizableBuffer(b.mem)
		offsets.Resize(4)
		arrow.Int32Traits.CastFromBytes(offsets.Bytes())[0] = 0
		data = memory.NewResizableBuffer(b.mem)
	}
	resizeOut(offsets, (n+1)*4, n < b.capRows)
	resizeOut(data, b.size, n < b.capRows)
	bits, nulls := b.take()
	if n == b.capRows {
		b.last = b.size
	}
	b.offsets, b.data, b.size = nil, nil, 0
	return makeArray(b.dtype, n, []*memory.Buffer{bits, offsets, data}, nulls)
}

func (b *binaryBuilder) release() {
	b.validity.release()
	if b.offsets != nil {
		b.offsets.Release()
		b.data.Release()
		b.offsets, b.data = nil, nil
	}
}
