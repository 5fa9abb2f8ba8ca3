package windower

import (
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"unsafe"

	"github.com/strata-db/strata/columnar"
)

// Dictionaries of string keys.
//
// Numbering a string partition key costs a hash of every row and a probe
// of a table of every partition, whose key it compares (BenchmarkPartitionIDsStrings:
// about 30ns a row at a million rows and 170,000 partitions). A column
// that is loaded whole from its containers through a block cache is the
// same column the next query reads, so the cache keeps, beside the
// column's blocks, a dictionary of each container's column (a keyDict,
// BlockCache.AddColumnValue): every row's code and every code's value
// and hash. A query that partitions by such a column alone takes each
// container's dictionary from the cache, or makes it from the loaded rows
// (hashing and numbering them as the hash table does) and leaves it
// there; then it hashes no row: one container's codes are its partitions,
// and several containers' values are numbered once each in one table,
// their rows then mapped code by code.
//
// A dictionary belongs to its container's column file (under its CRC-32C
// and size, as a cached block does) and never changes. It is used only
// for a column whose every container was loaded whole (no row superseded)
// and only while the input holds the vector as loaded: rows kept by
// WHERE are a gathered copy, numbered by hashing as before.

// keyDictName names the dictionary among a column file's cached values.
const keyDictName = "windower.keydict"

// keyDict is the dictionary of one container's string column: codes
// number the distinct values (NULL one of them) in order of first row.
//
// It holds no pointer but its slices' own, so that the collector, which
// marks the cache's every object on each cycle, has four to mark and not
// one a value.
type keyDict struct {
	codes  []int32  // each row's code, in the container's row order
	bytes  []byte   // the values back to back (the NULL code's is empty)
	ends   []int    // where each code's value ends in bytes
	hashes []uint64 // each code's hash, as hashStrings under keySeed
	nulls  []bool   // whether each code is NULL's; nil if no row is NULL
}

// len is the number of codes.
func (d *keyDict) len() int { return len(d.ends) }

// appendValues appends each code's value to dst, as strings over d's
// bytes.
func (d *keyDict) appendValues(dst []string) []string {
	start := 0
	for _, end := range d.ends {
		if end > start {
			dst = append(dst, unsafe.String(&d.bytes[start], end-start))
		} else {
			dst = append(dst, "")
		}
		start = end
	}
	return dst
}

// keyDictsUsed counts the queries numbered from dictionaries, for tests
// that must see the path taken.
var keyDictsUsed atomic.Int64

// keySeed seeds the hashes of every dictionary of this process, so that
// dictionaries made by different queries agree.
var keySeed = maphash.MakeSeed()

// size is the memory d holds.
func (d *keyDict) size() int64 {
	return int64(len(d.codes))*4 + int64(len(d.bytes)) + int64(d.len())*(8+8) + int64(len(d.nulls))
}

// columnOrigin says where a loaded column's rows came from: every row of
// each of cs in order, through cache.
type columnOrigin struct {
	v     *vector // the column as loaded
	col   int     // its schema index
	cs    []*columnar.Container
	cache *columnar.BlockCache
}

// originOf returns the origin of keys, a lone string key that is a column
// as loaded, or nil.
func (in *input) originOf(keys []*vector) *columnOrigin {
	if len(keys) != 1 || keys[0].kind != kindString {
		return nil
	}
	for i := range in.origins {
		if o := &in.origins[i]; o.v == keys[0] && o.v.len() == in.n {
			return o
		}
	}
	return nil
}

// noteOrigins records, after a load of cs through cache that dropped no
// row (drop empty), where each string column's rows came from.
func (in *input) noteOrigins(cs []*columnar.Container, drop superseded, cache *columnar.BlockCache) {
	if cache == nil {
		return
	}
	for i := range cs {
		if d := drop.of(i); d != nil && !d.IsEmpty() {
			return
		}
	}
	for c, v := range in.cols {
		if v != nil && v.kind == kindString {
			in.origins = append(in.origins, columnOrigin{v: v, col: c, cs: cs, cache: cache})
		}
	}
}

// dictIDs returns each row's partition and the number of partitions of
// the lone string key o loaded, from its containers' dictionaries, making
// (and caching) those the cache does not hold. The memory prepare counted
// for hashing holds the dictionaries' hashes and the tables that make
// them; what else it allocates for the query is counted through reserve,
// and the dictionaries it makes are the cache's memory, as cached blocks
// are, not the query's. It reports false, having done nothing, when a
// dictionary it would make might be too large for the cache to keep:
// making it for every query would cost more than hashing.
func (pt *partitioner) dictIDs(o *columnOrigin, threads int, reserve func(int64) error) ([]int32, int, bool, error) {
	n := o.v.len()
	pt.ids = grow(pt.ids, n)
	ids := pt.ids[:n]
	dicts := make([]*keyDict, len(o.cs))
	starts := make([]int, len(o.cs)+1) // the first row of each container, then n
	for k, c := range o.cs {
		m := c.Manifest()
		if o.col >= len(m.Files) {
			return nil, 0, false, fmt.Errorf("windower: %s has no column %d", c.Dir(), o.col)
		}
		f := &m.Files[o.col]
		rows := int(m.Rows)
		if d, _ := o.cache.ColumnValue(c.Dir(), f, keyDictName).(*keyDict); d != nil && len(d.codes) == rows {
			dicts[k] = d
		} else if !o.cache.Admits(maxDictBytes(f, m.Rows)) {
			return nil, 0, false, nil
		}
		starts[k+1] = starts[k] + rows
	}
	if starts[len(o.cs)] != n {
		return nil, 0, false, fmt.Errorf("windower: %d rows loaded, the containers hold %d", n, starts[len(o.cs)])
	}
	values := 0
	for k, c := range o.cs {
		d := dicts[k]
		if d == nil {
			var err error
			if d, err = pt.makeKeyDict(o.v, starts[k], starts[k+1]-starts[k], reserve); err != nil {
				return nil, 0, false, err
			}
			o.cache.AddColumnValue(c.Dir(), &c.Manifest().Files[o.col], keyDictName, d, d.size())
			dicts[k] = d
		}
		values += d.len()
	}
	keyDictsUsed.Add(1)
	ranges := splitRows(n, threads)
	if len(dicts) == 1 {
		parallelFor(len(ranges), func(k int) {
			lo, hi := ranges[k][0], ranges[k][1]
			copy(ids[lo:hi], dicts[0].codes[lo:hi])
		})
		return ids, dicts[0].len(), true, nil
	}
	// Every container's values, numbered in one table: a container's
	// code c is partition of[offsets[k]+c].
	if err := reserve(int64(values) * (16 + 1 + 4)); err != nil {
		return nil, 0, false, err
	}
	all := make([]string, 0, values)
	pt.hashes = grow(pt.hashes, values) // no more than the n rows prepare counted
	hashes := pt.hashes[:0]
	nulls := make([]bool, values)
	offsets := make([]int, len(dicts))
	for k, d := range dicts {
		offsets[k] = len(all)
		for c := range d.nulls {
			nulls[len(all)+c] = d.nulls[c]
		}
		all, hashes = d.appendValues(all), append(hashes, d.hashes...)
	}
	of := make([]int32, values)
	tb, err := pt.numberStrings(all, nulls, hashes, of, reserve)
	if err != nil {
		return nil, 0, false, err
	}
	parts := len(tb.first)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		for k, d := range dicts {
			from, to := max(lo, starts[k]), min(hi, starts[k+1])
			if from >= to {
				continue
			}
			m := of[offsets[k]:]
			for i, c := range d.codes[from-starts[k] : to-starts[k]] {
				ids[from+i] = m[c]
			}
		}
	})
	return ids, parts, true, nil
}

// maxDictBytes is the most memory the dictionary of column file f of a
// container of rows rows can take: its codes, and a value, its end and
// its hash a row, the values no longer than the file's blocks decoded.
func maxDictBytes(f *columnar.FileMeta, rows int64) int64 {
	n := rows * (4 + 8 + 8 + 1)
	for _, b := range f.Blocks {
		n += b.RawBytes
	}
	return n
}

// makeKeyDict makes the dictionary of rows [base, base+rows) of v, one
// container's column, numbering them as the hash table does on one
// thread, in the row hashes and the table prepare counted (the table's
// growth is counted through reserve). The dictionary is not counted: it
// is for the cache.
func (pt *partitioner) makeKeyDict(v *vector, base, rows int, reserve func(int64) error) (*keyDict, error) {
	strs := v.strs[base : base+rows]
	var nulls []bool
	if v.nulls != nil {
		nulls = v.nulls[base : base+rows]
	}
	pt.hashes = grow(pt.hashes, rows)
	hashes := pt.hashes[:rows]
	hashStrings(keySeed, strs, v.nulls, base, hashes)
	codes := make([]int32, rows)
	tb, err := pt.numberStrings(strs, nulls, hashes, codes, reserve)
	if err != nil {
		return nil, err
	}
	codesOf := len(tb.first)
	size := 0
	for id, r := range tb.first {
		if int32(id) != tb.nullID {
			size += len(strs[r])
		}
	}
	d := &keyDict{codes: codes, bytes: make([]byte, 0, size), ends: make([]int, codesOf), hashes: make([]uint64, codesOf)}
	for id, r := range tb.first {
		d.hashes[id] = hashes[r]
		if int32(id) != tb.nullID {
			d.bytes = append(d.bytes, strs[r]...)
		}
		d.ends[id] = len(d.bytes)
	}
	if tb.nullID >= 0 {
		d.nulls = make([]bool, codesOf)
		d.nulls[tb.nullID] = true
	}
	return d, nil
}

// numberStrings numbers strs (NULL where nulls says; nil: none), whose
// hashes are hashes, on the partitioner's first hash table, writing each
// one's partition to ids, and returns the table: its first and nullID
// say each partition's first string and which is NULL's. The table keeps
// no reference to strs.
func (pt *partitioner) numberStrings(strs []string, nulls []bool, hashes []uint64, ids []int32, reserve func(int64) error) (*hashTable, error) {
	if len(pt.tables) == 0 {
		pt.tables = append(pt.tables, hashTable{})
	}
	tb := &pt.tables[0]
	var partitions atomic.Int64
	tb.reset(hashes, &partitions, len(strs), reserve)
	err := numberRows(tb, &tb.strs, strs, nulls, ids, nil)
	clear(tb.strs)
	return tb, err
}
