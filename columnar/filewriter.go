package columnar

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcFile writes to a file and keeps CRC-32C checksums of the whole file, of
// its header (the bytes before headerLen) and of the bytes since the last
// resetBlock.
type crcFile struct {
	f         *os.File
	pos       int64
	headerLen int64
	crc       uint32 // whole file
	headerCRC uint32
	blockCRC  uint32
}

func (w *crcFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	q := p[:n]
	w.crc = crc32.Update(w.crc, castagnoli, q)
	if h := w.headerLen - w.pos; h > 0 {
		k := int(min(h, int64(len(q))))
		w.headerCRC = crc32.Update(w.headerCRC, castagnoli, q[:k])
		q = q[k:]
	}
	w.blockCRC = crc32.Update(w.blockCRC, castagnoli, q)
	w.pos += int64(n)
	return n, err
}

// columnWriter writes one column file: an Arrow IPC file of one field whose
// record batches are the column's blocks.
type columnWriter struct {
	idx    int
	name   string // file name
	path   string
	field  arrow.Field
	schema *arrow.Schema // the one-field schema of the file
	mem    memory.Allocator
	comp   *blockCompressor // shared by the Writer's columns
	stats  *IOStats

	out     *crcFile
	started bool
	ipcRecs []ipcBlock // footer entries

	pending     []arrow.Array // slices of the caller's arrays not yet a full block
	pendingRows int
	rows        int64
	blocks      []FileBlock
	blockRows   []int
	keyParts    [][2][]byte // per block: key part of first and last row (key columns only)
	keyPos      int         // position in the sort key, or -1
	finished    bool
	meta        FileMeta
}

func (c *columnWriter) open() error {
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create column file: %w", err)
	}
	// The file starts with the 8-byte magic and padding, then the schema
	// message; the first block follows. Knowing this length lets the
	// checksums split header from blocks.
	p := ipc.GetSchemaPayload(c.schema, c.mem)
	defer p.Release()
	var cnt countWriter
	if _, err := p.WritePayload(&cnt); err != nil {
		f.Close()
		return fmt.Errorf("size schema message: %w", err)
	}
	c.out = &crcFile{f: f, headerLen: 8 + cnt.n}
	if _, err := c.out.Write([]byte(arrowMagic + "\x00\x00")); err != nil {
		f.Close()
		return fmt.Errorf("start arrow file: %w", err)
	}
	if _, err := p.WritePayload(c.out); err != nil {
		f.Close()
		return fmt.Errorf("start arrow file: %w", err)
	}
	c.started = true
	return nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// append adds the rows of arr, writing every block that fills up.
func (c *columnWriter) append(arr arrow.Array, blockRows int, enc *KeyEncoder) error {
	n := arr.Len()
	for off := 0; off < n; {
		if c.pendingRows == 0 && n-off >= blockRows {
			// A whole block straight from the caller's array: no copy.
			blk := arr
			if off != 0 || n != blockRows {
				blk = array.NewSlice(arr, int64(off), int64(off+blockRows))
			} else {
				blk.Retain()
			}
			err := c.writeBlock(blk, enc)
			blk.Release()
			if err != nil {
				return err
			}
			off += blockRows
			continue
		}
		m := min(blockRows-c.pendingRows, n-off)
		c.pending = append(c.pending, array.NewSlice(arr, int64(off), int64(off+m)))
		c.pendingRows += m
		off += m
		if c.pendingRows == blockRows {
			if err := c.flush(enc); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the pending rows as one block.
func (c *columnWriter) flush(enc *KeyEncoder) error {
	if c.pendingRows == 0 {
		return nil
	}
	var blk arrow.Array
	if len(c.pending) == 1 {
		blk = c.pending[0]
	} else {
		var err error
		blk, err = array.Concatenate(c.pending, c.mem)
		if err != nil {
			return fmt.Errorf("concatenate %d pieces of a block: %w", len(c.pending), err)
		}
		for _, a := range c.pending {
			a.Release()
		}
	}
	clear(c.pending)
	c.pending = c.pending[:0]
	c.pendingRows = 0
	err := c.writeBlock(blk, enc)
	blk.Release()
	return err
}

func (c *columnWriter) writeBlock(arr arrow.Array, enc *KeyEncoder) error {
	if !c.started {
		if err := c.open(); err != nil {
			return err
		}
	}
	start := c.out.pos
	c.out.blockCRC = 0
	metaLen, bodyLen, err := c.writeMessage(arr)
	if err != nil {
		return fmt.Errorf("write block %d: %w", len(c.blocks), err)
	}
	c.ipcRecs = append(c.ipcRecs, ipcBlock{offset: start, metaLen: metaLen, bodyLen: bodyLen})
	b := FileBlock{Offset: start, Length: c.out.pos - start, CRC: c.out.blockCRC, RawBytes: rawBytes(arr)}
	c.blocks = append(c.blocks, b)
	c.blockRows = append(c.blockRows, arr.Len())
	c.rows += int64(arr.Len())
	if c.keyPos >= 0 && enc != nil {
		first := enc.AppendColumn(nil, c.keyPos, arr, 0)
		last := enc.AppendColumn(nil, c.keyPos, arr, arr.Len()-1)
		c.keyParts = append(c.keyParts, [2][]byte{first, last})
	}
	if s := c.stats; s != nil {
		s.BlocksWritten.Add(1)
		s.BytesWritten.Add(b.Length)
		s.RawBytesWritten.Add(b.RawBytes)
	}
	return nil
}

// writeMessage writes arr as one record batch message: arrow's IPC encoder
// lays out its buffers uncompressed, and the Writer's compressor
// compresses them.
func (c *columnWriter) writeMessage(arr arrow.Array) (metaLen int32, bodyLen int64, err error) {
	rec := array.NewRecordBatch(c.schema, []arrow.Array{arr}, int64(arr.Len()))
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(c.mem))
	rec.Release()
	if err != nil {
		return 0, 0, fmt.Errorf("encode: %w", err)
	}
	s := c.comp.scratch.Get().(*blockScratch)
	defer c.comp.scratch.Put(s)
	s.raw.b = s.raw.b[:0]
	_, err = p.WritePayload(&s.raw)
	p.Release()
	if err != nil {
		return 0, 0, fmt.Errorf("encode: %w", err)
	}
	meta, body, err := splitMessage(s.raw.b)
	if err != nil {
		return 0, 0, fmt.Errorf("encode: %w", err)
	}
	l, err := parseBatchLayout(meta)
	if err != nil {
		return 0, 0, fmt.Errorf("encode: %w", err)
	}
	bufs := l.buffers[:l.nbufs]
	if c.comp.comp != nil || !laidOut(l, body) {
		bufs = make([][2]int64, l.nbufs)
		s.body = s.body[:0]
		for i := range l.nbufs {
			off, n := l.buffers[i][0], l.buffers[i][1]
			start := len(s.body)
			if s.body, err = c.comp.appendTo(s.body, body[off:off+n]); err != nil {
				return 0, 0, err
			}
			bufs[i] = [2]int64{int64(start), int64(len(s.body) - start)}
			for len(s.body)%bodyAlignment != 0 {
				s.body = append(s.body, 0)
			}
		}
		body = s.body
	}
	codec, compressed := c.comp.arrowCodec()
	m := recordBatchMeta(s.fb, l.length, l.nullCount, bufs, int64(len(body)), codec, compressed)
	metaLen, err = writeMessage(c.out, m, body)
	return metaLen, int64(len(body)), err
}

// laidOut reports whether l's buffers lie in body as an uncompressed
// block may hold them: in order, each 8-byte aligned (Arrow IPC's
// alignment) and inside the body. Arrow's encoder lays them out so, and
// such a body is written as it is, not copied first.
func laidOut(l batchLayout, body []byte) bool {
	var end int64
	for _, b := range l.buffers[:l.nbufs] {
		if b[0]%8 != 0 || b[0] < end || b[1] < 0 || b[0]+b[1] > int64(len(body)) {
			return false
		}
		end = b[0] + b[1]
	}
	return true
}

// finish writes the pending rows and the footer and closes the file.
func (c *columnWriter) finish(enc *KeyEncoder) error {
	if c.finished {
		return nil
	}
	if err := c.flush(enc); err != nil {
		return err
	}
	if !c.started {
		if err := c.open(); err != nil {
			return err
		}
	}
	if err := c.writeFooter(); err != nil {
		return fmt.Errorf("write footer: %w", err)
	}
	// No fsync here: Commit syncs all files at once, in parallel, which
	// costs a fraction of one fsync per file in turn.
	if err := c.out.f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	c.finished = true
	c.meta = FileMeta{
		Column:    c.field.Name,
		Name:      c.name,
		Size:      c.out.pos,
		CRC:       c.out.crc,
		HeaderLen: c.out.headerLen,
		HeaderCRC: c.out.headerCRC,
		Blocks:    c.blocks,
	}
	return nil
}

// writeFooter writes the end-of-stream marker, the footer, its length and
// the closing magic.
func (c *columnWriter) writeFooter() error {
	footer, err := fileFooter(c.schema, c.ipcRecs)
	if err != nil {
		return err
	}
	tail := binary.LittleEndian.AppendUint32(nil, continuationMarker)
	tail = binary.LittleEndian.AppendUint32(tail, 0)
	tail = append(tail, footer...)
	tail = binary.LittleEndian.AppendUint32(tail, uint32(len(footer)))
	tail = append(tail, arrowMagic...)
	_, err = c.out.Write(tail)
	return err
}

// discard releases pending arrays and closes the file without finishing it.
func (c *columnWriter) discard() {
	for _, a := range c.pending {
		a.Release()
	}
	c.pending = nil
	c.pendingRows = 0
	if c.out != nil && !c.finished {
		c.out.f.Close()
	}
	c.finished = true
}

// rawBytes is the size of an array's Arrow buffers as the IPC writer lays
// them out (validity bitmap, offsets, values), before compression.
func rawBytes(arr arrow.Array) int64 {
	n := int64(arr.Len())
	var b int64
	if arr.NullN() > 0 {
		b += (n + 7) / 8
	}
	switch arr.DataType().ID() {
	case arrow.BOOL:
		b += (n + 7) / 8
	case arrow.STRING, arrow.BINARY:
		vo, _ := bytesOffsets(arr)
		b += 4*(n+1) + int64(vo[n]-vo[0])
	default:
		b += n * int64(arr.DataType().(arrow.FixedWidthDataType).BitWidth()/8)
	}
	return b
}
