package columnar

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/internal/hugepage"
)

// BlockCache keeps decoded blocks of container columns in memory, so that
// a reader asked for a block it holds takes the decoded array instead of
// reading, checking and decompressing the block again. It is for queries
// that read the same small tables again and again (a dashboard's), as
// ClickHouse's uncompressed cache is; a scan of a table larger than the
// cache would only push out what others reuse, so its reader should not
// use one (see Admits).
//
// A block is cached under its container (the source's name: a directory,
// or an object store prefix), its column file and its number, with the
// CRC-32C and stored length the manifest gave it: a reader is served a
// cached block only if its own manifest gives the same. Committed
// containers never change, so a container removed and made again under the
// same name is the only way a key could name other bytes, and the
// checksum tells those apart. The blocks of removed containers age out.
//
// The cache holds at most its capacity in decoded bytes, and evicts the
// least recently used block to take another. Each block is kept as one
// buffer, its array's buffers back to back, in a slot of one table, and a
// hit makes a new array over it: the collector marks a handful of objects
// a block, not the arrays' dozen, and the cache's whole table as one. A
// block evicted while a reader holds its array stays in memory until the
// array is released. Cached blocks are the process's memory, on the Go
// heap (with huge pages, package hugepage), not any job's: a worker with a
// cache holds it beside the grants it runs jobs in.
//
// Beside blocks, the cache keeps values derived from a whole column file
// by whoever reads it (a windower's dictionary of a string column,
// AddColumnValue): they are named like a block, by the container, the
// file and what they are, served only under the file's CRC-32C and size
// in the reader's manifest, and take their place in the same LRU order
// and capacity at the bytes their maker gives.
//
// A BlockCache is safe for concurrent use; a nil *BlockCache caches
// nothing.
type BlockCache struct {
	capacity int64

	mu         sync.Mutex
	bytes      int64
	slots      []cachedBlock
	free       []int32 // slots not in use
	index      map[blockKey]int32
	head, tail int32 // the most and least recently used slots; -1: none
	stats      BlockCacheStats
}

// blockKey names a block of a column file of a container, or with value
// set, a value derived from the whole file (block is then -1).
type blockKey struct {
	container string // Source.String()
	file      string
	block     int
	value     string
}

// cachedBlock is a slot of the cache: a block's array as one buffer.
type cachedBlock struct {
	key    blockKey
	crc    uint32 // the block's checksum and stored length in the manifest it was read under
	length int64
	typ    arrow.DataType
	rows   int
	nulls  int
	size   int64       // bytes the slot counts against the capacity
	data   []byte      // the array's buffers back to back, each at a multiple of 64 bytes
	value  any         // a column value's (then data is nil, crc and length the file's)
	bufs   [3]bufferAt // where each buffer is in data
	nbufs  int         // buffers of the array (2, or 3 for strings)
	prev   int32       // the next more recently used slot; -1: none
	next   int32       // the next less recently used slot; -1: none
}

// bufferAt is where one of an array's buffers is in a cached block's data;
// n < 0 is a nil buffer (no validity bitmap).
type bufferAt struct{ off, n int }

// BlockCacheStats counts a BlockCache's work and holdings.
type BlockCacheStats struct {
	Hits      int64 // blocks served from the cache
	Misses    int64 // blocks looked up and read from their files
	Evictions int64 // blocks (and column values) dropped to make room
	Blocks    int64 // blocks (and column values) held
	Bytes     int64 // decoded bytes (and column values' bytes) held
	Capacity  int64
}

// NewBlockCache returns a cache of at most capacity decoded bytes, or nil
// (no cache) if capacity is not positive.
func NewBlockCache(capacity int64) *BlockCache {
	if capacity <= 0 {
		return nil
	}
	return &BlockCache{capacity: capacity, index: make(map[blockKey]int32), head: -1, tail: -1}
}

// Admits reports whether a read of bytes decoded bytes should use the
// cache: it must take at most half of it, so that one scan cannot push out
// everything the cache holds. A nil cache admits nothing.
func (c *BlockCache) Admits(bytes int64) bool {
	return c != nil && bytes <= c.capacity/2
}

// Stats returns the cache's counters.
func (c *BlockCache) Stats() BlockCacheStats {
	if c == nil {
		return BlockCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Blocks, s.Bytes, s.Capacity = int64(len(c.index)), c.bytes, c.capacity
	return s
}

// get returns a new array of the cached block k, if the cache holds it
// under the same checksum and length; else nil.
func (c *BlockCache) get(k blockKey, crc uint32, length int64) arrow.Array {
	c.mu.Lock()
	b := c.lookup(k, crc, length)
	if b == nil {
		c.stats.Misses++
		c.mu.Unlock()
		return nil
	}
	c.stats.Hits++
	hit := *b // data is never written again: the array is made unlocked
	c.mu.Unlock()
	bufs := make([]*memory.Buffer, hit.nbufs)
	for j, at := range hit.bufs[:hit.nbufs] {
		if at.n >= 0 {
			bufs[j] = memory.NewBufferBytes(hit.data[at.off : at.off+at.n : at.off+at.n])
		}
	}
	data := array.NewData(hit.typ, hit.rows, bufs, nil, hit.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// add caches a copy of arr as block k, read under the given checksum and
// length, and evicts the least recently used blocks past the capacity.
// A block larger than half the cache, or an array with children or a
// dictionary, is not cached.
func (c *BlockCache) add(k blockKey, crc uint32, length int64, arr arrow.Array) {
	d := arr.Data()
	bufs := d.Buffers()
	if len(bufs) > len(cachedBlock{}.bufs) || len(d.Children()) > 0 || d.DataType().ID() == arrow.DICTIONARY || d.Offset() != 0 {
		return
	}
	b := cachedBlock{key: k, crc: crc, length: length, typ: d.DataType(), rows: d.Len(), nulls: d.NullN(), nbufs: len(bufs), prev: -1, next: -1}
	size := 0
	for j, buf := range bufs {
		if buf == nil {
			b.bufs[j] = bufferAt{n: -1}
			continue
		}
		b.bufs[j] = bufferAt{off: size, n: buf.Len()}
		size += (buf.Len() + alignment - 1) &^ (alignment - 1)
	}
	if int64(size) > c.capacity/2 {
		return
	}
	b.data = hugepage.Make[byte](size, size)
	b.size = int64(size)
	for j, buf := range bufs {
		if buf != nil {
			copy(b.data[b.bufs[j].off:], buf.Bytes())
		}
	}
	c.insert(b)
}

// insert puts b in a slot, the most recently used, in place of any slot
// of the same key, and evicts the least recently used past the capacity.
func (c *BlockCache) insert(b cachedBlock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[b.key]; ok {
		c.remove(i) // read twice at once: keep the newer
	}
	var i int32
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
		c.slots[i] = b
	} else {
		i = int32(len(c.slots))
		c.slots = append(c.slots, b)
	}
	c.index[b.key] = i
	c.pushFront(i)
	c.bytes += b.size
	for c.bytes > c.capacity {
		c.remove(c.tail)
		c.stats.Evictions++
	}
}

// ColumnValue returns the value named name that AddColumnValue cached for
// column file f of the container at container (Container.Dir), if it
// was cached under f's checksum and size; else nil. A nil cache holds
// none. Its lookups are not counted in Stats' hits and misses, which are
// blocks'.
func (c *BlockCache) ColumnValue(container string, f *FileMeta, name string) any {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.lookup(blockKey{container: container, file: f.Name, block: -1, value: name}, f.CRC, f.Size); b != nil {
		return b.value
	}
	return nil
}

// lookup returns the slot of k, made the most recently used, if it was
// cached under checksum crc and length; else nil, and a slot of k cached
// under others (another container's, made again under the same name) is
// dropped. c.mu is held.
func (c *BlockCache) lookup(k blockKey, crc uint32, length int64) *cachedBlock {
	i, ok := c.index[k]
	if !ok {
		return nil
	}
	if b := &c.slots[i]; b.crc != crc || b.length != length {
		c.remove(i)
		return nil
	}
	c.unlink(i)
	c.pushFront(i)
	return &c.slots[i]
}

// AddColumnValue caches v, which its maker derived from every block of
// column file f of the container at container and which holds bytes of
// memory, under name. The cache never changes v: whoever takes it must
// not either. A value larger than half the cache is not kept.
func (c *BlockCache) AddColumnValue(container string, f *FileMeta, name string, v any, bytes int64) {
	if c == nil || bytes > c.capacity/2 {
		return
	}
	c.insert(cachedBlock{key: blockKey{container: container, file: f.Name, block: -1, value: name},
		crc: f.CRC, length: f.Size, size: max(bytes, 1), value: v, prev: -1, next: -1})
}

// alignment is where each buffer of a cached block starts: Arrow's
// 64-byte alignment.
const alignment = 64

// remove drops slot i; c.mu is held.
func (c *BlockCache) remove(i int32) {
	c.unlink(i)
	b := &c.slots[i]
	delete(c.index, b.key)
	c.bytes -= b.size
	*b = cachedBlock{}
	c.free = append(c.free, i)
}

// unlink takes slot i out of the recency order; c.mu is held.
func (c *BlockCache) unlink(i int32) {
	b := &c.slots[i]
	if b.prev >= 0 {
		c.slots[b.prev].next = b.next
	} else {
		c.head = b.next
	}
	if b.next >= 0 {
		c.slots[b.next].prev = b.prev
	} else {
		c.tail = b.prev
	}
	b.prev, b.next = -1, -1
}

// pushFront makes slot i the most recently used; c.mu is held.
func (c *BlockCache) pushFront(i int32) {
	b := &c.slots[i]
	b.prev, b.next = -1, c.head
	if c.head >= 0 {
		c.slots[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}
