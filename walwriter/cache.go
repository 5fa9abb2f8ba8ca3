package walwriter

import (
	"hash/maphash"
	"math/bits"
)

// imageCache holds the last logged image of recently updated keys,
// bounded in bytes. It is owned by the encoder goroutine and emptied
// whenever a checkpoint is written, so a delta's base is always after the
// last checkpoint.
//
// Entries are found by a 64-bit hash of table and key and then compared in
// full; two keys with the same hash evict each other, which only costs a
// full image. Eviction is CLOCK (second chance), an approximation of LRU
// that, unlike a linked list, touches no other entry on a hit. An entry
// keeps its key and values in one buffer, so a lookup and the delta against
// its image touch few cache lines.
type imageCache struct {
	limit   int64
	used    int64
	seed    maphash.Seed
	entries map[uint64]*cacheEntry
	clock   []*cacheEntry // every entry; the hand sweeps it for a victim
	hand    int
}

type cacheEntry struct {
	hash       uint64
	table      *Table
	slot       int  // position in clock
	referenced bool // hit since the hand last passed
	key        []byte
	row        Row    // the image's values, NULLs nil
	buf        []byte // backing store of key, then row's values
}

// cacheEntryOverhead approximates the memory of an entry (the struct, its
// map and clock slots) beyond its buffer and row headers.
const cacheEntryOverhead = 136

func newImageCache(limit int64) *imageCache {
	return &imageCache{limit: limit, seed: maphash.MakeSeed(), entries: make(map[uint64]*cacheEntry)}
}

func (c *imageCache) reset() {
	clear(c.entries)
	clear(c.clock)
	c.clock = c.clock[:0]
	c.hand = 0
	c.used = 0
}

// hash is the hash of table t's key that lookup and store take; t is the
// registered table, which stays at its address while the WAL is open. It
// only reads the seed, so producers compute it concurrently, off the
// encoder.
func (c *imageCache) hash(t *Table, key []byte) uint64 {
	return bits.RotateLeft64(maphash.Comparable(c.seed, t), 31) ^ maphash.Bytes(c.seed, key)
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
		e = &cacheEntry{hash: hash, table: t, slot: len(c.clock), row: make(Row, len(row))}
		c.entries[hash] = e
		c.clock = append(c.clock, e)
		c.used += e.cost()
	}
	c.used -= int64(cap(e.buf))
	need := len(key)
	for _, v := range row {
		need += len(v)
	}
	if cap(e.buf) < need {
		e.buf = make([]byte, 0, need)
	}
	e.buf = append(e.buf[:0], key...)
	e.key = e.buf[:len(key):len(key)]
	for _, v := range row {
		e.buf = append(e.buf, v...)
	}
	off := len(key)
	for i, v := range row {
		if v == nil {
			e.row[i] = nil
			continue
		}
		e.row[i] = e.buf[off : off+len(v) : off+len(v)]
		off += len(v)
	}
	c.used += int64(cap(e.buf))
	e.referenced = true
	for c.used > c.limit && len(c.clock) > 0 {
		c.evictOne()
	}
}

// cost is the memory of e besides its buffer.
func (e *cacheEntry) cost() int64 { return cacheEntryOverhead + int64(len(e.row))*24 }

// evictOne evicts the first entry under the hand that was not hit since the
// hand last passed it, clearing the marks it passes.
func (c *imageCache) evictOne() {
	for {
		if c.hand >= len(c.clock) {
			c.hand = 0
		}
		e := c.clock[c.hand]
		if !e.referenced {
			c.evict(e)
			return
		}
		e.referenced = false
		c.hand++
	}
}

func (c *imageCache) evict(e *cacheEntry) {
	delete(c.entries, e.hash)
	last := c.clock[len(c.clock)-1]
	c.clock[e.slot] = last
	last.slot = e.slot
	c.clock[len(c.clock)-1] = nil
	c.clock = c.clock[:len(c.clock)-1]
	c.used -= e.cost() + int64(cap(e.buf))
}
