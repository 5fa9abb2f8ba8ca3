package columnar

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// arrowDecoder is the reference the block decoder is tested against: it
// decodes a column file's record batch messages with arrow's own IPC
// reader, feeding it one message at a time.
type arrowDecoder struct {
	schema *arrow.Schema // the file's one-field schema
	header []byte        // the schema message: prefix and flatbuffer
	mem    *limitAllocator
	feed   messageFeed
	rdr    *ipc.Reader
}

func newArrowDecoder(schema *arrow.Schema, header []byte, mem memory.Allocator) *arrowDecoder {
	return &arrowDecoder{schema: schema, header: header, mem: &limitAllocator{parent: mem}}
}

// start makes the ipc.Reader, feeding it the schema message.
func (d *arrowDecoder) start() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode schema message: %v", p)
		}
	}()
	d.mem.left = 1 << 20
	meta, body, err := splitMessage(d.header)
	if err != nil {
		return fmt.Errorf("schema message: %w", err)
	}
	if len(body) != 0 {
		return fmt.Errorf("schema message has a %d-byte body", len(body))
	}
	msg := ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(nil))
	d.feed.msg = msg
	rdr, err := ipc.NewReaderFromMessageReader(&d.feed, ipc.WithSchema(d.schema), ipc.WithAllocator(d.mem))
	msg.Release()
	d.feed.msg = nil
	if err != nil {
		return err
	}
	d.rdr = rdr
	return nil
}

// decode turns one block's message bytes (held in buf, which the decoder
// retains as long as the array needs it) into the column's array. maxBytes
// bounds what decoding may allocate, so a block whose sizes lie cannot make
// the reader allocate without limit.
func (d *arrowDecoder) decode(buf *memory.Buffer, rows int, maxBytes int64) (arr arrow.Array, err error) {
	if d.rdr == nil {
		if err := d.start(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if p := recover(); p != nil {
			arr, err = nil, fmt.Errorf("decode block: %v", p)
			d.reset()
		}
	}()
	meta, body, err := splitMessage(buf.Bytes())
	if err != nil {
		return nil, err
	}
	if err := checkRecordBatchMeta(meta); err != nil {
		return nil, fmt.Errorf("block metadata: %w", err)
	}
	metaBuf := memory.SliceBuffer(buf, 8, len(meta))
	bodyBuf := memory.SliceBuffer(buf, 8+len(meta), len(body))
	msg := ipc.NewMessage(metaBuf, bodyBuf)
	metaBuf.Release()
	bodyBuf.Release()
	defer msg.Release()
	if msg.Type() != ipc.MessageRecordBatch {
		return nil, fmt.Errorf("message is a %s, want a record batch", msg.Type())
	}
	if msg.BodyLen() != int64(len(body)) {
		return nil, fmt.Errorf("message body is %d bytes, metadata says %d", len(body), msg.BodyLen())
	}
	d.mem.left = maxBytes
	d.feed.msg = msg
	rec, err := d.rdr.Read()
	d.feed.msg = nil
	if err != nil {
		d.reset()
		return nil, err
	}
	if rec == nil {
		d.reset()
		return nil, errors.New("no record batch decoded")
	}
	if rec.NumCols() != 1 || rec.NumRows() != int64(rows) {
		return nil, fmt.Errorf("decoded %d columns of %d rows, want 1 of %d", rec.NumCols(), rec.NumRows(), rows)
	}
	arr = rec.Column(0)
	if arr.Len() != rows {
		return nil, fmt.Errorf("decoded column has %d rows, batch says %d", arr.Len(), rows)
	}
	arr.Retain()
	if err := validateData(arr.Data()); err != nil {
		arr.Release()
		return nil, err
	}
	return arr, nil
}

// reset drops the ipc.Reader after an error (it refuses further reads).
func (d *arrowDecoder) reset() {
	if d.rdr != nil {
		d.rdr.Release()
		d.rdr = nil
	}
}

func (d *arrowDecoder) close() {
	d.reset()
}

// messageFeed is the ipc.MessageReader of a blockDecoder: it hands the
// reader the one message it is given, then io.EOF-like emptiness.
type messageFeed struct{ msg *ipc.Message }

func (f *messageFeed) Message() (*ipc.Message, error) {
	if f.msg == nil {
		return nil, errors.New("no message")
	}
	m := f.msg
	f.msg = nil
	return m, nil
}
func (f *messageFeed) Retain()  {}
func (f *messageFeed) Release() {}

// limitAllocator passes allocations to its parent until left bytes have
// been handed out, then panics; decode recovers the panic as an error.
// Arrow's loader trusts the uncompressed sizes written in a block, so this
// is what stops a corrupt size from allocating gigabytes.
type limitAllocator struct {
	parent memory.Allocator
	left   int64
}

func (a *limitAllocator) take(n int) {
	if int64(n) > a.left {
		panic(fmt.Sprintf("block needs more than its recorded size allows (%d bytes more)", int64(n)-a.left))
	}
	a.left -= int64(n)
}

func (a *limitAllocator) Allocate(n int) []byte {
	a.take(n)
	return a.parent.Allocate(n)
}

func (a *limitAllocator) Reallocate(n int, b []byte) []byte {
	if n > len(b) {
		a.take(n - len(b))
	}
	return a.parent.Reallocate(n, b)
}

func (a *limitAllocator) Free(b []byte) { a.parent.Free(b) }
