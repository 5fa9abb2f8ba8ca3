package windower

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/strata-db/strata/internal/hugepage"
)

// Without ORDER BY every row of a partition is a peer of every other, so
// an aggregate whose frame is the whole partition has one value per
// partition. Such a group needs no sort: partitionIDs numbers the
// partitions in one pass over the keys (a dense table when the key is one
// integer-like column of small range, else a hash table), and the
// aggregates accumulate into per-partition states in input order, which
// is the order a stable sort leaves within a partition, so float sums
// are the sorted path's bit for bit.

// denseRangeFactor bounds the dense table: a single integer key whose
// range is at most this many times the row count is numbered through a
// table indexed by key - min.
const denseRangeFactor = 4

// unsortedGroup reports whether g can be evaluated without a sort: it has
// PARTITION BY but no ORDER BY and every call is an aggregate over the
// whole partition.
func unsortedGroup(g *windowGroup) bool {
	if len(g.partition) == 0 || len(g.order) > 0 {
		return false
	}
	for _, c := range g.calls {
		if !c.fn.isAggregate() || !c.frame.wholePartition(false) {
			return false
		}
	}
	return true
}

// partitioner numbers the partitions of a group's keys. Its buffers are
// allocated once per query and reused by every group.
//
// Hashed keys are numbered in two steps: every row's key hash, computed
// over ranges of rows on the group's threads, then one table per thread,
// each numbering the rows whose hash it owns (tableOf) in row order, from
// a list of them dealt once the rows are hashed (dealRows). The
// tables share nothing, so they fill in parallel; partition ids are the
// tables' ids offset by the partitions of the tables before them. On one
// thread the ids are in order of first appearance.
type partitioner struct {
	ids    []int32  // partition of each row
	dense  []int32  // dense table: partition of key - min, -1 for none yet
	hashes []uint64 // hash path: each row's key hash
	rows   []int32  // hash path on several tables: each table's rows (dealRows)
	tables []hashTable
	seed   maphash.Seed

	// The table prepare chose: dense over span slots from key lo, or hashed
	// on threads tables.
	isDense bool
	span    int64
	lo      int64
	threads int
}

func newPartitioner() *partitioner { return &partitioner{seed: maphash.MakeSeed()} }

// prepare chooses the table for n rows of keys, numbered on up to threads
// goroutines, and returns the memory partitionIDs will use before any
// hash table grows (each growth reserves its own).
func (pt *partitioner) prepare(keys []*vector, key *expr, n, threads int) int64 {
	b := int64(n) * 4
	pt.threads = max(threads, 1)
	pt.span, pt.lo, pt.isDense = denseRange(keys, key, n, pt.threads)
	if pt.isDense {
		return b + pt.span*4
	}
	// Row hashes, a first row per partition, and the tables at their
	// first size.
	if pt.threads > 1 {
		b += int64(n) * 4 // the rows dealt to each table
	}
	return b + int64(n)*(8+4) + int64(pt.threads)*hashMinSlots*8
}

// partitionIDs returns each row's partition (0, 1, ... parts-1) and the
// number of partitions, for the keys prepare saw. NULL keys form a
// partition of their own; float keys compare as compareFloat does
// (-0 = 0, NaN = NaN).
// It reports false, having given up, when hashed keys without a string
// column turn out to have more than n/hashGiveUp partitions: a radix
// sort is then cheaper than the table's cache misses.
// A hash table that grows reserves its slots through reserve, which the
// tables may call at once.
func (pt *partitioner) partitionIDs(keys []*vector, n int, reserve func(int64) error) ([]int32, int, bool, error) {
	pt.ids = grow(pt.ids, n)
	ids := pt.ids[:n]
	if pt.isDense {
		return ids, pt.denseIDs(keys[0], pt.lo, int(pt.span), ids), true, nil
	}
	limit := n
	if !hasStringKey(keys) {
		limit = n / hashGiveUp
	}
	parts, ok, err := pt.hashIDs(keys, n, ids, limit, reserve)
	return ids, parts, ok, err
}

// hashGiveUp: numeric keys are hashed while there are at most one
// partition per hashGiveUp rows. Measured on a million rows, hashing
// beats the radix sort by a third at 1000 partitions and loses by more
// than half at a million.
const hashGiveUp = 8

func hasStringKey(keys []*vector) bool {
	for _, v := range keys {
		if v.kind == kindString {
			return true
		}
	}
	return false
}

// denseRange reports the range (max - min + 1, plus one slot for NULL)
// and minimum of a single integer key, and whether it is small enough for
// a dense table; it scans ranges of rows on up to threads goroutines,
// unless key, the expression of a single key (or nil), bounds it.
func denseRange(keys []*vector, key *expr, n, threads int) (int64, int64, bool) {
	if len(keys) != 1 || n == 0 {
		return 0, 0, false
	}
	v := keys[0]
	if v.kind != kindInt && v.kind != kindBool {
		return 0, 0, false
	}
	if key != nil {
		// A remainder by a constant is within its bounds whatever the
		// rows: no pass over them to find the range.
		if lo, hi, ok := key.remainderBounds(); ok && hi-lo < int64(denseRangeFactor*n) {
			return hi - lo + 2, lo, true
		}
	}
	if n < parallelMinRows {
		threads = 1
	}
	ranges := splitRows(n, threads)
	los, his := make([]int64, len(ranges)), make([]int64, len(ranges))
	parallelFor(len(ranges), func(r int) {
		from, to := ranges[r][0], ranges[r][1]
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		if v.nulls == nil {
			lo, hi = intBounds(v.ints[from:to])
		} else {
			for i, x := range v.ints[from:to] {
				if !v.nulls[from+i] {
					lo, hi = min(lo, x), max(hi, x)
				}
			}
		}
		los[r], his[r] = lo, hi
	})
	lo, hi := slices.Min(los), slices.Max(his)
	if lo > hi { // all NULL
		return 1, 0, true
	}
	span, borrow := bits.Sub64(uint64(hi), uint64(lo), 0)
	if borrow != 0 || span >= uint64(denseRangeFactor*n) {
		return 0, 0, false
	}
	return int64(span) + 2, lo, true
}

// intBounds returns the least and the greatest of xs (MaxInt64 and
// MinInt64 when it is empty), in four chains of comparisons that do not
// wait for one another: one chain waits at each value for the last
// comparison, and took 1.6 times as long over a million keys.
func intBounds(xs []int64) (lo, hi int64) {
	lo0, lo1, lo2, lo3 := int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64)
	hi0, hi1, hi2, hi3 := int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64)
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		x := xs[i : i+4 : i+4]
		lo0, hi0 = min(lo0, x[0]), max(hi0, x[0])
		lo1, hi1 = min(lo1, x[1]), max(hi1, x[1])
		lo2, hi2 = min(lo2, x[2]), max(hi2, x[2])
		lo3, hi3 = min(lo3, x[3]), max(hi3, x[3])
	}
	for ; i < len(xs); i++ {
		lo0, hi0 = min(lo0, xs[i]), max(hi0, xs[i])
	}
	return min(lo0, lo1, lo2, lo3), max(hi0, hi1, hi2, hi3)
}

func (pt *partitioner) denseIDs(v *vector, lo int64, r int, ids []int32) int {
	pt.dense = grow(pt.dense, r)
	dense := pt.dense[:r]
	for i := range dense {
		dense[i] = -1
	}
	null := r - 1
	parts := int32(0)
	xs := v.ints[:len(ids)]
	if v.nulls == nil {
		for i, x := range xs {
			s := &dense[x-lo]
			if *s < 0 {
				*s = parts
				parts++
			}
			ids[i] = *s
		}
		return int(parts)
	}
	for i, x := range xs {
		k := null
		if !v.nulls[i] {
			k = int(x - lo)
		}
		s := &dense[k]
		if *s < 0 {
			*s = parts
			parts++
		}
		ids[i] = *s
	}
	return int(parts)
}

// hashMinSlots is the size a hash table starts at.
const hashMinSlots = 1 << 10

func (pt *partitioner) hashIDs(keys []*vector, n int, ids []int32, limit int, reserve func(int64) error) (int, bool, error) {
	t := pt.threads
	if n < parallelMinRows {
		t = 1
	}
	pt.hashes = grow(pt.hashes, n)
	hashes := pt.hashes[:n]
	ranges := splitRows(n, t)
	// owned[k*t+j]: how many rows of range k table j owns.
	owned := make([]int, len(ranges)*t)
	parallelFor(len(ranges), func(k int) {
		lo, hi := ranges[k][0], ranges[k][1]
		if v := keys[0]; len(keys) == 1 && v.kind == kindString {
			hashStrings(pt.seed, v.strs[lo:hi], v.nulls, lo, hashes[lo:hi])
		} else {
			for r := lo; r < hi; r++ {
				hashes[r] = pt.hashRow(keys, r)
			}
		}
		if t > 1 {
			// Counted apart from owned, whose ranges share cache lines.
			counts := make([]int, t)
			for _, h := range hashes[lo:hi] {
				counts[tableOf(h, t)]++
			}
			copy(owned[k*t:], counts)
		}
	})
	rowsOf := pt.dealRows(hashes, ranges, owned, t)
	for len(pt.tables) < t {
		pt.tables = append(pt.tables, hashTable{})
	}
	tables := pt.tables[:t]
	// The tables give up together when their partitions exceed limit,
	// so whether the keys are hashed does not depend on t.
	var partitions atomic.Int64
	limit = max(limit, 1)
	errs := make([]error, t)
	parallelFor(t, func(k int) {
		tb := &tables[k]
		tb.reset(hashes, &partitions, limit, reserve)
		rows := rowsOf[k] // nil: all of them
		switch v := keys[0]; {
		case len(keys) == 1 && v.kind == kindString:
			errs[k] = numberRows(tb, &tb.strs, v.strs, v.nulls, ids, rows)
		case len(keys) == 1 && v.kind != kindFloat:
			errs[k] = numberRows(tb, &tb.ints, v.ints, v.nulls, ids, rows)
		default:
			errs[k] = tb.numberAll(keys, ids, rows)
		}
	})
	parts := 0
	offsets := make([]int32, t)
	for k := range tables {
		switch {
		case errs[k] == errGiveUp:
			return 0, false, nil
		case errs[k] != nil:
			return 0, false, errs[k]
		}
		offsets[k] = int32(parts)
		parts += len(tables[k].first)
	}
	if parts > limit { // the partitions the shared count had not counted yet
		return 0, false, nil
	}
	if t > 1 {
		parallelFor(len(ranges), func(k int) {
			for r := ranges[k][0]; r < ranges[k][1]; r++ {
				ids[r] += offsets[tableOf(hashes[r], t)]
			}
		})
	}
	return parts, true, nil
}

// dealRows lists the rows each of t tables owns, in row order, from the
// rows' hashes and owned, the count of rows of each range (ranges of
// rows) each table owns, as hashIDs counted them. Each table then reads
// only its own rows, where skipping the others' is a coin toss for the
// branch on every row. One table's list is nil: all rows.
func (pt *partitioner) dealRows(hashes []uint64, ranges [][2]int, owned []int, t int) [][]int32 {
	if t == 1 {
		return [][]int32{nil}
	}
	pt.rows = grow(pt.rows, len(hashes))
	rows := pt.rows[:len(hashes)]
	// owned becomes where range k's rows of table j go, tables in order,
	// each table's rows in range order.
	lists := make([][]int32, t)
	at := 0
	for j := range t {
		start := at
		for k := range ranges {
			owned[k*t+j], at = at, at+owned[k*t+j]
		}
		lists[j] = rows[start:at]
	}
	parallelFor(len(ranges), func(k int) {
		next := slices.Clone(owned[k*t : (k+1)*t]) // apart, as hashIDs counts
		for r := ranges[k][0]; r < ranges[k][1]; r++ {
			j := tableOf(hashes[r], t)
			rows[next[j]] = int32(r)
			next[j]++
		}
	})
	return lists
}

// errGiveUp stops a hash table that has more partitions than its limit.
var errGiveUp = errors.New("windower: too many partitions to hash")

// tableOf is the table of t that numbers the rows of hash h: the high 32
// bits scaled to [0, t), so the tables' slots (the low bits) stay
// uniform.
func tableOf(h uint64, t int) int {
	return int((h >> 32) * uint64(t) >> 32)
}

// hashTable numbers distinct keys in the order it is given them. It is
// open addressing with linear probing over slots that each hold a
// partition id + 1 in the low 32 bits (0: empty) and the high 32 bits of
// its hash as a tag, so a probe compares keys only when the tags agree.
// It doubles when half full, rehashing from the rows' hashes.
//
// A key of one column that is not a float (numberRows) is compared with
// the table's own copy of each partition's key, strs or ints by partition
// id, and the NULL key is partition nullID: a probe that finds its tag
// reads one value the table wrote, where comparing with the partition's
// first row reads that row's number, then its value and NULL flag, far
// apart in the input, each a cache miss on a large table.
type hashTable struct {
	slots   []uint64
	first   []int32  // first row of each partition
	hashes  []uint64 // every row's hash
	reserve func(int64) error

	// One key column: each partition's key, and the partition of NULL
	// (-1: none yet). copied is how many keys the reservations made so
	// far count.
	strs   []string
	ints   []int64
	nullID int32
	copied int

	// partitions counts the partitions of every table of the numbering,
	// countEvery at a time, so that it never counts more than they have;
	// there may be at most limit.
	partitions *atomic.Int64
	limit      int
	// warm is what numberRows's early loads of slots added up to, kept
	// so that the compiler keeps them.
	warm uint64
}

// countEvery is how many partitions a table makes between additions to
// the count all tables share. An atomic addition a partition cost a
// quarter of the numbering of a string key: it orders the loads around
// it, so the next rows' slots could not be fetched while it waited.
const countEvery = 1024

func (tb *hashTable) reset(hashes []uint64, partitions *atomic.Int64, limit int, reserve func(int64) error) {
	tb.slots = grow(tb.slots, hashMinSlots)[:hashMinSlots]
	clear(tb.slots)
	tb.first = tb.first[:0]
	clear(tb.strs) // let go of the last numbering's strings
	tb.strs, tb.ints = tb.strs[:0], tb.ints[:0]
	tb.nullID, tb.copied = -1, 0
	tb.hashes, tb.reserve = hashes, reserve
	tb.partitions, tb.limit = partitions, limit
}

// number returns the partition of row r, whose keys hash to h, making a
// new one if no row before it had its keys. It fails with errGiveUp when
// that would make the tables' partitions more than their limit.
func (tb *hashTable) number(keys []*vector, h uint64, r int) (int32, error) {
	mask := uint64(len(tb.slots) - 1)
	tag := h &^ math.MaxUint32
	for s := h & mask; ; s = (s + 1) & mask {
		e := tb.slots[s]
		if e == 0 {
			return tb.add(s, tag, r)
		}
		if e&^math.MaxUint32 == tag {
			if id := int32(uint32(e)) - 1; sameRowKeys(keys, int(tb.first[id]), r) {
				return id, nil
			}
		}
	}
}

// numberAll numbers rows (every row when nil) by keys of any count and
// kind, comparing each with its partition's first row; it writes each
// row's partition to ids.
func (tb *hashTable) numberAll(keys []*vector, ids []int32, rows []int32) error {
	for j := range tb.rowCount(rows) {
		r := rowAt(rows, j)
		id, err := tb.number(keys, tb.hashes[r], r)
		if err != nil {
			return err
		}
		ids[r] = id
	}
	return nil
}

// numberRows numbers rows (every row when nil, else in increasing
// order) by one key column: vals its values, nulls its NULL flags (nil:
// none), and copies the table's copy of each partition's key (tb.strs or
// tb.ints). It writes each row's partition to ids. It takes the rows
// probeAhead at a time, their slots loaded before they are numbered.
func numberRows[T comparable](tb *hashTable, copies *[]T, vals []T, nulls []bool, ids []int32, rows []int32) error {
	n := tb.rowCount(rows)
	var warm uint64
	for lo := 0; lo < n; lo += probeAhead {
		hi := min(lo+probeAhead, n)
		// The slots of the next rows, loaded before any is numbered:
		// their cache misses overlap, where the numbering, a row at a
		// time, would wait for each in turn (a table of a million
		// partitions and more is out of the caches).
		mask := uint64(len(tb.slots) - 1)
		if rows == nil {
			for _, h := range tb.hashes[lo:hi] {
				warm += tb.slots[h&mask]
			}
		} else {
			for _, r := range rows[lo:hi] {
				warm += tb.slots[tb.hashes[r]&mask]
			}
		}
		if err := numberRange(tb, copies, vals, nulls, ids, rows, lo, hi); err != nil {
			return err
		}
	}
	tb.warm = warm // the loads above are not dead code
	return nil
}

// rowCount is how many rows a table numbers from rows, a list of them
// (nil: every row).
func (tb *hashTable) rowCount(rows []int32) int {
	if rows == nil {
		return len(tb.hashes)
	}
	return len(rows)
}

// rowAt is the j-th row of rows, a list of them (nil: every row).
func rowAt(rows []int32, j int) int {
	if rows == nil {
		return j
	}
	return int(rows[j])
}

// probeAhead is how many rows' slots numberRows loads at once.
const probeAhead = 16

// numberRange numbers rows[lo:hi] (rows lo to hi when rows is nil) as
// numberRows does.
func numberRange[T comparable](tb *hashTable, copies *[]T, vals []T, nulls []bool, ids []int32, rows []int32, lo, hi int) error {
	for j := lo; j < hi; j++ {
		r := rowAt(rows, j)
		h := tb.hashes[r]
		null := nulls != nil && nulls[r]
		mask := uint64(len(tb.slots) - 1)
		tag := h &^ math.MaxUint32
		for s := h & mask; ; s = (s + 1) & mask {
			e := tb.slots[s]
			if e == 0 {
				if err := keepKey(tb, copies, vals[r]); err != nil {
					return err
				}
				id, err := tb.add(s, tag, r)
				if err != nil {
					return err
				}
				if null {
					tb.nullID = id
				}
				ids[r] = id
				break
			}
			if e&^math.MaxUint32 == tag {
				id := int32(uint32(e)) - 1
				if (id == tb.nullID) == null && (null || (*copies)[id] == vals[r]) {
					ids[r] = id
					break
				}
			}
		}
	}
	return nil
}

// keepKey appends a new partition's key to copies, reserving room for
// twice as many keys when the reservations so far are used up.
func keepKey[T any](tb *hashTable, copies *[]T, x T) error {
	if len(*copies) == tb.copied {
		more := max(tb.copied, hashMinSlots)
		if err := tb.reserve(int64(more) * int64(unsafe.Sizeof(x))); err != nil {
			return err
		}
		tb.copied += more
		*copies = slices.Grow(*copies, tb.copied-len(*copies))
	}
	*copies = append(*copies, x)
	return nil
}

// add makes row r the first of a new partition, whose slot is the empty
// slot s, and returns its id; the table doubles if it is half full.
func (tb *hashTable) add(s, tag uint64, r int) (int32, error) {
	id := int32(len(tb.first))
	tb.first = append(tb.first, int32(r))
	if len(tb.first)%countEvery == 0 && tb.partitions.Add(countEvery) > int64(tb.limit) {
		return 0, errGiveUp
	}
	tb.slots[s] = tag | uint64(id+1)
	if 2*len(tb.first) >= len(tb.slots) {
		if err := tb.grow(); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// grow doubles the slots and reinserts every partition.
func (tb *hashTable) grow() error {
	size := 2 * len(tb.slots)
	if err := tb.reserve(int64(size-len(tb.slots)) * 8); err != nil {
		return err
	}
	if cap(tb.slots) >= size {
		tb.slots = tb.slots[:size]
		clear(tb.slots)
	} else {
		tb.slots = hugepage.Make[uint64](size, size)
	}
	mask := uint64(size - 1)
	for id, r := range tb.first {
		h := tb.hashes[r]
		s := h & mask
		for tb.slots[s] != 0 {
			s = (s + 1) & mask
		}
		tb.slots[s] = h&^math.MaxUint32 | uint64(id+1)
	}
	return nil
}

// hashRow hashes row r's keys, normalized so equal keys hash equally.
func (pt *partitioner) hashRow(keys []*vector, r int) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range keys {
		var x uint64
		switch {
		case v.isNull(r):
			x = 0x5bd1e995 // NULL: its own value
		case v.kind == kindFloat:
			f := v.floats[r]
			switch {
			case f == 0:
				x = 0
			case f != f:
				x = 0x7ff8000000000001
			default:
				x = math.Float64bits(f)
			}
		case v.kind == kindString:
			x = maphash.String(pt.seed, v.strs[r])
		default:
			x = uint64(v.ints[r])
		}
		h = mix64(h ^ x)
	}
	return h
}

// hashStrings sets h[i] to the hash of a lone string key, strs[i]: its
// maphash, whose bits are mixed already, or nullHash where nulls (from
// row lo; nil: none) says NULL. Rows whose keys are equal hash equally,
// as hashRow's do; the two are not mixed within one table.
func hashStrings(seed maphash.Seed, strs []string, nulls []bool, lo int, h []uint64) {
	if nulls == nil {
		for i, s := range strs {
			h[i] = maphash.String(seed, s)
		}
		return
	}
	nulls = nulls[lo : lo+len(strs)]
	for i, s := range strs {
		if nulls[i] {
			h[i] = nullHash
			continue
		}
		h[i] = maphash.String(seed, s)
	}
}

// nullHash is the hash of a lone string key's NULL.
const nullHash = 0x5bd1e9955bd1e995

// mix64 is the murmur3 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// sameRowKeys reports whether rows a and b agree on every key, NULLs equal.
func sameRowKeys(keys []*vector, a, b int) bool {
	for _, v := range keys {
		na, nb := v.isNull(a), v.isNull(b)
		if na || nb {
			if na != nb {
				return false
			}
			continue
		}
		switch v.kind {
		case kindFloat:
			if compareFloat(v.floats[a], v.floats[b]) != 0 {
				return false
			}
		case kindString:
			if v.strs[a] != v.strs[b] {
				return false
			}
		default:
			if v.ints[a] != v.ints[b] {
				return false
			}
		}
	}
	return true
}

// evalUnsorted evaluates every call of an unsortedGroup over rows in
// input order: ids gives each row's partition, of which there are parts.
// states is reused across calls and grown as needed.
//
// On t threads, count(*) counts each share of the rows on its own thread
// and sums the counts. Any other aggregate is accumulated by thread k for
// its share of the partitions, reading every row in order and adding
// those of its partitions (so each partition's rows are added in input
// order, as on one thread). Thread k writes the results of its share of
// the rows.
func evalUnsorted(calls []*callState, ids []int32, parts int, states []aggState, t int) ([]aggState, error) {
	partRanges, rowRanges := splitRows(parts, t), splitRows(len(ids), t)
	var counts []int64
	for _, cs := range calls {
		a := &cs.agg
		out := cs.out
		if a.fn == fnCount && a.incl == nil {
			if counts == nil {
				counts = countPartitions(ids, parts, rowRanges)
			}
			o := out.ints[:len(ids)]
			parallelFor(len(rowRanges), func(k int) {
				for r := rowRanges[k][0]; r < rowRanges[k][1]; r++ {
					o[r] = counts[ids[r]]
				}
			})
			continue
		}
		states = grow(states, parts)[:parts]
		parallelFor(len(partRanges), func(k int) {
			lo, hi := int32(partRanges[k][0]), int32(partRanges[k][1])
			for i := lo; i < hi; i++ {
				states[i].reset()
			}
			for r, id := range ids {
				if id >= lo && id < hi && a.included(r) {
					a.add(&states[id], r)
				}
			}
		})
		overflow := make([]bool, len(rowRanges))
		parallelFor(len(rowRanges), func(k int) {
			ak := *a // write sets its own overflow flag
			for r := rowRanges[k][0]; r < rowRanges[k][1]; r++ {
				ak.write(out, r, &states[ids[r]])
			}
			overflow[k] = ak.overflow
		})
		if slices.Contains(overflow, true) {
			return states, overflowError(cs.c)
		}
	}
	return states, nil
}

// countPartitions returns the rows of each of parts partitions, counted
// over each range of rows on its own goroutine and summed.
func countPartitions(ids []int32, parts int, rowRanges [][2]int) []int64 {
	shares := make([][]int64, len(rowRanges))
	parallelFor(len(rowRanges), func(k int) {
		c := hugepage.Make[int64](parts, parts)
		countKeys(ids[rowRanges[k][0]:rowRanges[k][1]], 0, c)
		shares[k] = c
	})
	return sumCounts(shares, parts)
}

// sumCounts returns the sums of n counts over the shares, summed into the
// first.
func sumCounts(shares [][]int64, n int) []int64 {
	if len(shares) == 0 {
		return hugepage.Make[int64](n, n)
	}
	counts := shares[0]
	for _, c := range shares[1:] {
		for i, x := range c {
			counts[i] += x
		}
	}
	return counts
}

// unsortedCall returns the state of call c of an unsorted group over in,
// its output counted by reserve.
func unsortedCall(c *call, in *input, g *windowGroup, reserve func(int64, string) error) (*callState, error) {
	identity := func(_ *expr, v *vector) *vector { return v }
	cs, err := newCallState(c, in, in.n, nil, nil, g, identity, c.newOutput(in.lease, in.n))
	if err != nil {
		return nil, err
	}
	if err := reserve(cs.out.bytes(), "window output"); err != nil {
		return nil, err
	}
	return cs, nil
}

// evalUnsortedGroup evaluates an unsortedGroup over in-memory input and
// returns its outputs, in input order, by select item, and its number of
// partitions; or no outputs if the keys are better sorted (see
// partitionIDs). Its buffers are counted by reserve.
func evalUnsortedGroup(g *windowGroup, in *input, pt *partitioner, states *[]aggState, threads int,
	reserve func(int64, string) error) (map[int]*vector, int, error) {
	n := in.n
	keys := make([]*vector, len(g.partition))
	for i, k := range g.partition {
		v, err := k.expr.evalOn(in.cols, n, threads)
		if err != nil {
			return nil, 0, fmt.Errorf("windower: partition by: %w", err)
		}
		keys[i] = v
	}
	var key *expr // a single key's expression, which may bound its range
	if len(g.partition) == 1 {
		key = g.partition[0].expr
	}
	if err := reserve(pt.prepare(keys, key, n, threads), "partition table"); err != nil {
		return nil, 0, err
	}
	if pt.isDense && countsOnly(g, in) {
		return denseCounts(g, in, keys[0], pt, threads, reserve)
	}
	var mu sync.Mutex
	reserveSlots := func(b int64) error {
		mu.Lock()
		defer mu.Unlock()
		return reserve(b, "partition table")
	}
	var ids []int32
	var parts int
	var err error
	ok := false
	if o := in.originOf(keys); o != nil {
		ids, parts, ok, err = pt.dictIDs(o, threads, reserveSlots)
	}
	if !ok && err == nil {
		ids, parts, ok, err = pt.partitionIDs(keys, n, reserveSlots)
	}
	if err != nil || !ok {
		return nil, 0, err
	}
	if err := reserve(stateBytes(g, parts, threads), "partition states"); err != nil {
		return nil, 0, err
	}
	outs := make(map[int]*vector, len(g.calls))
	calls := make([]*callState, 0, len(g.calls))
	for _, c := range g.calls {
		cs, err := unsortedCall(c, in, g, reserve)
		if err != nil {
			return nil, 0, err
		}
		calls = append(calls, cs)
		outs[c.item] = cs.out
	}
	*states, err = evalUnsorted(calls, ids, parts, *states, threads)
	if err != nil {
		return nil, 0, err
	}
	return outs, parts, nil
}

// countsOnly reports whether every call of g counts rows without FILTER:
// count(*), or count of a column without NULLs.
func countsOnly(g *windowGroup, in *input) bool {
	for _, c := range g.calls {
		if c.fn != fnCount || len(c.filter) > 0 {
			return false
		}
		if !c.star && (len(c.args) != 1 || c.args[0].col < 0 || in.cols[c.args[0].col].nulls != nil) {
			return false
		}
	}
	return true
}

// denseCounts evaluates a group of counts (countsOnly) over a key with a
// dense table (prepare chose it) without numbering the partitions: each
// thread counts its range of rows by key - min (NULL in the last slot),
// the counts are summed, and each row's result is its key's count.
func denseCounts(g *windowGroup, in *input, key *vector, pt *partitioner, threads int,
	reserve func(int64, string) error) (map[int]*vector, int, error) {
	n, span, lo := in.n, int(pt.span), pt.lo
	rowRanges := splitRows(n, threads)
	if err := reserve(counterBytes(span)*int64(max(len(rowRanges), 1)), "partition counts"); err != nil {
		return nil, 0, err
	}
	slot := func(r int) int {
		if key.nulls != nil && key.nulls[r] {
			return span - 1
		}
		return int(key.ints[r] - lo)
	}
	// One key and no NULL (the key's range found it): every row's count
	// is n, with nothing to count.
	oneKey := key.nulls == nil && span == 2
	counts := []int64{int64(n), 0}
	if !oneKey {
		shares := make([][]int64, len(rowRanges))
		parallelFor(len(rowRanges), func(k int) {
			c := hugepage.Make[int64](span, span)
			if key.nulls == nil {
				countKeys(key.ints[rowRanges[k][0]:rowRanges[k][1]], lo, c)
			} else {
				for r := rowRanges[k][0]; r < rowRanges[k][1]; r++ {
					c[slot(r)]++
				}
			}
			shares[k] = c
		})
		counts = sumCounts(shares, span)
	}
	parts := 0
	for _, c := range counts {
		if c > 0 {
			parts++
		}
	}
	outs := make(map[int]*vector, len(g.calls))
	for _, c := range g.calls {
		cs, err := unsortedCall(c, in, g, reserve)
		if err != nil {
			return nil, 0, err
		}
		o := cs.out.ints[:n]
		parallelFor(len(rowRanges), func(k int) {
			switch {
			case oneKey:
				fill(o[rowRanges[k][0]:rowRanges[k][1]], int64(n))
				return
			case key.nulls == nil:
				for r := rowRanges[k][0]; r < rowRanges[k][1]; r++ {
					o[r] = counts[key.ints[r]-lo]
				}
				return
			}
			for r := rowRanges[k][0]; r < rowRanges[k][1]; r++ {
				o[r] = counts[slot(r)]
			}
		})
		outs[c.item] = cs.out
	}
	return outs, parts, nil
}

// countKeys adds one to c[x - lo] for each x of xs. Rows in a run with
// the same key make the increments of one counter a chain, each waiting
// for the one before (one partition: every row's). When a sample of the
// first rows shows such runs, and there are countLanesSpan counters or
// fewer, countLanes sets of them take the rows in turn, so that as many
// chains run at once, and are summed into c after. Keys without runs are
// counted faster in one set.
func countKeys[K int32 | int64](xs []K, lo K, c []int64) {
	span := len(c)
	if span > countLanesSpan || len(xs) < 4*countLanes*span || !keyRuns(xs) {
		for _, x := range xs {
			c[x-lo]++
		}
		return
	}
	more := make([]int64, (countLanes-1)*span)
	c1, c2, c3 := more[:span], more[span:2*span], more[2*span:]
	i := 0
	for ; i+countLanes <= len(xs); i += countLanes {
		c[xs[i]-lo]++
		c1[xs[i+1]-lo]++
		c2[xs[i+2]-lo]++
		c3[xs[i+3]-lo]++
	}
	for ; i < len(xs); i++ {
		c[xs[i]-lo]++
	}
	for k := range c {
		c[k] += c1[k] + c2[k] + c3[k]
	}
}

// keyRuns reports whether at least a quarter of the first rows of xs (up
// to a thousand) have the key of the row before.
func keyRuns[K int32 | int64](xs []K) bool {
	sample := xs[:min(len(xs), 1024)]
	same := 0
	for i := 1; i < len(sample); i++ {
		if sample[i] == sample[i-1] {
			same++
		}
	}
	return 4*same >= len(sample)
}

// countLanes is how many sets of counters countKeys keeps for a span of
// at most countLanesSpan keys (a quarter of a megabyte of counters); its
// loop is written out for four.
const (
	countLanes     = 4
	countLanesSpan = 1 << 13
)

// counterBytes is the most memory countKeys takes to count span keys.
func counterBytes(span int) int64 {
	if span <= countLanesSpan {
		return int64(span) * 8 * countLanes
	}
	return int64(span) * 8
}

// stateBytes is the most memory evalUnsorted uses for parts partitions
// on threads threads: a count per partition and thread for count(*)
// without FILTER, an aggregate state per partition for any other call.
func stateBytes(g *windowGroup, parts, threads int) int64 {
	var counts, states int64
	for _, c := range g.calls {
		if c.fn == fnCount && len(c.filter) == 0 {
			counts = counterBytes(parts) * int64(max(threads, 1))
		}
		if !(c.fn == fnCount && c.star && len(c.filter) == 0) {
			states = int64(unsafe.Sizeof(aggState{}))
		}
	}
	return counts + states*int64(parts)
}
