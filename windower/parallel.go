package windower

import (
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/strata-db/strata/internal/hugepage"
)

// Parallel evaluation of a window group in memory, on up to
// Options.Threads goroutines.
//
// The sort: keys that pack into a word (integers without NULLs, see
// packedsort.go) are sorted by the packed sort on every thread. Other
// keys: the rows are hash-partitioned on the PARTITION BY key into
// one bucket per thread (a stable counting scatter, so a bucket's rows
// keep their input order), and each bucket is sorted on its own
// goroutine with the group's keys. Every partition lies in one bucket,
// in the order the stable single-thread sort gives it; merging the
// buckets' partitions by key yields that sort's permutation exactly.
//
// A group without PARTITION BY, or whose buckets are uneven (one
// partition dominates), sorts contiguous ranges of its rows instead and
// merges them: parallelSortKey for one integer-like key, parallelSortRuns
// for any keys.
//
// The evaluation: the calls that can be evaluated over a range of a
// partition's rows by themselves (splittable) are evaluated over ranges
// of about n/threads rows cut anywhere, partitions included, running
// aggregates starting from a carry (evalRows, rangeCarries); the other
// calls over ranges of whole partitions cut at partition starts. Each
// range is evaluated on its own goroutine with its own copy of every
// call's state. Each writes only its rows of the outputs, so the result
// is the single-thread one bit for bit.

// maxThreads bounds the goroutines of one evaluation.
const maxThreads = 64

// parallelMinRows is the fewest rows of a group sorted or evaluated in
// parallel: below it the goroutines cost more than they save. Tests set
// it lower to run the parallel paths over small inputs.
var parallelMinRows = 1 << 14

// threadsFor returns how many goroutines work on n rows.
func (ev *evaluation) threadsFor(n int) int {
	t := min(ev.o.Threads, maxThreads)
	if t <= 1 || n < parallelMinRows || n < 2 {
		return 1
	}
	return min(t, n)
}

// parallelSortPerm returns the permutation sortPerm gives for gk's keys
// (nil: the rows are in order), sorting t hash buckets of the rows on t
// goroutines, and the first row of each partition in that order, then n
// (the merge knows where partitions start, so nothing compares the keys
// again). When the buckets are uneven it sorts with parallelSortRuns
// instead and returns, in place of the partition starts, the first key's
// values in that order when it is an integer-like key without NULLs (else
// nil), as decodeFirstKey has them. It reports false, having reserved
// nothing, when the grant does not hold the buffers: the caller sorts on
// one thread.
func (ev *evaluation) parallelSortPerm(gk *groupKeys, n, t int) ([]int32, *vector, []int32, bool) {
	if inOrder(gk.keys, n) {
		return nil, nil, nil, true
	}
	// Beyond what sortedGroup reserves for the single-thread sort
	// (permutation, keys and their scratch, flags): each row's bucket, the
	// rows by bucket (sorted in place), the buckets' local permutations,
	// index scratch and NULL flags, the partition starts (which outlive
	// this call), and each bucket's copy of the keys.
	extra := int64(n) * (2 + 4 + 4 + 4 + 8 + 4)
	for _, k := range gk.keys {
		extra += int64(n) * (kindBytes(k.v.kind) + 1)
	}
	if err := ev.budget.Reserve(extra); err != nil {
		return nil, nil, nil, false
	}
	held := extra
	defer func() { ev.budget.Release(held) }()

	bucket := make([]uint16, n)
	ranges := splitRows(n, t)
	seed := maphash.MakeSeed()
	counts := make([][]int, len(ranges)) // counts[r][b]: rows of range r in bucket b
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		c := make([]int, t)
		hashRows(gk.part, lo, hi, seed, t, bucket)
		for _, b := range bucket[lo:hi] {
			c[b]++
		}
		counts[r] = c
	})
	// A bucket of more than half again its share (one partition, or a few,
	// hold most rows) would sort on one goroutine while the others wait:
	// sort contiguous ranges of the rows and merge them instead.
	largest := 0
	for b := 0; b < t; b++ {
		rows := 0
		for r := range counts {
			rows += counts[r][b]
		}
		largest = max(largest, rows)
	}
	if int64(largest)*int64(2*t) > int64(3*n) {
		ev.budget.Release(held)
		held = 0
		bucket, counts = nil, nil
		perm, ok := ev.parallelSortRuns(gk.keys, n, t)
		if !ok || perm == nil || !oneWordKey(gk.keys[0].v) {
			return perm, nil, nil, ok
		}
		return perm, gatherParallel(gk.keys[0].v, perm, t), nil, true
	}
	// Offsets of (range, bucket) in rows, bucket-major: a stable scatter.
	starts := make([]int, t+1)
	offsets := make([][]int, len(ranges))
	for r := range offsets {
		offsets[r] = make([]int, t)
	}
	pos := 0
	for b := 0; b < t; b++ {
		starts[b] = pos
		for r := range ranges {
			offsets[r][b] = pos
			pos += counts[r][b]
		}
	}
	starts[t] = n
	rows := hugepage.Make[int32](n, n)
	parallelFor(len(ranges), func(r int) {
		off := offsets[r]
		for i := ranges[r][0]; i < ranges[r][1]; i++ {
			b := bucket[i]
			rows[off[b]] = int32(i)
			off[b]++
		}
	})

	// Sort each bucket in place: rows[starts[b]:starts[b+1]] ends as its
	// rows in order and parts[b] the offsets of its partitions' first rows.
	parts := make([][]int32, t)
	np := len(gk.part)
	first := gk.keys[0].v
	oneWord := np == 1 && first.kind != kindFloat && first.kind != kindString && first.nulls == nil
	parallelFor(t, func(b int) {
		lo, hi := starts[b], starts[b+1]
		if lo == hi {
			return
		}
		mine := rows[lo:hi]
		var s sorter
		local, ok := s.sortRows(gk.keys, mine)
		var keys []sortedKey
		if !ok {
			keys = make([]sortedKey, len(gk.keys))
			for k, key := range gk.keys {
				keys[k] = sortedKey{v: key.v.gather(mine, &vector{}), desc: key.desc, nullsFirst: key.nullsFirst}
			}
			local = s.sortPerm(keys, hi-lo, nil)
		}
		if local != nil {
			for i, p := range local {
				local[i] = mine[p]
			}
			copy(mine, local)
		}
		ps := []int32{int32(lo)}
		switch {
		case oneWord && local == nil:
			// The partition key comes first: its values in order.
			vals := keys[0].v.ints
			for i := 1; i < len(vals); i++ {
				if vals[i] != vals[i-1] {
					ps = append(ps, int32(lo+i))
				}
			}
		case oneWord && s.sorted != nil:
			vals := s.sorted[:hi-lo]
			for i := 1; i < len(vals); i++ {
				if vals[i] != vals[i-1] {
					ps = append(ps, int32(lo+i))
				}
			}
		default:
			for i := 1; i < len(mine); i++ {
				if !equalRows(gk.part, int(mine[i-1]), int(mine[i])) {
					ps = append(ps, int32(lo+i))
				}
			}
		}
		parts[b] = ps
	})

	// Merge the buckets' partitions by partition key: find their order,
	// then copy them into place on all the threads.
	type piece struct{ from, to, at int }
	var pieces []piece
	partKeys := gk.keys[:np]
	next := make([]int, t) // next partition of each bucket
	pos = 0
	for pos < n {
		best := -1
		for b := 0; b < t; b++ {
			if next[b] >= len(parts[b]) {
				continue
			}
			if best < 0 || compareRows(partKeys, int(rows[parts[b][next[b]]]), int(rows[parts[best][next[best]]])) < 0 {
				best = b
			}
		}
		ps := int(parts[best][next[best]])
		next[best]++
		pe := starts[best+1]
		if next[best] < len(parts[best]) {
			pe = int(parts[best][next[best]])
		}
		pieces = append(pieces, piece{from: ps, to: pe, at: pos})
		pos += pe - ps
	}
	perm := hugepage.Make[int32](n, n)
	partStarts := make([]int32, len(pieces)+1)
	for i, pc := range pieces {
		partStarts[i] = int32(pc.at)
	}
	partStarts[len(pieces)] = int32(n)
	cuts := splitRows(len(pieces), t)
	parallelFor(len(cuts), func(r int) {
		for _, pc := range pieces[cuts[r][0]:cuts[r][1]] {
			copy(perm[pc.at:], rows[pc.from:pc.to])
		}
	})
	return perm, nil, partStarts, true
}

// hashRows sets bucket[i], for rows lo..hi-1, to the bucket of the
// row's partition key: rows with equal keys (NULLs equal, -0 = 0, every
// NaN equal, as compareValues has them) share one.
func hashRows(part []*vector, lo, hi int, seed maphash.Seed, t int, bucket []uint16) {
	var h maphash.Hash
	h.SetSeed(seed)
	var buf [8]byte
	word := func(u uint64) {
		for k := range buf {
			buf[k] = byte(u >> (8 * k))
		}
		h.Write(buf[:])
	}
	for i := lo; i < hi; i++ {
		var x uint64
		if len(part) == 1 && part[0].kind != kindString {
			// The common case, without maphash: a multiplicative hash.
			x = hashWord(part[0], i)
		} else {
			h.Reset()
			for _, v := range part {
				switch {
				case v.isNull(i):
					h.WriteByte(0)
				case v.kind == kindString:
					h.WriteByte(1)
					word(uint64(len(v.strs[i])))
					h.WriteString(v.strs[i])
				default:
					h.WriteByte(1)
					word(hashWord(v, i))
				}
			}
			x = h.Sum64()
		}
		bucket[i] = uint16((x >> 32) * uint64(t) >> 32)
	}
}

// hashWord mixes row i's value of a numeric key into 64 bits.
func hashWord(v *vector, i int) uint64 {
	if v.isNull(i) {
		return 0x9e3779b97f4a7c15
	}
	var u uint64
	if v.kind == kindFloat {
		f := v.floats[i]
		switch {
		case f == 0:
			u = 0
		case math.IsNaN(f):
			u = math.MaxUint64
		default:
			u = math.Float64bits(f)
		}
	} else {
		u = uint64(v.ints[i])
	}
	// The finalizer of MurmurHash3.
	u ^= u >> 33
	u *= 0xff51afd7ed558ccd
	u ^= u >> 33
	u *= 0xc4ceb9fe1a85ec53
	u ^= u >> 33
	return u
}

// splitRows cuts rows 0..n-1 into t ranges of about n/t rows.
func splitRows(n, t int) [][2]int {
	out := make([][2]int, 0, t)
	for k := 0; k < t; k++ {
		lo, hi := k*n/t, (k+1)*n/t
		if lo < hi {
			out = append(out, [2]int{lo, hi})
		}
	}
	return out
}

// makeConcurrently calls alloc(0), ..., alloc(n-1), functions that
// allocate, on up to threads goroutines at once. The runtime clears a
// large allocation on the goroutine that asks for it, before it returns
// it: a query's buffers made one after another on one goroutine were
// cleared on one thread while the others waited, a fifth of the time of
// a window query over a million rows on two threads.
func makeConcurrently(n, threads int, alloc func(i int)) {
	if threads <= 1 || n <= 1 {
		for i := range n {
			alloc(i)
		}
		return
	}
	var next atomic.Int32
	parallelFor(min(threads, n), func(int) {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			alloc(i)
		}
	})
}

// parallelFor runs f(0), ..., f(k-1) on k goroutines and waits for them.
func parallelFor(k int, f func(i int)) {
	if k == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	wg.Add(k)
	for i := 0; i < k; i++ {
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// cutPartitions returns the indexes in starts (partition starts, then
// n) where t ranges of about n/t rows begin and end: range k is
// partitions cuts[k]..cuts[k+1]-1. A partition is never cut.
func cutPartitions(starts []int32, t int) []int {
	parts := len(starts) - 1
	n := int(starts[parts])
	cuts := []int{0}
	for k := 1; k < t; k++ {
		target := int32(k * n / t)
		j, _ := slices.BinarySearch(starts[:parts], target)
		if j > cuts[len(cuts)-1] && j < parts {
			cuts = append(cuts, j)
		}
	}
	return append(cuts, parts)
}

// worker returns a copy of cs that evaluates other partitions at the
// same time: the inputs and output are shared (each copy writes only
// its partitions' rows), the per-partition state is its own.
func (cs *callState) worker() *callState {
	w := &callState{c: cs.c, arg: cs.arg, argRows: cs.argRows, agg: cs.agg, out: cs.out}
	w.agg.overflow = false
	w.fr = framer{f: cs.fr.f, key: cs.fr.key}
	return w
}

// gatherParallel is v.gather(perm, &vector{}) on t goroutines.
func gatherParallel(v *vector, perm []int32, t int) *vector {
	if perm == nil {
		return v
	}
	out := newVector(v.kind, v.typ, len(perm), v.nulls != nil)
	gatherInto(v, perm, out, t)
	return out
}

// gatherInto writes the rows perm names of v to out, a vector of
// len(perm) rows of v's kind, over ranges of rows on up to t goroutines.
func gatherInto(v *vector, perm []int32, out *vector, t int) {
	n := len(perm)
	if t <= 1 || n < parallelMinRows {
		t = 1
	}
	ranges := splitRows(n, t)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		// A view of out's storage: gather writes into it in place.
		v.gather(perm[lo:hi], out.slice(lo, hi))
	})
}

// parallelSortKey returns the permutation sortPerm gives for one
// integer-like key without NULLs (a group without PARTITION BY, such as
// ORDER BY t), and the key's values in that order: t contiguous ranges of
// the rows are radix-sorted on their own goroutines, then merged pairwise
// in rounds, the left run first among equal keys, which keeps the sort
// stable. Each merge is cut at co-ranks (mergeRound), so that the last
// round, one merge, runs on every thread too. It reports false, having
// reserved nothing, when the grant does not hold the buffers: the caller
// sorts on one thread.
func (ev *evaluation) parallelSortKey(key sortedKey, n, t int) ([]int32, *vector, bool) {
	keys := []sortedKey{key}
	if inOrder(keys, n) {
		return nil, nil, true
	}
	// Beyond the single-thread sort's: the runs' sorter scratch and
	// local permutations, and a second (word, row) buffer for the merge.
	extra := int64(n) * (8 + 4 + 4 + 8 + 4)
	if err := ev.budget.Reserve(extra); err != nil {
		return nil, nil, false
	}
	defer ev.budget.Release(extra)
	v := key.v
	flip := uint64(1) << 63
	if key.desc {
		flip = ^flip
	}
	// Each run's sorter works in its rows of the buffers the merge uses:
	// its keys in words (where its sorted keys end, as a rule), its
	// scatter in words2, its permutation in rows. Scratch of its own was
	// about 20 bytes a row more to make and clear, on top of these.
	words, words2 := hugepage.Make[uint64](n, n), hugepage.Make[uint64](n, n)
	rows, rows2 := hugepage.Make[int32](n, n), hugepage.Make[int32](n, n)
	ranges := splitRows(n, t)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		w, ids := words[lo:hi:hi], rows[lo:hi:hi]
		s := sorter{keys: w, keys2: words2[lo:hi:hi]}
		part := sortedKey{v: &vector{kind: v.kind, typ: v.typ, ints: v.ints[lo:hi]}, desc: key.desc}
		local := s.sortPerm([]sortedKey{part}, hi-lo, ids)
		if local == nil {
			for i, x := range v.ints[lo:hi] {
				w[i], ids[i] = uint64(x)^flip, int32(lo+i)
			}
			return
		}
		if &local[0] != &ids[0] {
			copy(ids, local)
		}
		for i := range ids {
			ids[i] += int32(lo)
		}
		switch {
		case s.sorted == nil:
			for i, row := range ids {
				w[i] = uint64(v.ints[row]) ^ flip
			}
		case &s.sorted[0] != &w[0]:
			copy(w, s.sorted[:hi-lo])
		}
	})
	wordLess := func(x, y uint64) bool { return x < y }
	for len(ranges) > 1 {
		next, pieces := mergeRound(ranges, n, t, func(lo, mid, hi, k int) int {
			return coRank(words[lo:mid], words[mid:hi], k, wordLess)
		})
		parallelFor(len(pieces), func(j int) {
			pc := pieces[j]
			mergeWords(words[pc.a[0]:pc.a[1]], rows[pc.a[0]:pc.a[1]], words[pc.b[0]:pc.b[1]], rows[pc.b[0]:pc.b[1]],
				words2[pc.out[0]:pc.out[1]], rows2[pc.out[0]:pc.out[1]])
		})
		words, words2, rows, rows2 = words2, words, rows2, rows
		ranges = next
	}
	sv := &vector{kind: v.kind, typ: v.typ, ints: unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(words))), n)}
	cuts := splitRows(n, t)
	parallelFor(len(cuts), func(r int) {
		lo, hi := cuts[r][0], cuts[r][1]
		for i, u := range words[lo:hi] {
			sv.ints[lo+i] = int64(u ^ flip)
		}
	})
	return rows, sv, true
}

// mergeWords merges the sorted runs (aw, ar) and (bw, br) of words and
// their rows into (dw, dr), which hold both, a's first among equal words.
func mergeWords(aw []uint64, ar []int32, bw []uint64, br []int32, dw []uint64, dr []int32) {
	i, j, o := 0, 0, 0
	for i < len(aw) && j < len(bw) {
		if bw[j] < aw[i] {
			dw[o], dr[o] = bw[j], br[j]
			j++
		} else {
			dw[o], dr[o] = aw[i], ar[i]
			i++
		}
		o++
	}
	copy(dw[o:], aw[i:])
	o += copy(dr[o:], ar[i:])
	copy(dw[o:], bw[j:])
	copy(dr[o:], br[j:])
}

// oneWordKey reports whether v's values are their own sort words: an
// integer-like key without NULLs.
func oneWordKey(v *vector) bool {
	return v.kind != kindFloat && v.kind != kindString && v.nulls == nil
}

// parallelSortRuns returns the permutation sortPerm gives for keys of
// any types (nil: the rows are in order): t contiguous ranges of the rows
// are sorted on their own goroutines with the single-thread sorter, then
// merged pairwise in rounds by compareRows, the earlier run first among
// equal rows, which keeps the sort stable. Each merge is cut at co-ranks
// into pieces of about n/t rows merged on their own goroutines, so every
// round uses all the threads. It serves a group without PARTITION BY
// whose keys are not one integer-like key (parallelSortKey), and a group
// whose partitions hash into buckets too uneven for parallelSortPerm.
// It reports false, having reserved nothing, when the grant does not
// hold the buffers: the caller sorts on one thread.
func (ev *evaluation) parallelSortRuns(keys []sortedKey, n, t int) ([]int32, bool) {
	if inOrder(keys, n) {
		return nil, true
	}
	// Beyond what sortedGroup reserves for the single-thread sort: each
	// run's sorter scratch (keys, their second buffer, index scratch and
	// NULL flags) and the merge's second permutation.
	extra := int64(n) * (8 + 8 + 4 + 8 + 4)
	if err := ev.budget.Reserve(extra); err != nil {
		return nil, false
	}
	defer ev.budget.Release(extra)
	perm := hugepage.Make[int32](n, n)
	ranges := splitRows(n, t)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		run := make([]sortedKey, len(keys))
		for k, key := range keys {
			run[k] = sortedKey{v: key.v.slice(lo, hi), desc: key.desc, nullsFirst: key.nullsFirst}
		}
		var s sorter
		mine := perm[lo:hi:hi]
		local := s.sortPerm(run, hi-lo, mine)
		switch {
		case local == nil:
			for i := range mine {
				mine[i] = int32(lo + i)
			}
		default:
			copy(mine, local) // a no-op: sortPerm sorts mine in place
			for i := range mine {
				mine[i] += int32(lo)
			}
		}
	})
	less := func(a, b int32) bool { return compareRows(keys, int(a), int(b)) < 0 }
	buf := hugepage.Make[int32](n, n)
	for len(ranges) > 1 {
		next, pieces := mergeRound(ranges, n, t, func(lo, mid, hi, k int) int {
			return coRank(perm[lo:mid], perm[mid:hi], k, less)
		})
		src, dst := perm, buf
		parallelFor(len(pieces), func(j int) {
			pc := pieces[j]
			mergeRows(src[pc.a[0]:pc.a[1]], src[pc.b[0]:pc.b[1]], dst[pc.out[0]:pc.out[1]], less)
		})
		perm, buf = buf, perm
		ranges = next
	}
	return perm, true
}

// mergePiece is a piece of a round of merges: rows a of one sorted run
// and rows b of the next, which merge into rows out.
type mergePiece struct{ a, b, out [2]int }

// mergeRound pairs up the sorted runs ranges (contiguous, in row order)
// for a round of merges, and cuts each merge at co-ranks into pieces of
// about n/t rows, so that every round, the last included, keeps the t
// threads busy. An unpaired last run is one piece, copied. coRank(lo,
// mid, hi, k) is how many of the first k rows of the merge of runs
// [lo, mid) and [mid, hi) come from the first. It returns the next
// round's runs and this round's pieces.
func mergeRound(ranges [][2]int, n, t int, coRank func(lo, mid, hi, k int) int) (next [][2]int, pieces []mergePiece) {
	for r := 0; r < len(ranges); r += 2 {
		if r+1 == len(ranges) {
			last := ranges[r]
			next = append(next, last)
			pieces = append(pieces, mergePiece{a: last, b: [2]int{last[1], last[1]}, out: last})
			continue
		}
		lo, mid, hi := ranges[r][0], ranges[r][1], ranges[r+1][1]
		next = append(next, [2]int{lo, hi})
		parts := max(1, (t*(hi-lo)+n-1)/n)
		ia, ib := 0, 0
		for p := 1; p <= parts; p++ {
			k := (hi - lo) * p / parts
			i := coRank(lo, mid, hi, k)
			pieces = append(pieces, mergePiece{a: [2]int{lo + ia, lo + i}, b: [2]int{mid + ib, mid + k - i}, out: [2]int{lo + ia + ib, lo + k}})
			ia, ib = i, k-i
		}
	}
	return next, pieces
}

// coRank returns how many of the first k rows of the stable merge of the
// sorted runs a and b (a first among equal rows) come from a.
func coRank[T any](a, b []T, k int, less func(x, y T) bool) int {
	lo, hi := max(0, k-len(b)), min(k, len(a))
	for lo < hi {
		i := int(uint(lo+hi) >> 1)
		// a[i] is among the first k when it does not follow b[k-i-1].
		if !less(b[k-i-1], a[i]) {
			lo = i + 1
		} else {
			hi = i
		}
	}
	return lo
}

// mergeRows merges the sorted runs a and b into out (len(a)+len(b)
// rows), a first among equal rows.
func mergeRows(a, b, out []int32, less func(x, y int32) bool) {
	i, j, o := 0, 0, 0
	for i < len(a) && j < len(b) {
		if less(b[j], a[i]) {
			out[o] = b[j]
			j++
		} else {
			out[o] = a[i]
			i++
		}
		o++
	}
	o += copy(out[o:], a[i:])
	copy(out[o:], b[j:])
}

// Evaluation in ranges of rows: the rows are cut into ranges of about
// n/threads rows wherever the cuts fall in a partition, each evaluated
// on its own goroutine, for the calls that can be (splittable): those
// whose value at a row follows from its frame, its peer group or its
// position alone, given the partition's bounds and the peer groups that
// are numbered over all the rows first: row_number, rank, dense_rank,
// percent_rank, cume_dist, ntile, lag, lead, the value functions, and
// count, sum, avg, min and max over sliding frames (which start each
// range afresh at its first row's frame; the integer sums are exact, the
// deque's front depends only on the frame's rows). A RANGE offset's
// bound is found by a cursor that only moves forward: a range's cursors
// start at its first row's frame, found by binary search over the
// partition's keys (framer.seek). Aggregates over a
// frame from UNBOUNDED PRECEDING evaluate a piece of a partition from a
// carry: a running aggregate from the aggregate of the partition's rows
// before the range's first frame end (rangeCarries), an aggregate over
// the whole partition from the partition's aggregate (wholeCarries).
// For count, integer sums and averages, min and max, each range's share
// of a carry is aggregated on its own goroutine and the shares are
// combined in row order (exact: 128-bit sums; the first of equal
// extremes is kept); float sums and averages fold a carry's rows in row
// order on one goroutine, so every float addition happens in the
// single-thread order. EXCLUDE and float sums over sliding frames (a
// segment tree over the whole partition) are evaluated by whole
// partitions.

// rangeCarry is an aggregate's state a piece of a partition starts
// from: over rows [ps, end) of the partition (a running aggregate) or
// over the whole partition.
type rangeCarry struct {
	st  aggState
	end int
}

// carryKind is what a splittable call needs to evaluate a piece of a
// partition beyond the piece's rows.
type carryKind uint8

const (
	carryNone    carryKind = iota
	carryRunning           // the aggregate of the rows before the piece's first frame end
	carryWhole             // the aggregate of the whole partition
)

// splittable reports whether the call can be evaluated over a range of
// a partition's rows by itself, and what carry it then needs. It follows
// evalAggregate's choice of algorithm.
func (cs *callState) splittable(hasOrder bool) (bool, carryKind) {
	c := cs.c
	f := &c.frame
	if !c.fn.isAggregate() {
		return true, carryNone
	}
	a := &cs.agg
	switch {
	case f.wholePartition(hasOrder) && a.fn == fnCount && a.incl == nil:
		return true, carryNone // the row count
	case f.wholePartition(hasOrder):
		return true, carryWhole
	case f.exclude != excludeNoOthers || (!a.invertible() && (a.fn == fnSum || a.fn == fnAvg) && f.start.kind != boundUnboundedPreceding):
		return false, carryNone // a segment tree
	case f.start.kind == boundUnboundedPreceding:
		return true, carryRunning
	}
	return true, carryNone // a deque or a sliding aggregate
}

// evalRows evaluates the calls of g.calls at indexes calls (splittable)
// over about g.threads equal ranges of the rows, one goroutine per
// range, and marks in overflow the calls whose sum overflowed.
func (g *groupEval) evalRows(starts []int32, calls []int, overflow []bool) {
	ranges := splitRows(g.n, g.threads)
	// The carries of each call for the first and the last piece of each
	// range (nil: none needed).
	firstCarry := make([][]rangeCarry, len(calls))
	lastCarry := make([][]rangeCarry, len(calls))
	for j, k := range calls {
		switch _, carry := g.calls[k].splittable(g.hasOrder); carry {
		case carryRunning:
			firstCarry[j] = g.calls[k].rangeCarries(&g.part, starts, ranges)
		case carryWhole:
			firstCarry[j], lastCarry[j] = g.calls[k].wholeCarries(starts, ranges)
		}
	}
	flags := make([][]bool, len(ranges))
	parallelFor(len(ranges), func(r int) {
		p := g.part // shares the peer groups, read only
		lo, hi := ranges[r][0], ranges[r][1]
		first, last := partitionOf(starts, lo), partitionOf(starts, hi-1)
		flags[r] = make([]bool, len(calls))
		for j, k := range calls {
			w := g.calls[k].worker()
			piece := func(q int) {
				p.set(int(starts[q]), int(starts[q+1]))
				p.lo, p.hi = max(p.ps, lo), min(p.pe, hi)
				w.eval(&p)
			}
			// The partitions [a, b) lie in the range whole; the first
			// and last may be pieces of larger ones.
			a, b := first, last+1
			if int(starts[first]) < lo {
				if firstCarry[j] != nil {
					w.carry = firstCarry[j][r]
				}
				piece(first)
				a = first + 1
			}
			if b > a && int(starts[last+1]) > hi {
				if lastCarry[j] != nil {
					w.carry = lastCarry[j][r]
				}
				piece(last)
				b = last
			}
			if a < b {
				w.evalAll(&p, starts[a:b+1])
			}
			flags[r][j] = w.agg.overflow
		}
	})
	for r := range flags {
		for j, k := range calls {
			overflow[k] = overflow[k] || flags[r][j]
		}
	}
}

// partitionOf returns the partition (an index into starts) that holds row i.
func partitionOf(starts []int32, i int) int {
	q, found := slices.BinarySearch(starts, int32(i))
	if !found {
		q--
	}
	return q
}

// rangeCarries returns, for each range that starts inside a partition,
// the running aggregate of the partition's rows up to the range's first
// frame end (or its first row, if that is earlier); ranges that start a
// partition get none.
func (cs *callState) rangeCarries(part *partition, starts []int32, ranges [][2]int) []rangeCarry {
	out := make([]rangeCarry, len(ranges))
	from := make([]int, len(ranges)) // rows [from, out[r].end) fold into range r's carry
	chained := make([]bool, len(ranges))
	need := make([]bool, len(ranges))
	p := *part
	fr := framer{f: cs.fr.f, key: cs.fr.key}
	for r := 1; r < len(ranges); r++ {
		lo := ranges[r][0]
		q := partitionOf(starts, lo)
		ps := int(starts[q])
		if ps == lo {
			continue
		}
		p.set(ps, int(starts[q+1]))
		p.lo = lo // the cursors start at lo's frame (framer.seek)
		fr.reset(&p)
		_, e := fr.bounds(lo)
		need[r] = true
		out[r].end = min(lo, e)
		from[r] = ps
		if need[r-1] && ranges[r-1][0] > ps {
			// The previous range starts in the same partition: its carry
			// is the start of this one.
			from[r], chained[r] = out[r-1].end, true
		}
	}
	a := &cs.agg
	// start returns range r's state set to what it carries in: the state
	// the previous range ended with, or nothing.
	start := func(r int) *aggState {
		st := &out[r].st
		if chained[r] {
			*st = out[r-1].st
		} else {
			st.reset()
		}
		return st
	}
	if a.kind == kindFloat && (a.fn == fnSum || a.fn == fnAvg) {
		// In row order on one goroutine: float additions do not reorder.
		for r := range out {
			if !need[r] {
				continue
			}
			st := start(r)
			for i := from[r]; i < out[r].end; i++ {
				if a.included(i) {
					a.add(st, i)
				}
			}
		}
		return out
	}
	share := make([]aggState, len(ranges))
	parallelFor(len(ranges), func(r int) {
		st := &share[r]
		st.reset()
		if !need[r] {
			return
		}
		for i := from[r]; i < out[r].end; i++ {
			if a.included(i) {
				a.add(st, i)
			}
		}
	})
	for r := range out {
		if !need[r] {
			continue
		}
		a.merge(start(r), &share[r])
	}
	return out
}

// wholeCarries returns, for each range, the aggregate of the whole
// partition its first piece and its last piece are cut from (zero where
// the piece is a whole partition). Each cut partition is aggregated in
// shares, one per range it spans, on their own goroutines, combined in
// row order; float sums and averages fold each cut partition in row
// order on one goroutine.
func (cs *callState) wholeCarries(starts []int32, ranges [][2]int) (first, last []rangeCarry) {
	a := &cs.agg
	sequential := a.kind == kindFloat && (a.fn == fnSum || a.fn == fnAvg)
	// The cut partitions, each with the ranges it spans.
	type cut struct{ q, r0, r1 int }
	var cuts []cut
	for r := 1; r < len(ranges); r++ {
		lo := ranges[r][0]
		q := partitionOf(starts, lo)
		if int(starts[q]) == lo {
			continue
		}
		if len(cuts) > 0 && cuts[len(cuts)-1].q == q {
			cuts[len(cuts)-1].r1 = r
			continue
		}
		cuts = append(cuts, cut{q: q, r0: r - 1, r1: r})
	}
	// One task per share: rows [lo, hi) into shares[task].
	type task struct {
		c      int // index into cuts
		lo, hi int
	}
	var tasks []task
	for ci, c := range cuts {
		ps, pe := int(starts[c.q]), int(starts[c.q+1])
		if sequential {
			tasks = append(tasks, task{c: ci, lo: ps, hi: pe})
			continue
		}
		for r := c.r0; r <= c.r1; r++ {
			tasks = append(tasks, task{c: ci, lo: max(ps, ranges[r][0]), hi: min(pe, ranges[r][1])})
		}
	}
	shares := make([]aggState, len(tasks))
	parallelFor(len(tasks), func(k int) {
		st := &shares[k]
		st.reset()
		for i := tasks[k].lo; i < tasks[k].hi; i++ {
			if a.included(i) {
				a.add(st, i)
			}
		}
	})
	totals := make([]aggState, len(cuts))
	for ci := range totals {
		totals[ci].reset()
	}
	for k, tk := range tasks { // in row order within each cut partition
		if sequential {
			totals[tk.c] = shares[k]
		} else {
			a.merge(&totals[tk.c], &shares[k])
		}
	}
	first, last = make([]rangeCarry, len(ranges)), make([]rangeCarry, len(ranges))
	for ci, c := range cuts {
		for r := c.r0; r <= c.r1; r++ {
			if r > c.r0 {
				first[r].st = totals[ci]
			}
			if r < c.r1 {
				last[r].st = totals[ci]
			}
		}
	}
	return first, last
}
