package columnar

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// decodeSlack is what decoding a block may allocate beyond its recorded
// raw size (buffer rounding, alignment).
const decodeSlack = 64 << 10

// ColumnReader streams the blocks of one column file. Each block is read
// with one ranged read into a buffer from the container's allocator,
// checked against its CRC-32C, and decoded with its buffers decompressed
// straight into buffers from the same allocator. For a compressed
// container the buffer the compressed bytes are read into is reused from
// block to block, so an open reader holds (and its allocator counts) up
// to one compressed block besides the arrays it returned.
//
// A file whose next block is not local (one read from an object store)
// is read one block ahead: while block i is decoded, block i+1 is
// fetched into a second buffer, if the allocator's budget has room for
// it, so such a reader holds up to two compressed blocks. A ColumnReader
// is not safe for concurrent use.
//
// An uncompressed block is read into a fresh buffer that its arrays
// slice, so that they outlive the reader, unless the caller takes the
// blocks transiently (ReuseBuffers): then every block is read into the
// reused buffer, and its arrays are valid until the next read.
type ColumnReader struct {
	c     *Container
	col   int
	meta  *FileMeta
	f     File
	dec   *blockDecoder
	next  int
	stats *IOStats
	// scratch holds the compressed bytes of the block being decoded; it
	// is kept (and counted by the allocator) until Close.
	scratch *memory.Buffer
	// spare is a second compressed-block buffer, for reading ahead.
	spare *memory.Buffer
	// ahead is the block being read ahead, if any.
	ahead *readAhead
	// transient is set by ReuseBuffers: a block's arrays slice scratch
	// and are the caller's only until the next read.
	transient bool
	// cache, set by UseCache, serves the blocks it holds and keeps a
	// copy of those read.
	cache *BlockCache
}

// readAhead is a block read in the background into buf.
type readAhead struct {
	block int
	buf   *memory.Buffer
	done  chan struct{}
	n     int
	err   error
}

func openColumnReader(c *Container, col int) (*ColumnReader, error) {
	fm := &c.m.Files[col]
	f, err := c.src.OpenFile(fm.Name, fm.Size)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, corruptf(c.dir, fm.Name, NoBlock, err, "column file missing")
		}
		return nil, fmt.Errorf("open column %q of container %s: %w", fm.Column, c.dir, err)
	}
	s := c.opts.Stats
	if s != nil {
		s.FilesOpened.Add(1)
	}
	if f.Size() != fm.Size {
		f.Close()
		return nil, corruptf(c.dir, fm.Name, NoBlock, nil, "file is %d bytes, manifest says %d", f.Size(), fm.Size)
	}
	header := make([]byte, fm.HeaderLen)
	if _, err := f.ReadAt(header, 0); err != nil {
		f.Close()
		return nil, corruptf(c.dir, fm.Name, NoBlock, err, "read header")
	}
	if got := crc32.Checksum(header, castagnoli); got != fm.HeaderCRC {
		f.Close()
		return nil, corruptf(c.dir, fm.Name, NoBlock, nil, "header checksum %08x, manifest says %08x", got, fm.HeaderCRC)
	}
	if string(header[:6]) != "ARROW1" {
		f.Close()
		return nil, corruptf(c.dir, fm.Name, NoBlock, nil, "not an Arrow IPC file")
	}
	r := &ColumnReader{
		c:     c,
		col:   col,
		meta:  fm,
		f:     f,
		dec:   newBlockDecoder(c.schema.Field(col).Type, c.opts.Allocator, &c.decomp),
		stats: s,
	}
	return r, nil
}

// Column returns the schema index of the column read.
func (r *ColumnReader) Column() int { return r.col }

// NumBlocks returns the number of blocks in the file.
func (r *ColumnReader) NumBlocks() int { return len(r.meta.Blocks) }

// Next returns the next block's array, or io.EOF after the last. The caller
// owns the array and must Release it.
func (r *ColumnReader) Next() (arrow.Array, error) {
	if r.f == nil {
		return nil, fmt.Errorf("read column %q of container %s: %w", r.meta.Column, r.c.dir, ErrClosed)
	}
	if r.next >= len(r.meta.Blocks) {
		return nil, io.EOF
	}
	arr, err := r.ReadBlock(r.next)
	if err != nil {
		return nil, err
	}
	r.next++
	return arr, nil
}

// Seek makes block the one Next returns next; Seek(NumBlocks()) is the end.
func (r *ColumnReader) Seek(block int) error {
	if block < 0 || block > len(r.meta.Blocks) {
		return fmt.Errorf("seek column %q of container %s: block %d out of range [0, %d]", r.meta.Column, r.c.dir, block, len(r.meta.Blocks))
	}
	r.next = block
	return nil
}

// ReadBlock reads and decodes block i without moving the stream position.
func (r *ColumnReader) ReadBlock(i int) (arrow.Array, error) {
	if r.f == nil {
		return nil, fmt.Errorf("read column %q of container %s: %w", r.meta.Column, r.c.dir, ErrClosed)
	}
	if i < 0 || i >= len(r.meta.Blocks) {
		return nil, fmt.Errorf("read column %q of container %s: block %d out of range [0, %d)", r.meta.Column, r.c.dir, i, len(r.meta.Blocks))
	}
	b := &r.meta.Blocks[i]
	var key blockKey
	if r.cache != nil {
		key = blockKey{container: r.c.dir, file: r.meta.Name, block: i}
		if arr := r.cache.get(key, b.CRC, b.Length); arr != nil {
			if s := r.stats; s != nil {
				s.BlocksCached.Add(1)
			}
			return arr, nil
		}
	}
	// Compressed blocks are read into a scratch buffer the reader keeps
	// (decoded arrays never point into it), and so are all blocks read
	// transiently (the arrays slice it until the next read); other
	// uncompressed ones into a fresh buffer the arrays slice.
	reused := r.reusesScratch()
	var buf *memory.Buffer
	var n int
	var err error
	if a := r.takeAhead(i); a != nil {
		buf, n, err = a.buf, a.n, a.err
		if reused {
			r.spare, r.scratch = r.scratch, buf
		}
	} else {
		r.letGoLent()
		buf = r.buffer(reused)
		buf.Resize(int(b.Length))
		n, err = r.f.ReadAt(buf.Bytes(), b.Offset)
	}
	if !reused {
		defer buf.Release()
	}
	if s := r.stats; s != nil {
		s.BlocksRead.Add(1)
		s.BytesRead.Add(int64(n))
	}
	if err != nil {
		return nil, r.corrupt(i, err, "read %d bytes at offset %d", b.Length, b.Offset)
	}
	r.readAhead(i + 1)
	if got := crc32.Checksum(buf.Bytes(), castagnoli); got != b.CRC {
		return nil, r.corrupt(i, nil, "checksum %08x, manifest says %08x", got, b.CRC)
	}
	rows := r.c.m.Blocks[i].Rows
	arr, err := r.dec.decode(buf, rows, 2*b.RawBytes+decodeSlack, reused && !r.transient)
	if err != nil {
		return nil, r.corrupt(i, err, "decode")
	}
	if s := r.stats; s != nil {
		s.BlocksDecompressed.Add(1)
		s.RawBytesRead.Add(b.RawBytes)
	}
	if r.cache != nil {
		r.cache.add(key, b.CRC, b.Length, arr)
	}
	return arr, nil
}

// UseCache makes the reader take the blocks cache holds from it, and keep
// there a copy of each block it reads (a nil cache: neither). An array
// from the cache is over the cache's memory, not the allocator's, is
// read-only, and outlives the reader and the block's eviction until it
// is released; the arrays of blocks read are as without a cache.
func (r *ColumnReader) UseCache(cache *BlockCache) { r.cache = cache }

// ReuseBuffers makes the reader read every block into the buffers it
// reuses, as it does a compressed container's: an uncompressed block's
// arrays then slice the buffer, and are valid only until the next
// ReadBlock or Next. It is for callers that copy what they read and
// release each array before reading on; they save allocating (and
// clearing) a buffer a block, and read into memory still in the caches.
// The buffer stays the reader's (and its allocator's count) until Close:
// a reader held open while its caller allocates much else costs that
// caller a block's room in its budget, where fresh buffers give theirs
// back block by block.
func (r *ColumnReader) ReuseBuffers() { r.transient = true }

// reusesScratch reports whether blocks are read into the reader's
// scratch buffer.
func (r *ColumnReader) reusesScratch() bool {
	return r.transient || r.c.m.Compression != CompressionNone.String()
}

// letGoLent is called before a block is read while the last block's
// arrays were lent (ReuseBuffers). Built with the strata_poison tag, the
// block is read into the other buffer and the one lent is poisoned (see
// Poison), so that a caller that kept an array past the next read reads
// PoisonByte, not the next block's bytes; otherwise it does nothing.
func (r *ColumnReader) letGoLent() {
	if !poisonFreed || !r.transient || r.scratch == nil {
		return
	}
	r.scratch, r.spare = r.spare, r.scratch
	Poison(r.spare.Bytes())
}

// buffer returns the buffer to read a block into synchronously: the
// scratch buffer if reused, else a fresh one.
func (r *ColumnReader) buffer(reused bool) *memory.Buffer {
	if !reused {
		return memory.NewResizableBuffer(r.c.opts.Allocator)
	}
	if r.scratch == nil {
		r.scratch = memory.NewResizableBuffer(r.c.opts.Allocator)
	}
	return r.scratch
}

// budgeted is an allocator that knows how many bytes it has left.
type budgeted interface{ Available() int64 }

// readAhead starts reading block i in the background if it exists, is
// not local, and the allocator has room for another block beside the
// ones the reader holds.
func (r *ColumnReader) readAhead(i int) {
	if r.ahead != nil || i >= len(r.meta.Blocks) {
		return
	}
	b := &r.meta.Blocks[i]
	if r.f.Local(b.Offset, b.Length) {
		return
	}
	buf := r.spare
	r.spare = nil
	if buf == nil || buf.Cap() < int(b.Length) {
		if bg, ok := r.c.opts.Allocator.(budgeted); ok && bg.Available() < 2*b.Length {
			r.spare = buf
			return
		}
		if buf == nil {
			buf = memory.NewResizableBuffer(r.c.opts.Allocator)
		}
	}
	buf.Resize(int(b.Length))
	a := &readAhead{block: i, buf: buf, done: make(chan struct{})}
	r.ahead = a
	go func() {
		defer close(a.done)
		a.n, a.err = r.f.ReadAt(buf.Bytes(), b.Offset)
	}()
}

// takeAhead returns the read of block i ahead, once it is done, or nil if
// block i is not the one read ahead (a read ahead of another block is
// waited for and its buffer kept as the spare or released).
func (r *ColumnReader) takeAhead(i int) *readAhead {
	a := r.ahead
	if a == nil {
		return nil
	}
	r.ahead = nil
	<-a.done
	if a.block == i {
		return a
	}
	if r.spare == nil && r.reusesScratch() {
		r.spare = a.buf
	} else {
		a.buf.Release()
	}
	return nil
}

// corrupt makes the CorruptError of block i and logs it.
func (r *ColumnReader) corrupt(block int, err error, format string, args ...any) error {
	ce := corruptf(r.c.dir, r.meta.Name, block, err, format, args...)
	r.c.opts.Logger.Warn("corrupt block", "container", r.c.dir, "file", r.meta.Name, "block", block, "err", ce.Error())
	return ce
}

// Close closes the file.
func (r *ColumnReader) Close() error {
	if r.f == nil {
		return nil
	}
	if a := r.ahead; a != nil {
		<-a.done
		a.buf.Release()
		r.ahead = nil
	}
	for _, b := range []**memory.Buffer{&r.scratch, &r.spare} {
		if *b != nil {
			(*b).Release()
			*b = nil
		}
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// BatchReader streams record batches of some columns of a container, one
// block of each column per batch.
type BatchReader struct {
	schema  *arrow.Schema
	readers []*ColumnReader
	nblocks int
	next    int
	// concurrency is how many columns' blocks ReadBlock reads at once.
	concurrency int
}

// ReadConcurrently makes ReadBlock read (and decode) the chosen columns'
// blocks on up to n goroutines at once; n <= 1, the default, reads them
// one after another. Each column has a reader of its own, so the batch is
// the same either way.
func (b *BatchReader) ReadConcurrently(n int) { b.concurrency = n }

// ReuseBuffers makes every column's reader reuse its buffers
// (ColumnReader.ReuseBuffers): a batch is valid only until the next
// ReadBlock or Next, and must be released before it.
func (b *BatchReader) ReuseBuffers() {
	for _, r := range b.readers {
		r.ReuseBuffers()
	}
}

// UseCache makes every column's reader use cache (ColumnReader.UseCache).
func (b *BatchReader) UseCache(cache *BlockCache) {
	for _, r := range b.readers {
		r.UseCache(cache)
	}
}

// Schema returns the schema of the batches: the chosen columns in order.
func (b *BatchReader) Schema() *arrow.Schema { return b.schema }

// NumBlocks returns the number of blocks (batches).
func (b *BatchReader) NumBlocks() int { return b.nblocks }

// Next returns the next batch, or io.EOF after the last. The caller owns
// the batch and must Release it.
func (b *BatchReader) Next() (arrow.RecordBatch, error) {
	if b.next >= b.nblocks {
		return nil, io.EOF
	}
	rec, err := b.ReadBlock(b.next)
	if err != nil {
		return nil, err
	}
	b.next++
	return rec, nil
}

// ReadBlock reads block i of every chosen column as one batch.
func (b *BatchReader) ReadBlock(i int) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(b.readers))
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	if g := min(b.concurrency, len(b.readers)); g > 1 {
		errs := make([]error, len(b.readers))
		var wg sync.WaitGroup
		wg.Add(g)
		for k := 0; k < g; k++ {
			go func() {
				defer wg.Done()
				for j := k; j < len(b.readers); j += g {
					cols[j], errs[j] = b.readers[j].ReadBlock(i)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	} else {
		for j, r := range b.readers {
			a, err := r.ReadBlock(i)
			if err != nil {
				return nil, err
			}
			cols[j] = a
		}
	}
	return array.NewRecordBatch(b.schema, cols, int64(cols[0].Len())), nil
}

// Seek makes block the one Next returns next.
func (b *BatchReader) Seek(block int) error {
	if block < 0 || block > b.nblocks {
		return fmt.Errorf("seek: block %d out of range [0, %d]", block, b.nblocks)
	}
	b.next = block
	return nil
}

// Close closes every column file.
func (b *BatchReader) Close() error {
	var first error
	for _, r := range b.readers {
		if err := r.Close(); err != nil && first == nil {
			first = err
		}
	}
	b.readers = nil
	return first
}
