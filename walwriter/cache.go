package walwriter

import (
	"hash/maphash"
	"math/bits"
)

// imageCache holds the last logged image of recently updated keys,
// bounded in bytes with least-recently-used eviction. It is owned by the
// encoder goroutine and emptied whenever a checkpoint is written, so a
// delta's base is always after the last checkpoint.
//
// Entries are found by a 64-bit hash of table and key and then compared in
// full; two keys with the same hash evict each other, which only costs a
// full image.
type imageCache struct {
	limit   int64
	used    int64
	seed    maphash.Seed
	entries map[uint64]*cacheEntry
	head    cacheEntry // sentinel of the LRU list; head.next is the most recent
}

type cacheEntry struct {
	prev, next *cacheEntry
	hash       uint64
	table      *Table
	key        []byte
	row        Row
	buf        []byte // backing store of row's values
}

// cacheEntryOverhead approximates the memory of an entry beyond its bytes.
const cacheEntryOverhead = 128

func newImageCache(limit int64) *imageCache {
	c := &imageCache{limit: limit, seed: maphash.MakeSeed()}
	c.reset()
	return c
}

func (c *imageCache) reset() {
	c.entries = make(map[uint64]*cacheEntry)
	c.head.next, c.head.prev = &c.head, &c.head
	c.used = 0
}

// hash is the hash of table t's key that lookup and store take. It only
// reads the seed, so producers compute it concurrently, off the encoder.
func (c *imageCache) hash(t *Table, key []byte) uint64 {
	return bits.RotateLeft64(maphash.String(c.seed, t.Name), 31) ^ maphash.Bytes(c.seed, key)
}

// lookup returns the entry of key, whose hash is hash, or nil.
func (c *imageCache) lookup(t *Table, key []byte, hash uint64) *cacheEntry {
	e := c.entries[hash]
	if e == nil || e.table != t || string(e.key) != string(key) {
		return nil
	}
	return e
}

// store records row as the latest image of key, copying it. e is what
// lookup returned for the key (nil on a miss).
func (c *imageCache) store(e *cacheEntry, hash uint64, t *Table, key []byte, row Row) {
	if c.limit == 0 {
		return
	}
	if e == nil {
		if other := c.entries[hash]; other != nil {
			c.evict(other)
		}
		e = &cacheEntry{hash: hash, table: t, key: append([]byte(nil), key...), row: make(Row, len(row))}
		c.entries[hash] = e
		c.used += int64(len(e.key)) + cacheEntryOverhead + int64(len(row))*24
	} else {
		c.unlink(e)
		c.used -= int64(cap(e.buf))
	}
	e.buf = e.buf[:0]
	for _, v := range row {
		e.buf = append(e.buf, v...)
	}
	if e.buf == nil { // all values empty or NULL: keep empty values non-nil
		e.buf = make([]byte, 0, 1)
	}
	off := 0
	for i, v := range row {
		if v == nil {
			e.row[i] = nil
			continue
		}
		e.row[i] = e.buf[off : off+len(v) : off+len(v)]
		off += len(v)
	}
	c.used += int64(cap(e.buf))
	c.pushFront(e)
	for c.used > c.limit && c.head.prev != &c.head {
		c.evict(c.head.prev)
	}
}

func (c *imageCache) evict(e *cacheEntry) {
	c.unlink(e)
	delete(c.entries, e.hash)
	c.used -= int64(len(e.key)) + cacheEntryOverhead + int64(len(e.row))*24 + int64(cap(e.buf))
}

func (c *imageCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *imageCache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}
