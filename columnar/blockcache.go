package columnar

import (
	"container/list"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
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
// The cache holds at most its capacity in decoded bytes (the arrays'
// buffers), and evicts the least recently used block to take another. A
// block evicted while a reader holds it stays in memory until the reader
// releases it. Cached arrays are the process's memory, on the Go heap
// (with huge pages, package hugepage), not any job's: a worker with a
// cache holds it beside the grants it runs jobs in.
//
// A BlockCache is safe for concurrent use; a nil *BlockCache caches
// nothing.
type BlockCache struct {
	capacity int64
	mem      memory.Allocator

	mu      sync.Mutex
	bytes   int64
	lru     list.List // of *cachedBlock, most recently used first
	entries map[blockKey]*list.Element
	stats   BlockCacheStats
}

// blockKey names a block of a column file of a container.
type blockKey struct {
	container string // Source.String()
	file      string
	block     int
}

type cachedBlock struct {
	key    blockKey
	crc    uint32 // the block's checksum and stored length in the manifest it was read under
	length int64
	arr    arrow.Array
	size   int64
}

// BlockCacheStats counts a BlockCache's work and holdings.
type BlockCacheStats struct {
	Hits      int64 // blocks served from the cache
	Misses    int64 // blocks looked up and read from their files
	Evictions int64 // blocks dropped to make room
	Blocks    int64 // blocks held
	Bytes     int64 // decoded bytes held
	Capacity  int64
}

// NewBlockCache returns a cache of at most capacity decoded bytes, or nil
// (no cache) if capacity is not positive.
func NewBlockCache(capacity int64) *BlockCache {
	if capacity <= 0 {
		return nil
	}
	return &BlockCache{capacity: capacity, mem: hugepage.Allocator{}, entries: make(map[blockKey]*list.Element)}
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
	s.Blocks, s.Bytes, s.Capacity = int64(c.lru.Len()), c.bytes, c.capacity
	return s
}

// get returns the cached array of k, retained for the caller, if the
// cache holds it under the same checksum and length; else nil.
func (c *BlockCache) get(k blockKey, crc uint32, length int64) arrow.Array {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok {
		c.stats.Misses++
		return nil
	}
	b := e.Value.(*cachedBlock)
	if b.crc != crc || b.length != length {
		c.remove(e) // another container's block under the same name
		c.stats.Misses++
		return nil
	}
	c.lru.MoveToFront(e)
	c.stats.Hits++
	b.arr.Retain()
	return b.arr
}

// add caches arr as block k, read under the given checksum and length,
// taking a reference of its own, and evicts the least recently used
// blocks past the capacity. A block larger than half the cache is not
// cached.
func (c *BlockCache) add(k blockKey, crc uint32, length int64, arr arrow.Array) {
	size := arraySize(arr.Data())
	if size > c.capacity/2 {
		return
	}
	arr.Retain()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.remove(e) // read twice at once: keep the newer
	}
	c.entries[k] = c.lru.PushFront(&cachedBlock{key: k, crc: crc, length: length, arr: arr, size: size})
	c.bytes += size
	for c.bytes > c.capacity {
		c.remove(c.lru.Back())
		c.stats.Evictions++
	}
}

// remove drops e; c.mu is held.
func (c *BlockCache) remove(e *list.Element) {
	b := c.lru.Remove(e).(*cachedBlock)
	delete(c.entries, b.key)
	c.bytes -= b.size
	b.arr.Release()
}

// arraySize is the bytes of d's buffers and its children's.
func arraySize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, ch := range d.Children() {
		n += arraySize(ch)
	}
	return n
}
