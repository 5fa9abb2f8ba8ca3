package windower

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"unsafe"
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
type partitioner struct {
	ids   []int32 // partition of each row
	dense []int32 // dense table: partition of key - min, -1 for none yet
	slots []int32 // hash table: partition + 1, 0 for empty
	first []int32 // first row of each partition (hash path)
	seed  maphash.Seed

	// The table prepare chose: dense over span slots from key lo, or hashed.
	isDense bool
	span    int64
	lo      int64
}

func newPartitioner() *partitioner { return &partitioner{seed: maphash.MakeSeed()} }

// prepare chooses the table for n rows of keys and returns the memory
// partitionIDs will use.
func (pt *partitioner) prepare(keys []*vector, n int) int64 {
	b := int64(n) * 4
	pt.span, pt.lo, pt.isDense = denseRange(keys, n)
	if pt.isDense {
		return b + pt.span*4
	}
	return b + int64(hashSlots(n))*4 + int64(n)*4
}

// partitionIDs returns each row's partition (0, 1, ... in order of first
// appearance) and the number of partitions, for the keys prepare saw.
// NULL keys form a partition of their own; float keys compare as
// compareFloat does (-0 = 0, NaN = NaN).
// It reports false, having given up, when hashed keys without a string
// column turn out to have more than n/hashGiveUp partitions: a radix
// sort is then cheaper than the table's cache misses.
func (pt *partitioner) partitionIDs(keys []*vector, n int) ([]int32, int, bool) {
	pt.ids = grow(pt.ids, n)
	ids := pt.ids[:n]
	if pt.isDense {
		return ids, pt.denseIDs(keys[0], pt.lo, int(pt.span), ids), true
	}
	limit := n
	if !hasStringKey(keys) {
		limit = n / hashGiveUp
	}
	parts, ok := pt.hashIDs(keys, n, ids, limit)
	return ids, parts, ok
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
// a dense table.
func denseRange(keys []*vector, n int) (int64, int64, bool) {
	if len(keys) != 1 || n == 0 {
		return 0, 0, false
	}
	v := keys[0]
	if v.kind != kindInt && v.kind != kindBool {
		return 0, 0, false
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i, x := range v.ints[:n] {
		if v.isNull(i) {
			continue
		}
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo > hi { // all NULL
		return 1, 0, true
	}
	span, borrow := bits.Sub64(uint64(hi), uint64(lo), 0)
	if borrow != 0 || span >= uint64(denseRangeFactor*n) {
		return 0, 0, false
	}
	return int64(span) + 2, lo, true
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

// hashSlots is the open-addressing table size for n rows: a power of two
// at least twice n, so the load stays at most one half.
func hashSlots(n int) int {
	return 1 << bits.Len(uint(2*n))
}

func (pt *partitioner) hashIDs(keys []*vector, n int, ids []int32, limit int) (int, bool) {
	size := hashSlots(n)
	pt.slots = grow(pt.slots, size)
	slots := pt.slots[:size]
	clear(slots)
	pt.first = pt.first[:0]
	mask := uint64(size - 1)
	for r := 0; r < n; r++ {
		h := pt.hashRow(keys, r)
		for s := h & mask; ; s = (s + 1) & mask {
			p := slots[s]
			if p == 0 {
				if len(pt.first) >= max(limit, 1) {
					return 0, false
				}
				id := int32(len(pt.first))
				pt.first = append(pt.first, int32(r))
				slots[s] = id + 1
				ids[r] = id
				break
			}
			if sameRowKeys(keys, int(pt.first[p-1]), r) {
				ids[r] = p - 1
				break
			}
		}
	}
	return len(pt.first), true
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
func evalUnsorted(calls []*callState, ids []int32, parts int, states []aggState) ([]aggState, error) {
	var counts []int64
	for _, cs := range calls {
		a := &cs.agg
		out := cs.out
		if a.fn == fnCount && a.incl == nil {
			if counts == nil {
				counts = make([]int64, parts)
				for _, id := range ids {
					counts[id]++
				}
			}
			o := out.ints[:len(ids)]
			for r, id := range ids {
				o[r] = counts[id]
			}
			continue
		}
		states = grow(states, parts)[:parts]
		for i := range states {
			states[i].reset()
		}
		for r, id := range ids {
			if a.included(r) {
				a.add(&states[id], r)
			}
		}
		for r, id := range ids {
			a.write(out, r, &states[id])
		}
		if a.overflow {
			return states, fmt.Errorf("%w: sum of select item %q", ErrOverflow, cs.c.alias)
		}
	}
	return states, nil
}

// evalUnsortedGroup evaluates an unsortedGroup over in-memory input and
// returns its outputs, in input order, by select item, and its number of
// partitions; or no outputs if the keys are better sorted (see
// partitionIDs). Its buffers are counted by reserve.
func evalUnsortedGroup(g *windowGroup, in *input, pt *partitioner, states *[]aggState,
	reserve func(int64, string) error) (map[int]*vector, int, error) {
	n := in.n
	keys := make([]*vector, len(g.partition))
	for i, k := range g.partition {
		v, err := k.expr.eval(in.cols, n)
		if err != nil {
			return nil, 0, fmt.Errorf("windower: partition by: %w", err)
		}
		keys[i] = v
	}
	if err := reserve(pt.prepare(keys, n), "partition table"); err != nil {
		return nil, 0, err
	}
	ids, parts, ok := pt.partitionIDs(keys, n)
	if !ok {
		return nil, 0, nil
	}
	if err := reserve(stateBytes(g, parts), "partition states"); err != nil {
		return nil, 0, err
	}
	identity := func(_ *expr, v *vector) *vector { return v }
	outs := make(map[int]*vector, len(g.calls))
	calls := make([]*callState, 0, len(g.calls))
	for _, c := range g.calls {
		cs, err := newCallState(c, in, n, nil, nil, g, identity)
		if err != nil {
			return nil, 0, err
		}
		if err := reserve(cs.out.bytes(), "window output"); err != nil {
			return nil, 0, err
		}
		calls = append(calls, cs)
		outs[c.item] = cs.out
	}
	var err error
	*states, err = evalUnsorted(calls, ids, parts, *states)
	if err != nil {
		return nil, 0, err
	}
	return outs, parts, nil
}

// stateBytes is the most memory evalUnsorted uses for parts partitions:
// a count per partition for count(*) without FILTER, an aggregate state
// per partition for any other call.
func stateBytes(g *windowGroup, parts int) int64 {
	var counts, states int64
	for _, c := range g.calls {
		if c.fn == fnCount && len(c.filter) == 0 {
			counts = 8
		}
		if !(c.fn == fnCount && c.star && len(c.filter) == 0) {
			states = int64(unsafe.Sizeof(aggState{}))
		}
	}
	return (counts + states) * int64(parts)
}
