package windower

import (
	"math/bits"

	"github.com/strata-db/strata/internal/hugepage"
)

// The packed sort: how a window group with PARTITION BY whose keys pack
// into one word is sorted, on one thread or several.
//
// When every key of a group is an integer-like column without NULLs and
// their codes (the bits in which each key's values differ, xorCode, or
// where those are too wide, the key's range and stride, as codeOf finds
// them) fit 64 bits with a row position, each row becomes one word: the
// keys' codes, the first key's highest, then the row's position. The
// words' order is the rows' stable sort order, and no two words are
// equal. sortComposite packs the same words, but sorts them with radix
// passes over every row, each scattering the whole array. Here, on t
// threads (one included):
//
//  1. The codes are found and the words written over t ranges of rows.
//  2. The words' top digit is counted over each range, and the words are
//     scattered by it into buckets (a stable counting scatter: within a
//     bucket, rows keep their order).
//  3. The buckets are cut into t runs of about n/t rows, and each run's
//     buckets are sorted on the bits that vary within each, least
//     significant digit first, while a bucket sits in the cache.
//  4. The permutation is read out of the words, and the partitions start
//     where the partition keys' codes change.
//
// Only the scatter on the top digit moves words across the whole array;
// the passes after it stay within a bucket. Every step runs on all the
// threads, and nothing is merged: the buckets are ranges of the words in
// order. Against hash buckets sorted one per thread (parallelSortPerm),
// no key is read through a permutation and no bucket's partitions are
// merged after. The sorted words stay with the evaluation (packedKeys),
// which decodes a key's values in sorted order from them.

// packedTopBits is the most bits of the top digit that buckets the words:
// 2048 buckets, tens of thousands of rows each at millions of rows.
const packedTopBits = 11

// sortPacked returns the stable permutation of rows 0..n-1 by
// gk's keys and the first row of each partition in that order, then n,
// sorted on t goroutines as the doc above says. It reports false,
// having done nothing, when the keys do not pack (a float, string or
// NULL key, or codes too wide), the grant has no room for the partition
// starts, or on more than one thread, one bucket holds most rows.
func (ev *evaluation) sortPacked(gk *groupKeys, n, t int) ([]int32, []int32, bool) {
	keys := gk.keys
	if n < 2 || len(gk.part) == 0 || len(keys) == 0 {
		return nil, nil, false
	}
	for _, k := range keys {
		if v := k.v; v.kind == kindFloat || v.kind == kindString || v.nulls != nil || len(v.ints) < n {
			return nil, nil, false
		}
	}
	ranges := splitRows(n, t)
	idxBits := bits.Len(uint(n - 1))
	codes, width, ok := packedCodes(keys, ranges, 64-idxBits)
	if !ok {
		return nil, nil, false
	}
	topBits := min(width, packedTopBits)
	topShift := uint(idxBits + width - topBits)
	nb := 1 << topBits
	// Beyond sortedGroup's reservation (the permutation, the words and
	// their scratch): the partition starts, at most one a row, and each
	// range's bucket counts.
	extra := int64(n)*4 + int64(len(ranges)+1)*int64(nb)*8
	if err := ev.budget.Reserve(extra); err != nil {
		return nil, nil, false
	}
	defer ev.budget.Release(extra)
	partBits := 0
	for _, c := range codes[:len(gk.part)] {
		partBits += c.width
	}

	// The words, the scatter's buffer and the permutation, made at once
	// (makeConcurrently). The permutation goes unused when the buckets
	// turn out uneven (one partition holding most rows), which is rare.
	var perm []int32
	makeConcurrently(3, t, func(i int) {
		switch i {
		case 0:
			ev.s.keys = grow(ev.s.keys, n)
		case 1:
			ev.s.keys2 = grow(ev.s.keys2, n)
		default:
			perm = hugepage.Make[int32](n, n)
		}
	})

	// 1. The words, each range's rows on a goroutine.
	words := ev.s.keys
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		w := words[lo:hi]
		for k, key := range keys {
			foldCode(w, key.v.ints[lo:hi], nil, flipOf(key.desc), codes[k], k)
		}
		for i := range w {
			w[i] = w[i]<<uint(idxBits) | uint64(lo+i)
		}
	})

	// 2. Scatter by the top digit into buckets.
	counts := make([][]int, len(ranges))
	parallelFor(len(ranges), func(r int) {
		c := make([]int, nb)
		for _, w := range words[ranges[r][0]:ranges[r][1]] {
			c[w>>topShift]++
		}
		counts[r] = c
	})
	starts := make([]int, nb+1) // bucket b is sorted[starts[b]:starts[b+1]]
	pos := 0
	for b := 0; b < nb; b++ {
		starts[b] = pos
		for r := range counts {
			c := counts[r][b]
			counts[r][b] = pos
			pos += c
		}
	}
	starts[nb] = n
	if t > 1 && unevenBuckets(starts, t) {
		return nil, nil, false
	}
	sorted := ev.s.keys2
	parallelFor(len(ranges), func(r int) {
		next := counts[r]
		for _, w := range words[ranges[r][0]:ranges[r][1]] {
			b := w >> topShift
			sorted[next[b]] = w
			next[b]++
		}
	})

	// 3. Each bucket sorted on the bits below the top digit, runs of
	// buckets of about n/t rows on a goroutine each.
	runs := cutBuckets(starts, t)
	parallelFor(len(runs)-1, func(r int) {
		var counts []int
		for b := runs[r]; b < runs[r+1]; b++ {
			lo, hi := starts[b], starts[b+1]
			counts = sortWordsLSD(sorted[lo:hi], words[lo:hi], uint(idxBits), topShift, counts)
		}
	})

	// 4. The permutation, and where the partitions start.
	partShift := uint(idxBits + width - partBits)
	found := make([][]int32, len(ranges))
	idxMask := uint64(1)<<uint(idxBits) - 1
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		var ps []int32
		prev := sorted[lo] >> partShift
		if lo == 0 {
			ps = append(ps, 0)
		} else if sorted[lo-1]>>partShift != prev {
			ps = append(ps, int32(lo))
		}
		for i, w := range sorted[lo:hi] {
			perm[lo+i] = int32(w & idxMask)
			if p := w >> partShift; p != prev {
				ps = append(ps, int32(lo+i))
				prev = p
			}
		}
		found[r] = ps
	})
	total := 1
	for _, ps := range found {
		total += len(ps)
	}
	partStarts := make([]int32, 0, total)
	for _, ps := range found {
		partStarts = append(partStarts, ps...)
	}
	partStarts = append(partStarts, int32(n))
	ev.packed = &packedKeys{words: sorted, codes: codes, idxBits: idxBits}
	return perm, partStarts, true
}

// packedKeys are the packed sort's words in sorted order, with what
// reads the keys back out of them.
type packedKeys struct {
	words   []uint64
	codes   []keyCode // by key
	idxBits int
}

// decode returns key k of keys in sorted order, read out of the words on
// threads goroutines: one pass in order, where a gather would read the
// key through the permutation.
func (pk *packedKeys) decode(keys []sortedKey, k, threads int) *vector {
	shift := uint(pk.idxBits)
	for _, c := range pk.codes[k+1:] {
		shift += uint(c.width)
	}
	c, mask, flip := pk.codes[k], widthMask(pk.codes[k].width), flipOf(keys[k].desc)
	n := len(pk.words)
	v := keys[k].v
	out := &vector{kind: v.kind, typ: v.typ, ints: hugepage.Make[int64](n, n)}
	ranges := splitRows(n, max(threads, 1))
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		for i, w := range pk.words[lo:hi] {
			out.ints[lo+i] = int64(c.decode(w>>shift&mask) ^ flip)
		}
	})
	return out
}

// packedCodes returns a code for each key and their total width, at most
// room bits, or false. Each key's xorCode comes first, its bits that
// differ found over the ranges, a goroutine each; if they are too wide
// together, a second pass finds each key's stats (statsOf) and each key
// takes the narrower of that and the code of its range and stride
// (strideCode), as sortComposite does.
func packedCodes(keys []sortedKey, ranges [][2]int, room int) ([]keyCode, int, bool) {
	diffs := perRange(keys, ranges, func(xs []int64, flip uint64) keyStats {
		first := uint64(xs[0]) ^ flip
		var diff uint64
		for _, x := range xs {
			diff |= uint64(x) ^ flip ^ first
		}
		return keyStats{diff: diff}
	})
	codes := make([]keyCode, len(keys))
	width := 0
	for k, key := range keys {
		st := combineStats(key, ranges, diffs[k])
		codes[k] = xorCode(st.diff, uint64(key.v.ints[0])^flipOf(key.desc))
		width += codes[k].width
	}
	if width <= room {
		return codes, width, true
	}
	stats := perRange(keys, ranges, statsOf[int64])
	width = 0
	for k, key := range keys {
		st := combineStats(key, ranges, stats[k])
		if c := strideCode(key.v.ints, flipOf(key.desc), st, ranges); c.width < codes[k].width {
			codes[k] = c
		}
		if width += codes[k].width; width > room {
			return nil, 0, false
		}
	}
	return codes, width, true
}

// perRange runs scan over each key's rows of each range, a goroutine a
// range: its results by key, then range.
func perRange(keys []sortedKey, ranges [][2]int, scan func(xs []int64, flip uint64) keyStats) [][]keyStats {
	found := make([][]keyStats, len(keys))
	for k := range found {
		found[k] = make([]keyStats, len(ranges))
	}
	parallelFor(len(ranges), func(r int) {
		for k, key := range keys {
			found[k][r] = scan(key.v.ints[ranges[r][0]:ranges[r][1]], flipOf(key.desc))
		}
	})
	return found
}

// combineStats is the stats of key over all its rows from those of its
// ranges, each range's diff against its first key: a bit differs from
// the first row's somewhere if it does within a range, or between a
// range's first key and the first row's.
func combineStats(key sortedKey, ranges [][2]int, found []keyStats) keyStats {
	flip := flipOf(key.desc)
	first := uint64(key.v.ints[0]) ^ flip
	st := keyStats{min: first, max: first}
	for r, f := range found {
		st.min, st.max = min(st.min, f.min), max(st.max, f.max)
		st.diff |= f.diff | (uint64(key.v.ints[ranges[r][0]]) ^ flip ^ first)
	}
	return st
}

// unevenBuckets reports whether a bucket (bucket b is rows
// starts[b]..starts[b+1]-1) holds more than half again a thread's share
// of the rows: one partition, or a few, hold most rows, and their bucket
// would sort on one goroutine while the others wait.
func unevenBuckets(starts []int, t int) bool {
	n := starts[len(starts)-1]
	for b := 1; b < len(starts); b++ {
		if int64(starts[b]-starts[b-1])*int64(2*t) > int64(3*n) {
			return true
		}
	}
	return false
}

// cutBuckets cuts buckets (bucket b is rows starts[b]..starts[b+1]-1)
// into at most t runs of whole buckets of about n/t rows each: run k is
// buckets cuts[k]..cuts[k+1]-1.
func cutBuckets(starts []int, t int) []int {
	nb := len(starts) - 1
	n := starts[nb]
	cuts := []int{0}
	b := 0
	for k := 1; k < t; k++ {
		target := k * n / t
		for b < nb && starts[b] < target {
			b++
		}
		if b > cuts[len(cuts)-1] && b < nb {
			cuts = append(cuts, b)
		}
	}
	return append(cuts, nb)
}

// sortWordsLSD sorts words (distinct: each ends in its row's position)
// on their bits from lo up to hi, least significant digit first, using
// scratch (as long as words) and counts (reused and returned); the
// other bits are equal across words, or already in order (the row
// positions below lo). Only the bits in which the words differ are
// sorted. The result is in words.
func sortWordsLSD(words, scratch []uint64, lo, hi uint, counts []int) []int {
	if len(words) < 2 {
		return counts
	}
	first := words[0]
	var diff uint64
	for _, w := range words {
		diff |= w ^ first
	}
	diff &= widthMask(int(hi)) &^ widthMask(int(lo))
	if diff == 0 {
		return counts
	}
	low := uint(bits.TrailingZeros64(diff))
	sorted, counts := lsdPasses(words, scratch, low, bits.Len64(diff)-int(low), counts)
	if &sorted[0] != &words[0] {
		copy(words, sorted)
	}
	return counts
}
