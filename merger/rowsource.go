package merger

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// The row-source stream records, for every output row of a vertical merge,
// which input it came from: runs of (input, count), written by the key merge
// and replayed once per gathered column. Its format is in the package doc.

const (
	rowSourceMagic = "SRS1"
	// rowSourceChunk is the payload size at which the writer closes a chunk.
	// A reader holds one chunk, so this also bounds its buffer.
	rowSourceChunk = 64 << 10
	// rowSourceMaxChunk is the largest payload a reader accepts: one full
	// chunk plus the longest run encoding that may overshoot it.
	rowSourceMaxChunk = rowSourceChunk + 2*binary.MaxVarintLen64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// reserver accounts Go-side buffers; *columnar.Budget satisfies it.
type reserver interface {
	Reserve(n int64) error
	Release(n int64)
}

// nopReserver accounts nothing.
type nopReserver struct{}

func (nopReserver) Reserve(int64) error { return nil }
func (nopReserver) Release(int64)       {}

// rowSourceWriter encodes runs into chunks, keeping the stream in memory
// until it reaches memLimit (or the reserver refuses more), then spilling it
// to a temporary file and streaming the rest there.
type rowSourceWriter struct {
	inputs   int
	memLimit int64
	tempDir  string
	res      reserver

	cur      run    // pending run, merged with appends of the same input
	payload  []byte // current chunk payload
	mem      []byte // closed chunks while in memory (header included)
	fixed    int64  // bytes reserved for payload and the spill file's buffer
	reserved int64  // bytes reserved for mem

	file    *os.File // non-nil once spilled
	fileBuf *bufio.Writer
	size    int64 // bytes of the encoded stream so far (closed chunks)

	runs, rows int64
	err        error
}

type run struct {
	input int
	count int64
}

// newRowSourceWriter starts a stream for a merge of inputs inputs.
func newRowSourceWriter(inputs int, memLimit int64, tempDir string, res reserver) (*rowSourceWriter, error) {
	if res == nil {
		res = nopReserver{}
	}
	w := &rowSourceWriter{inputs: inputs, memLimit: memLimit, tempDir: tempDir, res: res, cur: run{input: -1}}
	// The chunk buffer is needed whatever happens; the stream's own memory
	// is reserved as it grows.
	if err := res.Reserve(rowSourceWriterCost); err != nil {
		return nil, fmt.Errorf("row-source buffer: %w", err)
	}
	w.fixed = rowSourceWriterCost
	w.payload = make([]byte, 0, rowSourceMaxChunk)
	w.size = int64(len(rowSourceMagic))
	return w, nil
}

// append records count rows from input, coalescing with the previous run.
func (w *rowSourceWriter) append(input int, count int64) error {
	if w.err != nil {
		return w.err
	}
	if count <= 0 {
		return nil
	}
	if input < 0 || input >= w.inputs {
		return fmt.Errorf("%w: row-source input %d out of range [0,%d)", ErrInternal, input, w.inputs)
	}
	w.rows += count
	if input == w.cur.input {
		w.cur.count += count
		return nil
	}
	if w.cur.input >= 0 {
		w.encode(w.cur)
	}
	w.cur = run{input: input, count: count}
	return w.err
}

func (w *rowSourceWriter) encode(r run) {
	w.payload = binary.AppendUvarint(w.payload, uint64(r.input))
	w.payload = binary.AppendUvarint(w.payload, uint64(r.count))
	w.runs++
	if len(w.payload) >= rowSourceChunk {
		w.flushChunk()
	}
}

func (w *rowSourceWriter) flushChunk() {
	if len(w.payload) == 0 || w.err != nil {
		return
	}
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(w.payload)))
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc32.Checksum(w.payload, castagnoli))
	chunkLen := int64(n + len(w.payload) + 4)

	if w.file == nil && !w.growMem(chunkLen) {
		w.err = w.spill()
	}
	if w.err != nil {
		return
	}
	if w.file != nil {
		_, _ = w.fileBuf.Write(hdr[:n])
		_, _ = w.fileBuf.Write(w.payload)
		if _, err := w.fileBuf.Write(sum[:]); err != nil {
			w.err = fmt.Errorf("merger: write row-source spill: %w", err)
		}
	} else {
		w.mem = append(w.mem, hdr[:n]...)
		w.mem = append(w.mem, w.payload...)
		w.mem = append(w.mem, sum[:]...)
	}
	w.size += chunkLen
	w.payload = w.payload[:0]
}

// growMem makes room in mem for n more bytes within the memory limit.
func (w *rowSourceWriter) growMem(n int64) bool {
	if w.mem == nil {
		n += int64(len(rowSourceMagic))
	}
	need := int64(len(w.mem)) + n
	if need <= int64(cap(w.mem)) {
		return true
	}
	if need > w.memLimit {
		return false
	}
	// Double, up to memLimit: growing by only what is needed near the
	// limit would copy the whole stream again for every chunk.
	newCap := min(max(need, 2*int64(cap(w.mem))), w.memLimit)
	extra := newCap - int64(cap(w.mem))
	if err := w.res.Reserve(extra); err != nil {
		// No room for the doubling: take what this chunk needs, or spill.
		newCap = need
		extra = newCap - int64(cap(w.mem))
		if err := w.res.Reserve(extra); err != nil {
			return false
		}
	}
	w.reserved += extra
	grown := make([]byte, len(w.mem), newCap)
	copy(grown, w.mem)
	if w.mem == nil {
		grown = append(grown, rowSourceMagic...)
	}
	w.mem = grown
	return true
}

// spill moves the in-memory stream to a temporary file.
func (w *rowSourceWriter) spill() error {
	f, err := os.CreateTemp(w.tempDir, "strata-rowsource-*.srs")
	if err != nil {
		return fmt.Errorf("merger: create row-source spill: %w", err)
	}
	w.file = f
	head := w.mem
	if head == nil {
		head = []byte(rowSourceMagic)
	}
	if _, err := f.Write(head); err != nil {
		return fmt.Errorf("merger: write row-source spill %s: %w", f.Name(), err)
	}
	w.mem = nil
	w.res.Release(w.reserved)
	w.reserved = 0
	w.fileBuf = bufio.NewWriterSize(f, 64<<10) // within the fixed reservation
	return nil
}

// finish closes the stream and returns it for reading. The writer's buffers
// are released; the returned rowSource holds the in-memory stream (if any)
// until Close.
func (w *rowSourceWriter) finish() (*rowSource, error) {
	if w.err == nil && w.cur.input >= 0 {
		w.encode(w.cur)
		w.cur = run{input: -1}
	}
	w.flushChunk()
	if w.err != nil {
		w.abort()
		return nil, w.err
	}
	s := &rowSource{inputs: w.inputs, runs: w.runs, rows: w.rows, size: w.size, res: w.res}
	if w.file != nil {
		if err := w.fileBuf.Flush(); err != nil {
			w.abort()
			return nil, fmt.Errorf("merger: write row-source spill %s: %w", w.file.Name(), err)
		}
		s.file = w.file
		s.spilled = true
		w.file = nil
		w.res.Release(w.reserved + w.fixed)
		w.reserved, w.fixed = 0, 0
		return s, nil
	}
	if w.mem == nil {
		w.mem = []byte(rowSourceMagic) // empty stream
	}
	s.mem = w.mem
	s.memReserved = w.reserved
	w.res.Release(w.fixed)
	w.mem, w.reserved, w.fixed = nil, 0, 0
	w.payload = nil
	return s, nil
}

// abort drops the stream, removing any spill file.
func (w *rowSourceWriter) abort() {
	if w.file != nil {
		name := w.file.Name()
		w.file.Close()
		os.Remove(name)
		w.file = nil
	}
	w.res.Release(w.reserved + w.fixed)
	w.reserved, w.fixed = 0, 0
	w.mem = nil
}

// rowSource is a finished row-source stream, in memory or in a spill file.
// Any number of readers may read it at once.
type rowSource struct {
	inputs      int
	runs, rows  int64
	size        int64
	spilled     bool
	mem         []byte
	memReserved int64
	file        *os.File
	res         reserver
	sel         []uint16 // the whole stream as one selection vector, after expand
	selReserved int64
	live        *liveSel // instead of the stream: the selection vector the key merge is filling
}

// expand decodes the whole stream into s.sel, the input of every row, and
// drops the encoded stream.
func (s *rowSource) expand(res reserver) error {
	if s.inputs > maxSelInputs {
		return fmt.Errorf("%w: row source of %d inputs cannot be a selection vector", ErrInternal, s.inputs)
	}
	need := 2 * s.rows
	if err := res.Reserve(need); err != nil {
		return fmt.Errorf("selection vector of %d rows: %w", s.rows, err)
	}
	r, err := s.newReader(res)
	if err != nil {
		res.Release(need)
		return err
	}
	sel := make([]uint16, s.rows)
	f := selFiller{rr: r}
	n, err := f.fill(sel)
	if err == nil && (n != len(sel) || !f.done()) {
		err = fmt.Errorf("%w: stream holds other than the %d rows written", ErrRowSourceCorrupt, s.rows)
	}
	r.close()
	if err != nil {
		res.Release(need)
		return err
	}
	s.sel, s.selReserved = sel, need
	s.res.Release(s.memReserved)
	s.mem, s.memReserved = nil, 0
	return nil
}

// Close releases the stream's memory and removes its spill file.
func (s *rowSource) Close() error {
	s.res.Release(s.memReserved + s.selReserved)
	s.memReserved, s.selReserved = 0, 0
	s.sel = nil
	s.mem = nil
	if s.file != nil {
		name := s.file.Name()
		err := s.file.Close()
		if rerr := os.Remove(name); err == nil {
			err = rerr
		}
		s.file = nil
		return err
	}
	return nil
}

// newReader returns a reader positioned at the start of the stream. Its chunk
// buffer is reserved from res, and released by the reader's close.
func (s *rowSource) newReader(res reserver) (*rowSourceReader, error) {
	if res == nil {
		res = nopReserver{}
	}
	var src io.ReaderAt
	if s.file != nil {
		src = s.file
	} else {
		src = bytes.NewReader(s.mem)
	}
	bufSize := 0
	if s.spilled {
		bufSize = 64 << 10
	}
	need := int64(rowSourceMaxChunk + bufSize)
	if err := res.Reserve(need); err != nil {
		return nil, fmt.Errorf("row-source reader: %w", err)
	}
	r := &rowSourceReader{inputs: s.inputs, res: res, reserved: need}
	sr := io.NewSectionReader(src, 0, s.size)
	if s.spilled {
		r.br = bufio.NewReaderSize(sr, bufSize)
	} else {
		r.br = bufio.NewReaderSize(sr, 16) // the bytes are in memory already
	}
	r.payload = make([]byte, 0, rowSourceMaxChunk)
	var magic [len(rowSourceMagic)]byte
	if _, err := io.ReadFull(r.br, magic[:]); err != nil || string(magic[:]) != rowSourceMagic {
		r.close()
		return nil, fmt.Errorf("%w: bad magic", ErrRowSourceCorrupt)
	}
	r.offset = int64(len(rowSourceMagic))
	return r, nil
}

// rowSourceReader decodes runs one at a time.
type rowSourceReader struct {
	inputs   int
	br       *bufio.Reader
	payload  []byte
	pos      int   // decode position in payload
	offset   int64 // stream offset of the next chunk, for errors
	res      reserver
	reserved int64
}

// next returns the next run, or io.EOF at the end of the stream.
func (r *rowSourceReader) next() (input int, count int64, err error) {
	for r.pos >= len(r.payload) {
		if err := r.readChunk(); err != nil {
			return 0, 0, err
		}
	}
	in, n := binary.Uvarint(r.payload[r.pos:])
	if n <= 0 {
		return 0, 0, r.corrupt("bad input varint")
	}
	r.pos += n
	c, n := binary.Uvarint(r.payload[r.pos:])
	if n <= 0 {
		return 0, 0, r.corrupt("bad count varint")
	}
	r.pos += n
	if in >= uint64(r.inputs) {
		return 0, 0, r.corrupt(fmt.Sprintf("input %d out of range [0,%d)", in, r.inputs))
	}
	if c == 0 || c > 1<<53 {
		return 0, 0, r.corrupt(fmt.Sprintf("run count %d", c))
	}
	return int(in), int64(c), nil
}

func (r *rowSourceReader) readChunk() error {
	start := r.offset
	n, err := binary.ReadUvarint(r.br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return fmt.Errorf("%w: chunk at offset %d: length: %v", ErrRowSourceCorrupt, start, err)
	}
	if n == 0 || n > rowSourceMaxChunk {
		return fmt.Errorf("%w: chunk at offset %d: length %d", ErrRowSourceCorrupt, start, n)
	}
	r.payload = r.payload[:n]
	if _, err := io.ReadFull(r.br, r.payload); err != nil {
		return fmt.Errorf("%w: chunk at offset %d: payload: %v", ErrRowSourceCorrupt, start, err)
	}
	var sum [4]byte
	if _, err := io.ReadFull(r.br, sum[:]); err != nil {
		return fmt.Errorf("%w: chunk at offset %d: checksum: %v", ErrRowSourceCorrupt, start, err)
	}
	if binary.LittleEndian.Uint32(sum[:]) != crc32.Checksum(r.payload, castagnoli) {
		return fmt.Errorf("%w: chunk at offset %d: checksum mismatch", ErrRowSourceCorrupt, start)
	}
	r.offset += int64(uvarintLen(n)) + int64(n) + 4
	r.pos = 0
	return nil
}

func (r *rowSourceReader) corrupt(what string) error {
	return fmt.Errorf("%w: chunk before offset %d: %s", ErrRowSourceCorrupt, r.offset, what)
}

// close releases the reader's buffers.
func (r *rowSourceReader) close() {
	r.res.Release(r.reserved)
	r.reserved = 0
	r.payload = nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
