package columnar

import (
	"container/list"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
)

// Resolving versions (Superseded) reads the key, version and deleted
// columns of every input container, and the largest, the table's loaded
// or last fully merged container, holds nearly all of those rows while
// changing only at a mergeout. A ResolveCache keeps two kinds of entry
// for the next call over the same containers:
//
//   - the resolution of a set of containers (the dropped rows of each and
//     the options they were resolved under): the queries between two
//     flushes of changes (a table changes once a second at most) reuse it
//     and read nothing;
//   - the key index of a largest container of an int64 key: its row of
//     each key, and its versions and markers where its change statistics
//     do not tell them. A query over the same largest container and other
//     changes (the next flush's) reads only the change containers and
//     looks their keys up in the index, so it costs the rows changed, not
//     the table.
//
// Entries are keyed by the containers' identities (table, projection,
// ID, commit time, rows, and the size and CRC-32C of the key and change
// columns' files), which a committed container never changes, so an entry
// is never stale: a new set of containers (a flush, a mergeout) is other
// keys, and the old entries age out. The cache holds at most its bound in
// bytes (the entries' bitmaps, arrays and keys), the least recently used
// dropped first; an entry larger than the bound is not kept. Its memory is
// the process's, not a job's: a call charges its budget for a cached
// index while it probes it and for its copy of a cached resolution, as it
// would for what it builds.
type ResolveCache struct {
	mu      sync.Mutex
	max     int64
	bytes   int64
	entries map[string]*list.Element
	lru     list.List // front: most recently used
	// minIndexRows is the fewest rows a largest container has for its
	// key index to be kept (below that, reading it is cheap).
	minIndexRows int64

	hits, misses, indexHits atomic.Int64
}

// DefaultResolveCacheBytes is the bound of a windower's resolve cache:
// the index of a largest container costs 4 to 12 bytes a row (16 to 20
// when its versions vary), so 128MiB keeps those of about 10 to 30
// million rows.
const DefaultResolveCacheBytes = 128 << 20

// defaultMinIndexRows: a container of fewer rows is read in about a
// millisecond.
const defaultMinIndexRows = 1 << 16

// NewResolveCache returns a cache holding at most maxBytes.
func NewResolveCache(maxBytes int64) *ResolveCache {
	return &ResolveCache{max: maxBytes, entries: map[string]*list.Element{}, minIndexRows: defaultMinIndexRows}
}

// ResolveCacheStats are a cache's counters.
type ResolveCacheStats struct {
	Hits, Misses int64 // lookups of resolutions and indexes
	IndexHits    int64 // resolutions that probed a kept index
	Entries      int
	Bytes        int64
}

// Stats returns the cache's counters.
func (c *ResolveCache) Stats() ResolveCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ResolveCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), IndexHits: c.indexHits.Load(), Entries: len(c.entries), Bytes: c.bytes}
}

type resolveEntry struct {
	key   string
	bytes int64
	res   *cachedResolution // or
	index *keyIndex
}

// cachedResolution is a resolution kept by the cache: never changed, so
// each call gets copies of its bitmaps.
type cachedResolution struct {
	dropped []*roaring.Bitmap
	live    int64
}

func (c *ResolveCache) get(key string) *resolveEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		c.misses.Add(1)
		return nil
	}
	c.hits.Add(1)
	c.lru.MoveToFront(e)
	return e.Value.(*resolveEntry)
}

func (c *ResolveCache) put(e *resolveEntry) {
	e.bytes += int64(len(e.key)) + 64
	if e.bytes > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[e.key]; ok {
		return // made at the same time by another call
	}
	c.entries[e.key] = c.lru.PushFront(e)
	c.bytes += e.bytes
	for c.bytes > c.max {
		old := c.lru.Remove(c.lru.Back()).(*resolveEntry)
		delete(c.entries, old.key)
		c.bytes -= old.bytes
	}
}

// identity appends what names container c's key and change columns'
// contents for the cache's keys.
func identity(b []byte, c *Container) []byte {
	m := c.m
	for _, s := range []string{m.Table, m.Projection, m.ID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, m.Created.UnixNano())
	b = binary.AppendVarint(b, m.Rows)
	key, ver, del, _ := c.PrimaryKeyIndices()
	for _, col := range append(key, ver, del) {
		f := m.Files[col]
		b = binary.AppendVarint(b, f.Size)
		b = binary.LittleEndian.AppendUint32(b, f.CRC)
	}
	return b
}

// resolutionKey is the cache key of the resolution of cs under opts.
func resolutionKey(cs []*Container, opts ResolveOptions) string {
	b := []byte{'r', 0}
	if opts.KeepMarkers {
		b[1] = 1
		b = binary.AppendVarint(b, opts.DropMarkersThrough)
	}
	for _, c := range cs {
		b = identity(b, c)
	}
	return string(b)
}

// indexKey is the cache key of container c's key index.
func indexKey(c *Container) string { return string(identity([]byte{'i'}, c)) }

// keyIndex is a container's row of each of its keys (one int64 column),
// with each row's version and whether it is a marker.
type keyIndex struct {
	// dense: the row of key min+i, -1 for none; else sorted keys and
	// their rows (nil: the row is the key's position).
	min    int64
	rowOf  []int32
	sorted []int64
	rowsOf []int32
	// versions by row; nil: every row has version ver.
	versions []int64
	ver      int64
	// markers, the rows that are delete markers, ascending, with their
	// keys.
	markers []markerRow
}

type markerRow struct {
	row int32
	key int64
}

func (x *keyIndex) size() int64 {
	return int64(len(x.rowOf))*4 + int64(len(x.sorted))*8 + int64(len(x.rowsOf))*4 +
		int64(len(x.versions))*8 + int64(len(x.markers))*16
}

// lookup returns the row of key k.
func (x *keyIndex) lookup(k int64) (int32, bool) {
	if x.rowOf != nil {
		if k < x.min || uint64(k)-uint64(x.min) >= uint64(len(x.rowOf)) {
			return 0, false
		}
		r := x.rowOf[uint64(k)-uint64(x.min)]
		return r, r >= 0
	}
	i, ok := slices.BinarySearch(x.sorted, k)
	if !ok {
		return 0, false
	}
	if x.rowsOf == nil {
		return int32(i), true
	}
	return x.rowsOf[i], true
}

func (x *keyIndex) version(row int32) int64 {
	if x.versions == nil {
		return x.ver
	}
	return x.versions[row]
}

func (x *keyIndex) marker(row int32) bool {
	if len(x.markers) == 0 {
		return false
	}
	_, ok := slices.BinarySearchFunc(x.markers, row, func(m markerRow, r int32) int { return int(m.row) - int(r) })
	return ok
}

// indexBuilder gathers a container's keys, versions and markers as the
// resolver reads it, for its key index.
type indexBuilder struct {
	keys     []int64
	versions []int64
	ver      int64
	varies   bool
	markers  []markerRow
}

func (b *indexBuilder) add(ids []int64, cb *changeBlock) {
	row := int32(len(b.keys))
	if len(b.keys) == 0 && cb.n > 0 {
		b.ver = cb.version(0)
	}
	b.keys = append(b.keys, ids...)
	for j := range cb.n {
		v := cb.version(j)
		if v != b.ver && !b.varies {
			b.varies = true
			b.versions = make([]int64, int(row)+j, cap(b.keys))
			for i := range b.versions {
				b.versions[i] = b.ver
			}
		}
		if b.varies {
			b.versions = append(b.versions, v)
		}
		if cb.marker(j) {
			b.markers = append(b.markers, markerRow{row: row + int32(j), key: ids[j]})
		}
	}
}

// index builds the key index, nil when the container has a key twice
// (which the resolver never indexes, as it never holds it in its table).
func (b *indexBuilder) index() *keyIndex {
	x := &keyIndex{ver: b.ver, markers: b.markers}
	if b.varies {
		x.versions = b.versions
	}
	if len(b.keys) == 0 {
		return nil
	}
	lo, hi := slices.Min(b.keys), slices.Max(b.keys)
	span := uint64(hi) - uint64(lo) + 1
	if span <= 2*uint64(len(b.keys)) && span < 1<<31 {
		x.min, x.rowOf = lo, make([]int32, span)
		for i := range x.rowOf {
			x.rowOf[i] = -1
		}
		for r, k := range b.keys {
			p := &x.rowOf[uint64(k)-uint64(lo)]
			if *p >= 0 {
				return nil
			}
			*p = int32(r)
		}
		return x
	}
	if slices.IsSorted(b.keys) {
		for i := 1; i < len(b.keys); i++ {
			if b.keys[i] == b.keys[i-1] {
				return nil
			}
		}
		x.sorted = b.keys
		return x
	}
	type pair struct {
		k int64
		r int32
	}
	ps := make([]pair, len(b.keys))
	for r, k := range b.keys {
		ps[r] = pair{k, int32(r)}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		switch {
		case a.k < b.k:
			return -1
		case a.k > b.k:
			return 1
		}
		return 0
	})
	x.sorted, x.rowsOf = make([]int64, len(ps)), make([]int32, len(ps))
	for i, p := range ps {
		if i > 0 && p.k == ps[i-1].k {
			return nil
		}
		x.sorted[i], x.rowsOf[i] = p.k, p.r
	}
	return x
}
