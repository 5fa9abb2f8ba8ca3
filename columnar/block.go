package columnar

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const continuationMarker = 0xFFFFFFFF

// blockDecoder turns one column file's block messages (Arrow IPC record
// batch messages of a one-field schema) into arrays. It reads the message
// metadata itself and decompresses each buffer straight into a buffer from
// the allocator: one pass, no intermediate copies, no per-block codec
// set-up. The result is what arrow's IPC reader would produce (the tests
// check this), but several times cheaper for small blocks and zstd. The
// codec is the block's own (its BodyCompression), looked up once per block
// among the container's decompressors.
type blockDecoder struct {
	typ    arrow.DataType
	nbufs  int // buffers per array: validity, values (+ offsets for utf8/binary)
	mem    memory.Allocator
	decomp *decompressors // the container's, shared by its readers
}

func newBlockDecoder(typ arrow.DataType, mem memory.Allocator, decomp *decompressors) *blockDecoder {
	n := 2
	if typ.ID() == arrow.STRING || typ.ID() == arrow.BINARY {
		n = 3
	}
	return &blockDecoder{typ: typ, nbufs: n, mem: mem, decomp: decomp}
}

// batchLayout is what a record batch message's metadata says about its body.
type batchLayout struct {
	bodyLength int64
	length     int64 // rows of the batch
	nodeLength int64 // rows of the one field
	nullCount  int64
	buffers    [3][2]int64 // offset and length of each buffer in the body
	nbufs      int
	codec      int // Arrow codec id, or codecNone
}

// parseBatchLayout reads the Message and RecordBatch tables of a block's
// metadata (Arrow's Message.fbs), checking every offset and length it
// follows against the metadata's size.
func parseBatchLayout(meta []byte) (batchLayout, error) {
	var l batchLayout
	if err := checkRecordBatchMeta(meta); err != nil {
		return l, err
	}
	root, _ := fbU32(meta, 0)
	msg, _ := fbTableAt(meta, root)
	var err error
	if l.bodyLength, err = msg.int64Field(fbMessageBodyLength, 0); err != nil {
		return l, err
	}
	rb, _, _ := msg.subTable(fbMessageHeader)
	if l.length, err = rb.int64Field(fbRecordBatchLength, 0); err != nil {
		return l, err
	}
	pos, n, err := rb.vectorAt(fbRecordBatchNodes, 16)
	if err != nil {
		return l, err
	}
	if n != 1 {
		return l, fmt.Errorf("record batch has %d field nodes, want 1", n)
	}
	l.nodeLength = int64(binary.LittleEndian.Uint64(meta[pos:]))
	l.nullCount = int64(binary.LittleEndian.Uint64(meta[pos+8:]))
	pos, n, err = rb.vectorAt(fbRecordBatchBuffers, 16)
	if err != nil {
		return l, err
	}
	if n > len(l.buffers) {
		return l, fmt.Errorf("record batch has %d buffers, at most %d expected", n, len(l.buffers))
	}
	l.nbufs = n
	for i := range n {
		l.buffers[i][0] = int64(binary.LittleEndian.Uint64(meta[pos+16*i:]))
		l.buffers[i][1] = int64(binary.LittleEndian.Uint64(meta[pos+16*i+8:]))
	}
	if n, err := rb.vector(fbRecordBatchVariadic, 8); err != nil || n != 0 {
		return l, fmt.Errorf("record batch has variadic buffer counts (%d, %v)", n, err)
	}
	l.codec = codecNone
	comp, ok, err := rb.subTable(fbRecordBatchCompress)
	if err != nil {
		return l, err
	}
	if ok {
		codec, err := comp.byteField(0, arrowLZ4Frame)
		if err != nil {
			return l, err
		}
		method, err := comp.byteField(1, 0)
		if err != nil {
			return l, err
		}
		if method != 0 {
			return l, fmt.Errorf("unknown body compression method %d", method)
		}
		if !knownArrowCodec(codec) {
			return l, fmt.Errorf("unknown compression codec %d", codec)
		}
		l.codec = int(codec)
	}
	return l, nil
}

// decode turns one block's message bytes, held in buf, into the column's
// array of rows rows. Uncompressed buffers are slices of buf (retained);
// decompressed ones come from the decoder's allocator, at most maxBytes in
// all, so sizes a damaged block claims cannot make it allocate without
// limit.
//
// With borrowed set, buf is the caller's scratch, reused for the next block:
// the array must not reference it, so buffers stored uncompressed are
// copied out instead of sliced.
func (d *blockDecoder) decode(buf *memory.Buffer, rows int, maxBytes int64, borrowed bool) (arr arrow.Array, err error) {
	defer func() {
		if p := recover(); p != nil { // belt and braces: a decoder bug is an error, not a crash
			arr, err = nil, fmt.Errorf("decode block: %v", p)
		}
	}()
	meta, body, err := splitMessage(buf.Bytes())
	if err != nil {
		return nil, err
	}
	l, err := parseBatchLayout(meta)
	if err != nil {
		return nil, fmt.Errorf("block metadata: %w", err)
	}
	if l.bodyLength != int64(len(body)) {
		return nil, fmt.Errorf("message body is %d bytes, metadata says %d", len(body), l.bodyLength)
	}
	if l.length != int64(rows) || l.nodeLength != int64(rows) {
		return nil, fmt.Errorf("block has %d rows (field %d), manifest says %d", l.length, l.nodeLength, rows)
	}
	if l.nullCount < 0 || l.nullCount > int64(rows) {
		return nil, fmt.Errorf("block has %d NULLs in %d rows", l.nullCount, rows)
	}
	if l.nbufs != d.nbufs {
		return nil, fmt.Errorf("block has %d buffers, a %s column has %d", l.nbufs, d.typ, d.nbufs)
	}
	bodyOff := 8 + len(meta)
	bufs := make([]*memory.Buffer, d.nbufs)
	defer func() {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
	}()
	var dc decompressor
	if l.codec != codecNone {
		dc = d.decomp[l.codec]
	}
	budget := maxBytes
	for i := range d.nbufs {
		off, n := l.buffers[i][0], l.buffers[i][1]
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			return nil, fmt.Errorf("buffer %d at [%d, +%d) outside a %d-byte body", i, off, n, len(body))
		}
		if n == 0 {
			if i > 0 {
				bufs[i] = memory.NewBufferBytes(nil)
			}
			continue
		}
		if l.codec == codecNone {
			if bufs[i], err = d.bodyBuffer(buf, bodyOff+int(off), int(n), borrowed, &budget); err != nil {
				return nil, fmt.Errorf("buffer %d: %w", i, err)
			}
			continue
		}
		src := body[off : off+n]
		if len(src) < 8 {
			return nil, fmt.Errorf("compressed buffer %d of %d bytes lacks its length prefix", i, len(src))
		}
		size := int64(binary.LittleEndian.Uint64(src))
		if size == -1 { // stored uncompressed
			if bufs[i], err = d.bodyBuffer(buf, bodyOff+int(off)+8, int(n)-8, borrowed, &budget); err != nil {
				return nil, fmt.Errorf("buffer %d: %w", i, err)
			}
			continue
		}
		if size < 0 || size > budget {
			return nil, fmt.Errorf("buffer %d claims %d uncompressed bytes, more than the block's %d", i, size, maxBytes)
		}
		budget -= size
		out := memory.NewResizableBuffer(d.mem)
		bufs[i] = out
		out.Resize(int(size))
		if err := dc.decompress(src[8:], out.Bytes()); err != nil {
			return nil, fmt.Errorf("buffer %d: %w", i, err)
		}
	}
	data := array.NewData(d.typ, rows, bufs, nil, int(l.nullCount), 0)
	// Released however the decode ends, so that the buffers data holds
	// cannot leak.
	defer data.Release()
	if err := validateData(data); err != nil {
		return nil, err
	}
	return makeArray(data)
}

// bodyBuffer returns bytes [off, off+n) of buf as an array buffer: a slice
// of buf, or a copy if buf is borrowed.
func (d *blockDecoder) bodyBuffer(buf *memory.Buffer, off, n int, borrowed bool, budget *int64) (*memory.Buffer, error) {
	if !borrowed {
		return memory.SliceBuffer(buf, off, n), nil
	}
	if int64(n) > *budget {
		return nil, fmt.Errorf("%d bytes, more than the block's raw size allows", n)
	}
	*budget -= int64(n)
	out := memory.NewResizableBuffer(d.mem)
	out.Resize(n)
	copy(out.Bytes(), buf.Bytes()[off:off+n])
	return out, nil
}

// splitMessage splits an encapsulated IPC message (continuation marker,
// metadata length, metadata flatbuffer, body) into metadata and body.
func splitMessage(b []byte) (meta, body []byte, err error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("message of %d bytes is shorter than its 8-byte prefix", len(b))
	}
	if binary.LittleEndian.Uint32(b) != continuationMarker {
		return nil, nil, fmt.Errorf("message does not start with the continuation marker")
	}
	n := int64(int32(binary.LittleEndian.Uint32(b[4:])))
	if n < 8 || n%8 != 0 || n > int64(len(b)-8) {
		return nil, nil, fmt.Errorf("message metadata length %d invalid for a %d-byte message", n, len(b))
	}
	return b[8 : 8+n], b[8+n:], nil
}

// makeArray is array.MakeFromData with its panics (arrow checks some
// offsets as it builds an array) turned into errors. Data that passed
// validateData does not make it panic.
func makeArray(data arrow.ArrayData) (arr arrow.Array, err error) {
	defer func() {
		if p := recover(); p != nil {
			arr, err = nil, fmt.Errorf("invalid array: %v", p)
		}
	}()
	return array.MakeFromData(data), nil
}

// validateData checks, before an array is made of them, what arrow's IPC
// loader does not check of a block's buffers: that the offsets of a
// variable-width array are monotonic and inside the values buffer, and that
// buffers are long enough for the rows. Without this a corrupt block could
// make later reads of the array index out of range, or make arrow panic
// while building the array (after retaining the buffers).
func validateData(data arrow.ArrayData) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("invalid array: %v", p)
		}
	}()
	n := data.Len() + data.Offset()
	bufs := data.Buffers()
	if len(bufs) == 0 {
		return fmt.Errorf("array has no buffers")
	}
	if bufs[0] != nil && bufs[0].Len() > 0 {
		if int64(bufs[0].Len())*8 < int64(n) {
			return fmt.Errorf("validity bitmap of %d bytes shorter than %d rows", bufs[0].Len(), n)
		}
	} else if data.NullN() > 0 {
		return fmt.Errorf("%d NULLs but no validity bitmap", data.NullN())
	}
	if nn := data.NullN(); nn < 0 || nn > data.Len() {
		return fmt.Errorf("%d NULLs in %d rows", nn, data.Len())
	}
	switch data.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
		if len(bufs) < 3 || bufs[1] == nil || bufs[1].Len() < 4*(n+1) {
			return fmt.Errorf("offsets buffer shorter than %d rows", n)
		}
		vo := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[data.Offset() : n+1]
		var vals int
		if bufs[2] != nil {
			vals = bufs[2].Len()
		}
		prev := vo[0]
		if prev < 0 {
			return fmt.Errorf("negative first offset %d", prev)
		}
		for i, o := range vo[1:] {
			if o < prev {
				return fmt.Errorf("offset of row %d (%d) below the previous (%d)", i+1, o, prev)
			}
			prev = o
		}
		if int(prev) > vals {
			return fmt.Errorf("offsets reach %d beyond a %d-byte values buffer", prev, vals)
		}
	case arrow.BOOL:
		if n > 0 && (len(bufs) < 2 || bufs[1] == nil || int64(bufs[1].Len())*8 < int64(n)) {
			return fmt.Errorf("values bitmap shorter than %d rows", n)
		}
	default:
		w := data.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
		if n > 0 && (len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < w*n) {
			return fmt.Errorf("values buffer shorter than %d rows", n)
		}
	}
	return nil
}
