package walwriter

// imageCache holds the last logged image of recently updated keys, per
// table, bounded in bytes with least-recently-used eviction. It is owned by
// the committer goroutine and emptied whenever a new segment starts or a
// checkpoint is written, so a delta's base is always earlier in the same
// segment and after the last checkpoint.
type imageCache struct {
	limit  int64
	used   int64
	tables map[*Table]map[string]*cacheEntry
	head   cacheEntry // sentinel of the LRU list; head.next is the most recent
}

type cacheEntry struct {
	prev, next *cacheEntry
	table      *Table
	key        string
	row        Row
	buf        []byte // backing store of row's values
}

// cacheEntryOverhead approximates the memory of an entry beyond its bytes.
const cacheEntryOverhead = 96

func newImageCache(limit int64) *imageCache {
	c := &imageCache{limit: limit}
	c.reset()
	return c
}

func (c *imageCache) reset() {
	c.tables = make(map[*Table]map[string]*cacheEntry)
	c.head.next, c.head.prev = &c.head, &c.head
	c.used = 0
}

func (c *imageCache) get(t *Table, key []byte) Row {
	e := c.tables[t][string(key)]
	if e == nil {
		return nil
	}
	c.unlink(e)
	c.pushFront(e)
	return e.row
}

// put records row as the latest image of key, copying it.
func (c *imageCache) put(t *Table, key []byte, row Row) {
	if c.limit == 0 {
		return
	}
	m := c.tables[t]
	if m == nil {
		m = make(map[string]*cacheEntry)
		c.tables[t] = m
	}
	e := m[string(key)]
	if e == nil {
		e = &cacheEntry{table: t, key: string(key), row: make(Row, len(row))}
		m[e.key] = e
		c.used += int64(len(e.key)) + cacheEntryOverhead + int64(len(row))*24
	} else {
		c.unlink(e)
		c.used -= int64(cap(e.buf))
	}
	e.buf = e.buf[:0]
	for _, v := range row {
		e.buf = append(e.buf, v...)
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
	if e.buf == nil { // all values empty or NULL: keep empty values non-nil
		e.buf = make([]byte, 0, 1)
		for i, v := range row {
			if v != nil {
				e.row[i] = e.buf[:0:0]
			}
		}
	}
	c.used += int64(cap(e.buf))
	c.pushFront(e)
	for c.used > c.limit && c.head.prev != &c.head {
		c.evict(c.head.prev)
	}
}

func (c *imageCache) evict(e *cacheEntry) {
	c.unlink(e)
	delete(c.tables[e.table], e.key)
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

// dedupWindow remembers the LSN of the last n event IDs written.
type dedupWindow struct {
	lsns map[string]LSN
	ring []dedupEntry
	pos  int
}

type dedupEntry struct {
	id  string
	lsn LSN
}

func newDedupWindow(n int) *dedupWindow {
	return &dedupWindow{lsns: make(map[string]LSN, min(n, 1<<16)), ring: make([]dedupEntry, 0, min(n, 1<<16))}
}

func (d *dedupWindow) lookup(id string) (LSN, bool) {
	lsn, ok := d.lsns[id]
	return lsn, ok
}

// add remembers id, forgetting the oldest of window IDs when full.
func (d *dedupWindow) add(id string, lsn LSN, window int) {
	if window == 0 {
		return
	}
	e := dedupEntry{id, lsn}
	if len(d.ring) < window {
		d.ring = append(d.ring, e)
	} else {
		old := d.ring[d.pos]
		if d.lsns[old.id] == old.lsn {
			delete(d.lsns, old.id)
		}
		d.ring[d.pos] = e
		d.pos = (d.pos + 1) % window
	}
	d.lsns[id] = lsn
}
