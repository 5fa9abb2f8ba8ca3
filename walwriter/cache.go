package walwriter

import "hash/maphash"

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

func (c *imageCache) hash(t *Table, key []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(t.Name)
	h.WriteByte(0)
	h.Write(key)
	return h.Sum64()
}

// lookup returns the entry of key, or nil, and the key's hash.
func (c *imageCache) lookup(t *Table, key []byte) (*cacheEntry, uint64) {
	hash := c.hash(t, key)
	e := c.entries[hash]
	if e == nil || e.table != t || string(e.key) != string(key) {
		return nil, hash
	}
	return e, hash
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

// dedupWindow remembers the LSN of the last n event IDs written. IDs are
// found by a 64-bit hash and then compared in full with the ID kept in the
// ring, so a hash collision never drops an event; it only makes the older
// of the two IDs forgettable early.
type dedupWindow struct {
	seed  maphash.Seed
	index map[uint64]int32 // hash -> position in ring
	ring  []dedupEntry
	pos   int
}

type dedupEntry struct {
	id   string
	lsn  LSN
	hash uint64
}

func newDedupWindow(n int) *dedupWindow {
	return &dedupWindow{seed: maphash.MakeSeed(), index: make(map[uint64]int32, min(n, 1<<16)), ring: make([]dedupEntry, 0, min(n, 1<<16))}
}

func (d *dedupWindow) lookup(id string) (LSN, bool) {
	i, ok := d.index[maphash.String(d.seed, id)]
	if !ok || d.ring[i].id != id {
		return 0, false
	}
	return d.ring[i].lsn, true
}

// add remembers id, forgetting the oldest of window IDs when full.
func (d *dedupWindow) add(id string, lsn LSN, window int) {
	if window == 0 {
		return
	}
	e := dedupEntry{id, lsn, maphash.String(d.seed, id)}
	var at int
	if len(d.ring) < window {
		at = len(d.ring)
		d.ring = append(d.ring, e)
	} else {
		at = d.pos
		old := d.ring[at]
		if i, ok := d.index[old.hash]; ok && int(i) == at {
			delete(d.index, old.hash)
		}
		d.ring[at] = e
		d.pos = (d.pos + 1) % window
	}
	d.index[e.hash] = int32(at)
}

// len is the number of IDs remembered.
func (d *dedupWindow) len() int { return len(d.index) }
