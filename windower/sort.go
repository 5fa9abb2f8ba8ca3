package windower

import (
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/strata-db/strata/internal/hugepage"
)

// Sorting: stable permutations by radix sort over order-preserving keys,
// and row comparisons.

// sorter computes stable sort permutations. Its buffers are reused across
// calls, so one sorter serves a whole query.
type sorter struct {
	keys, keys2 []uint64
	idx2        []int32
	flags       []uint64
	counts      []int
	local       []uint32 // radixPackedMSD's per-bucket counters
	// diff, when diffKnown, is the OR of every key XOR the first, found
	// while the keys were written, for the next radix call.
	diff      uint64
	diffKnown bool
	identity  bool // perm is still the identity permutation
	// sorted holds, after sortPerm, the normalized values of the most
	// significant key in sorted order when that key has no NULLs (nil
	// otherwise), so callers can find boundaries without a gather.
	sorted []uint64
	// tied sorts the runs settleStrings walks: its scratch is never the
	// words of the run being walked, which may be this sorter's.
	tied *sorter
}

// sortedKey is a key vector with its sort direction.
type sortedKey struct {
	v          *vector
	desc       bool
	nullsFirst bool
}

// sortPerm returns a stable permutation of 0..n-1 ordering rows by keys,
// or nil when the rows are already in order. perm is reused when large
// enough.
func (s *sorter) sortPerm(keys []sortedKey, n int, perm []int32) []int32 {
	s.sorted = nil
	if inOrder(keys, n) {
		return nil
	}
	perm = grow(perm, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	s.sorted = nil
	if len(keys) == 0 || n < 2 {
		return perm
	}
	if s.sortComposite(keys, n, perm, nil) {
		return perm
	}
	// LSD over the key columns: a stable sort on each column, least
	// significant first, yields the lexicographic order. A string column
	// sorts on its first 8 bytes, then the rows those leave tied on the
	// whole strings (settleStrings).
	s.keys = grow(s.keys, n)
	for k := len(keys) - 1; k >= 0; k-- {
		key := keys[k]
		v := key.v
		if v.kind == kindString {
			prefixWords(s.keys, v, perm, 0, key.desc)
		} else if k == len(keys)-1 && v.kind != kindFloat {
			// perm is still the identity: read the column sequentially.
			flip := uint64(1) << 63
			if key.desc {
				flip = ^flip
			}
			// The bits that vary are found in the same pass (radix needs them).
			first := uint64(v.ints[0]) ^ flip
			var diff uint64
			for i, x := range v.ints[:n] {
				u := uint64(x) ^ flip
				s.keys[i] = u
				diff |= u ^ first
			}
			if v.nulls == nil {
				s.diff, s.diffKnown = diff, true
			}
		} else {
			for i, p := range perm {
				s.keys[i] = normalize(v, int(p), key.desc)
			}
		}
		if v.nulls != nil {
			// NULLs are equal to each other: give them one key so they
			// keep their order; the flag pass below places them.
			for i, p := range perm {
				if v.nulls[p] {
					s.keys[i] = 0
				}
			}
		}
		var sorted []uint64
		s.identity = k == len(keys)-1
		perm, sorted = s.radix(s.keys, perm)
		s.identity = false
		if v.kind == kindString {
			s.settleStrings(v, key.desc, perm, sorted, 0)
		} else if k == 0 && v.nulls == nil {
			s.sorted = sorted
		}
		if v.nulls != nil {
			s.flags = grow(s.flags, n)
			for i, p := range perm {
				null := v.nulls[p]
				if null != key.nullsFirst {
					s.flags[i] = 1
				} else {
					s.flags[i] = 0
				}
			}
			perm, _ = s.radix(s.flags, perm)
		}
	}
	return perm
}

// settleStrings orders by the whole strings, stably, the runs of rows
// of perm that a radix sort on their strings' bytes from depth (8 of
// them: words, in perm's order) left tied: rows whose strings share those
// bytes but differ after them, or in length. A run of equal strings, the
// common case of a partition key, is checked in one pass and left as it
// is. A large run whose strings all go past those 8 bytes sorts on the
// next 8 the same way; the others, by comparing the strings. NULLs (word
// 0) compare below every string and equal to each other; the caller's
// NULL pass places them.
func (s *sorter) settleStrings(v *vector, desc bool, perm []int32, words []uint64, depth int) {
	for lo := 0; lo < len(perm); {
		hi := lo + 1
		for hi < len(perm) && words[hi] == words[lo] {
			hi++
		}
		run := perm[lo:hi]
		lo = hi
		if len(run) < 2 || sameStrings(v, run) {
			continue
		}
		if len(run) >= settleRadixRows && allLonger(v, run, depth+8) { // the words were the strings' own bytes
			next := make([]uint64, len(run))
			prefixWords(next, v, run, depth+8, desc)
			if s.tied == nil {
				s.tied = &sorter{}
			}
			sortedPerm, sortedWords := s.tied.radix(next, run)
			copy(run, sortedPerm)
			copy(next, sortedWords) // the radix's scratch is the next call's
			s.settleStrings(v, desc, run, next, depth+8)
			continue
		}
		slices.SortStableFunc(run, func(a, b int32) int {
			c := compareValues(v, int(a), int(b), true)
			if desc {
				return -c
			}
			return c
		})
	}
}

// prefixWords sets words[i] to the 8 bytes from depth of the string of
// v at rows[i] (stringPrefix), every bit flipped for DESC, so that the
// words' order is the strings' order on those bytes.
func prefixWords(words []uint64, v *vector, rows []int32, depth int, desc bool) {
	var flip uint64
	if desc {
		flip = ^flip
	}
	for i, r := range rows {
		words[i] = stringPrefix(v.strs[r][min(depth, len(v.strs[r])):]) ^ flip
	}
}

// settleRadixRows is the least rows of a tied run that settleStrings
// sorts on the strings' next 8 bytes rather than by comparing them.
const settleRadixRows = 64

// allLonger reports whether the strings of v at rows are all non-NULL and
// at least n bytes long.
func allLonger(v *vector, rows []int32, n int) bool {
	for _, r := range rows {
		if v.isNull(int(r)) || len(v.strs[r]) < n {
			return false
		}
	}
	return true
}

// sameStrings reports whether the rows of v at rows are all equal (NULLs
// equal to each other only).
func sameStrings(v *vector, rows []int32) bool {
	first := rows[0]
	for _, r := range rows[1:] {
		if compareValues(v, int(first), int(r), true) != 0 {
			return false
		}
	}
	return true
}

// sortRows returns the stable permutation of positions 0..len(rows)-1
// that orders the rows rows[0], rows[1], ... of keys, reading the keys
// through rows instead of a gathered copy, and sets sorted as sortPerm
// does. It reports false, having sorted nothing, where sortComposite
// does not apply: the caller gathers the rows' keys and calls sortPerm.
func (s *sorter) sortRows(keys []sortedKey, rows []int32) ([]int32, bool) {
	n := len(rows)
	if n < 2 {
		return nil, false
	}
	perm := hugepage.Make[int32](n, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	if !s.sortComposite(keys, n, perm, rows) {
		return nil, false
	}
	return perm, true
}

// sortComposite sorts perm (the identity) in one radix sort when there
// are several keys, none with NULLs, and their codes (keyCode) add up,
// with a row position, to at most 64 bits: each row's word is every key's
// code, the most significant key's highest, so the words' order is the
// rows' lexicographic order, and the packed radix sort breaks ties by
// position (stable). Row i's values are the keys' at rows[i] (rows nil:
// at i). It reports false, having sorted nothing, when the codes do not
// fit.
func (s *sorter) sortComposite(keys []sortedKey, n int, perm []int32, rows []int32) bool {
	if len(keys) < 2 {
		return false
	}
	for _, key := range keys {
		if key.v.nulls != nil || key.v.kind == kindString {
			return false
		}
	}
	s.keys = grow(s.keys, n)
	s.keys2 = grow(s.keys2, n)
	words, vals := s.keys[:n], s.keys2[:n]
	// First the bits in which each key's values differ (cheap to find:
	// no range, no stride), enough where they fit.
	codes := make([]keyCode, len(keys))
	total := bits.Len(uint(n - 1))
	for k, key := range keys {
		codes[k] = xorCode(keyDiff(key, n, rows))
		total += codes[k].width
	}
	if total <= 64 {
		for k, key := range keys {
			foldKey(words, vals, key, rows, codes[k], k)
		}
	} else {
		// Each key's range and stride (codeOf), folded in as found.
		total = bits.Len(uint(n - 1))
		for k, key := range keys {
			// Integers are read where they are, other keys from vals.
			direct := rows == nil && key.v.kind != kindFloat
			var c keyCode
			if direct {
				xs, flip := key.v.ints[:n], flipOf(key.desc)
				c = codeOf(xs, flip, statsOf(xs, flip))
			} else {
				c = codeOf(vals, 0, normalizeInto(vals, key, rows))
			}
			if total += c.width; total > 64 {
				return false
			}
			codes[k] = c
			if direct {
				foldCode(words, key.v.ints[:n], nil, flipOf(key.desc), c, k)
			} else {
				foldCode(words, vals, nil, 0, c, k)
			}
		}
	}
	s.identity = true
	_, sorted := s.radix(words, perm)
	s.identity = false
	// The first key's normalized values in sorted order, from the words.
	shift := uint(0)
	for _, c := range codes[1:] {
		shift += uint(c.width)
	}
	first, mask := codes[0], widthMask(codes[0].width)
	for i, w := range sorted {
		sorted[i] = first.decode(w >> shift & mask)
	}
	s.sorted = sorted
	return true
}

// keyDiff returns the OR of every value of key at rows (rows nil: at
// 0..n-1) XOR the first, and the first, normalized.
func keyDiff(key sortedKey, n int, rows []int32) (diff, first uint64) {
	v := key.v
	row := func(i int) int {
		if rows == nil {
			return i
		}
		return int(rows[i])
	}
	first = normalize(v, row(0), key.desc)
	switch flip := flipOf(key.desc); {
	case v.kind == kindFloat:
		for i := 0; i < n; i++ {
			diff |= normalize(v, row(i), key.desc) ^ first
		}
	case rows != nil:
		for _, r := range rows {
			diff |= (uint64(v.ints[r]) ^ flip) ^ first
		}
	default:
		for _, x := range v.ints[:n] {
			diff |= (uint64(x) ^ flip) ^ first
		}
	}
	return diff, first
}

// foldKey shifts each word of words left by c's width and puts in the
// code of key's value at rows[i] (rows nil: at i), key being the k-th
// (the first: the codes alone). Floats are normalized into vals first.
func foldKey(words, vals []uint64, key sortedKey, rows []int32, c keyCode, k int) {
	v, flip := key.v, flipOf(key.desc)
	switch {
	case v.kind == kindFloat:
		normalizeInto(vals, key, rows)
		foldCode(words, vals, nil, 0, c, k)
	default:
		foldCode(words, v.ints, rows, flip, c, k)
	}
}

// foldCode shifts each word of words left by c's width and puts in the
// code of the key xs[rows[i]]^flip (rows nil: xs[i]^flip), the k-th key
// (the first: the codes alone).
func foldCode[W word](words []uint64, xs []W, rows []int32, flip uint64, c keyCode, k int) {
	w := uint(c.width)
	switch {
	case rows != nil && k == 0:
		for i, r := range rows {
			words[i] = c.encode(uint64(xs[r]) ^ flip)
		}
	case rows != nil:
		for i, r := range rows {
			words[i] = words[i]<<w | c.encode(uint64(xs[r])^flip)
		}
	case k == 0:
		for i, x := range xs[:len(words)] {
			words[i] = c.encode(uint64(x) ^ flip)
		}
	default:
		for i, x := range xs[:len(words)] {
			words[i] = words[i]<<w | c.encode(uint64(x)^flip)
		}
	}
}

// normalizeInto writes key's normalized values (normalize) at rows into
// out (rows nil: at 0..len(out)-1) and returns their stats.
func normalizeInto(out []uint64, key sortedKey, rows []int32) keyStats {
	v, flip := key.v, flipOf(key.desc)
	switch {
	case v.kind == kindFloat && rows != nil:
		for i, r := range rows {
			out[i] = normalize(v, int(r), key.desc)
		}
	case v.kind == kindFloat:
		for i := range out {
			out[i] = normalize(v, i, key.desc)
		}
	case rows != nil:
		for i, r := range rows {
			out[i] = uint64(v.ints[r]) ^ flip
		}
	default:
		for i, x := range v.ints[:len(out)] {
			out[i] = uint64(x) ^ flip
		}
	}
	return statsOf(out, 0)
}

// flipOf is what an integer's bits are XORed with to order them as
// unsigned words: the sign bit, and every bit for DESC.
func flipOf(desc bool) uint64 {
	if desc {
		return ^(uint64(1) << 63)
	}
	return 1 << 63
}

// widthMask is a mask of the low width bits.
func widthMask(width int) uint64 {
	if width >= 64 {
		return ^uint64(0)
	}
	return uint64(1)<<uint(width) - 1
}

// takeSorted returns the sorted first key's values (see sorted) and
// forgets the buffer that holds them, so that the caller may keep it.
func (s *sorter) takeSorted() []uint64 {
	out := s.sorted
	switch {
	case len(out) == 0:
	case len(s.keys) > 0 && &s.keys[0] == &out[0]:
		s.keys = nil
	case len(s.keys2) > 0 && &s.keys2[0] == &out[0]:
		s.keys2 = nil
	default:
		out = append([]uint64(nil), out...) // not the sorter's: copy to be safe
	}
	s.sorted = nil
	return out
}

// normalize maps a value to a uint64 whose unsigned order is the value's order.
func normalize(v *vector, i int, desc bool) uint64 {
	var u uint64
	if v.kind == kindFloat {
		f := v.floats[i]
		if f == 0 {
			f = 0 // -0 sorts with 0
		}
		if f != f {
			u = math.MaxUint64 // NaN above +Inf, as PostgreSQL
		} else {
			b := math.Float64bits(f)
			if b>>63 != 0 {
				u = ^b
			} else {
				u = b | 1<<63
			}
		}
	} else {
		u = uint64(v.ints[i]) ^ 1<<63
	}
	if desc {
		u = ^u
	}
	return u
}

// radix stably sorts perm by keys (keys[i] belongs to perm[i]) with LSD
// passes over only the bits of the keys' code (keyCode), in digits of at
// most 11 bits (so 1M distinct keys take two passes). It sorts perm in
// place and returns it with the sorted keys, which are in keys or in the
// sorter's scratch buffer.
func (s *sorter) radix(keys []uint64, perm []int32) ([]int32, []uint64) {
	n := len(keys)
	diff := s.diff
	if !s.diffKnown {
		first := keys[0]
		for _, k := range keys {
			diff |= k ^ first
		}
	}
	s.diffKnown = false
	if diff == 0 {
		return perm, keys
	}
	// The bits that vary, unless a sample says the keys may share a
	// stride and take more than a pass: then their range and stride.
	c := xorCode(diff, keys[0])
	if c.width > maxDigitBits && mayShareStride(keys, c.shift) {
		c = codeOf(keys, 0, statsOf(keys, 0))
	}
	if idxBits := bits.Len(uint(n - 1)); c.width+idxBits <= 64 {
		if c.odd == 1 {
			return s.radixPacked(keys, perm, c, idxBits)
		}
		// Divide the stride out first, so the passes subtract and shift
		// only, and multiply it back into the sorted keys.
		for i, k := range keys {
			keys[i] = c.encode(k)
		}
		perm, sorted := s.radixPacked(keys, perm, keyCode{width: c.width, odd: 1, inv: 1}, idxBits)
		for i, q := range sorted {
			sorted[i] = c.decode(q)
		}
		return perm, sorted
	}
	// Keys too wide to pack: sort (key, position) pairs on the bits in
	// which the keys differ.
	lo := bits.TrailingZeros64(diff)
	width := 64 - bits.LeadingZeros64(diff) - lo
	passes := (width + maxDigitBits - 1) / maxDigitBits
	digit := (width + passes - 1) / passes
	buckets := 1 << digit
	mask := uint64(buckets - 1)
	s.counts = grow(s.counts, passes*buckets)
	counts := s.counts
	clear(counts)
	sh := uint(lo)
	d := uint(digit)
	switch passes {
	case 1:
		c0 := counts[:buckets]
		for _, k := range keys {
			c0[k>>sh&mask]++
		}
	case 2:
		c0, c1 := counts[:buckets], counts[buckets:2*buckets]
		for _, k := range keys {
			k >>= sh
			c0[k&mask]++
			c1[k>>d&mask]++
		}
	default:
		for _, k := range keys {
			k >>= sh
			for p := 0; p < passes; p++ {
				counts[p*buckets+int(k>>(uint(p)*d)&mask)]++
			}
		}
	}
	s.keys2 = grow(s.keys2, n)
	s.idx2 = grow(s.idx2, n)
	srcK, dstK := keys, s.keys2
	srcI, dstI := perm, s.idx2
	for p := 0; p < passes; p++ {
		c := counts[p*buckets : (p+1)*buckets]
		sum := 0
		for b, x := range c {
			c[b] = sum
			sum += x
		}
		shift := uint(lo + p*digit)
		for i, k := range srcK {
			b := k >> shift & mask
			o := c[b]
			dstK[o] = k
			dstI[o] = srcI[i]
			c[b] = o + 1
		}
		srcK, dstK = dstK, srcK
		srcI, dstI = dstI, srcI
	}
	if &srcI[0] != &perm[0] {
		copy(perm, srcI) // the result is in the scratch buffer; callers own perm
	}
	return perm, srcK
}

const maxDigitBits = 11

// radixPackedMSD sorts keys whose codes (c, without an odd factor) and
// a row position fit a word, and take two digits: it packs them, then one
// pass on the high digit scatters rows into buckets of a few hundred rows,
// then each bucket is counting-sorted on the low digit while it sits in
// the L1 cache. That replaces the second full-array scatter of LSD, whose
// thousands of write streams miss the cache and TLB on every row.
func (s *sorter) radixPackedMSD(keys []uint64, perm []int32, c keyCode, idxBits int) ([]int32, []uint64) {
	n, width := len(keys), c.width
	// The high digit takes what makes buckets of ~256 rows, at most 12 bits.
	hiBits := min(max(bits.Len(uint(n))-8, 1), 10, width-1)
	loBits := width - hiBits
	if loBits > 12 {
		hiBits, loBits = width-12, 12
	}
	sh := uint(idxBits)
	hiShift := sh + uint(loBits)
	hiBuckets := 1 << hiBits
	loBuckets := 1 << loBits
	hiMask, loMask := uint64(hiBuckets-1), uint64(loBuckets-1)
	s.counts = grow(s.counts, hiBuckets+1)
	starts := s.counts[:hiBuckets+1]
	// Bucket-local offsets fit 32 bits: half the counters to clear and
	// keep in cache per bucket.
	s.local = grow(s.local, loBuckets)
	local := s.local[:loBuckets]
	clear(starts)
	// Pack (code, position) words and count the high digit in one pass.
	for i, k := range keys {
		w := (k-c.base)>>c.shift<<sh | uint64(i)
		keys[i] = w
		starts[w>>hiShift&hiMask]++
	}
	sum := 0
	for b := 0; b < hiBuckets; b++ {
		c := starts[b]
		starts[b] = sum
		sum += c
	}
	starts[hiBuckets] = n
	s.keys2 = grow(s.keys2, n)
	dst := s.keys2
	// Scatter on the high digit; starts[b] ends as the end of bucket b.
	for _, k := range keys {
		b := k >> hiShift & hiMask
		o := starts[b]
		dst[o] = k
		starts[b] = o + 1
	}
	// Each bucket [prev end, end) back into keys, sorted on the low digit.
	begin := 0
	for b := 0; b < hiBuckets; b++ {
		end := starts[b]
		switch end - begin {
		case 0:
		case 1:
			keys[begin] = dst[begin]
		default:
			clear(local)
			bucket := dst[begin:end]
			for _, k := range bucket {
				local[k>>sh&loMask]++
			}
			o := uint32(begin)
			for i, c := range local {
				local[i] = o
				o += c
			}
			for _, k := range bucket {
				i := k >> sh & loMask
				keys[local[i]] = k
				local[i]++
			}
		}
		begin = end
	}
	return s.unpack(keys, perm, c, idxBits)
}

// radixPacked is radix for keys whose codes (c, without an odd factor)
// and a row position fit in one uint64 together: it sorts (code, position) words, moving 8
// bytes per row and pass instead of 12 and writing one stream per bucket.
func (s *sorter) radixPacked(keys []uint64, perm []int32, c keyCode, idxBits int) ([]int32, []uint64) {
	n, width := len(keys), c.width
	passes := (width + maxDigitBits - 1) / maxDigitBits
	if passes == 2 && n >= 1<<16 {
		return s.radixPackedMSD(keys, perm, c, idxBits)
	}
	for i, k := range keys {
		keys[i] = (k-c.base)>>c.shift<<uint(idxBits) | uint64(i)
	}
	s.keys2 = grow(s.keys2, n)
	var sorted []uint64
	sorted, s.counts = lsdPasses(keys, s.keys2, uint(idxBits), width, s.counts)
	return s.unpack(sorted, perm, c, idxBits)
}

// lsdPasses sorts words stably on their bits from shift up to
// shift+width, least significant digit first, in digits of at most
// maxDigitBits, ping-ponging between words and scratch (as long); one
// pass counts every digit. It returns the slice that holds the result
// and counts, reused.
func lsdPasses(words, scratch []uint64, shift uint, width int, counts []int) ([]uint64, []int) {
	passes := (width + maxDigitBits - 1) / maxDigitBits
	digit := (width + passes - 1) / passes
	buckets := 1 << digit
	mask := uint64(buckets - 1)
	counts = grow(counts, passes*buckets)
	clear(counts)
	d := uint(digit)
	if passes == 2 { // the common case, without the inner loop
		c0, c1 := counts[:buckets], counts[buckets:2*buckets]
		for _, k := range words {
			k >>= shift
			c0[k&mask]++
			c1[k>>d&mask]++
		}
	} else {
		for _, k := range words {
			k >>= shift
			for p := 0; p < passes; p++ {
				counts[p*buckets+int(k>>(uint(p)*d)&mask)]++
			}
		}
	}
	src, dst := words, scratch
	for p := 0; p < passes; p++ {
		c := counts[p*buckets : (p+1)*buckets]
		sum := 0
		for b, x := range c {
			c[b] = sum
			sum += x
		}
		sh := shift + uint(p)*d
		for _, k := range src {
			b := k >> sh & mask
			o := c[b]
			dst[o] = k
			c[b] = o + 1
		}
		src, dst = dst, src
	}
	return src, counts
}

// unpack turns sorted (code, position) words back into the permutation
// and the sorted normalized keys (in place in src).
func (s *sorter) unpack(src []uint64, perm []int32, c keyCode, idxBits int) ([]int32, []uint64) {
	n := len(src)
	sh := uint(idxBits)
	idxMask := uint64(1)<<uint(idxBits) - 1
	if s.identity {
		for i, w := range src {
			perm[i] = int32(w & idxMask)
			src[i] = w>>sh<<c.shift + c.base
		}
		return perm, src
	}
	s.idx2 = grow(s.idx2, n)
	old := s.idx2
	copy(old, perm)
	for i, w := range src {
		perm[i] = old[w&idxMask]
		src[i] = w>>sh<<c.shift + c.base
	}
	return perm, src
}

// inOrder reports whether rows 0..n-1 are already ordered by keys. On
// unordered input it usually stops within a few rows.
func inOrder(keys []sortedKey, n int) bool {
	if len(keys) == 0 {
		return true // OVER (): one partition, every row a peer
	}
	if len(keys) == 1 && keys[0].v.kind == kindInt && keys[0].v.nulls == nil {
		x := keys[0].v.ints[:n]
		if keys[0].desc {
			for i := 1; i < n; i++ {
				if x[i] > x[i-1] {
					return false
				}
			}
			return true
		}
		for i := 1; i < n; i++ {
			if x[i] < x[i-1] {
				return false
			}
		}
		return true
	}
	for i := 1; i < n; i++ {
		if compareRows(keys, i-1, i) > 0 {
			return false
		}
	}
	return true
}

// compareRows compares rows a and b on keys (NULLs per nullsFirst).
func compareRows(keys []sortedKey, a, b int) int { return compareRowsTo(keys, a, keys, b) }

// compareRowsTo compares row a of keys with row b of other, keys of the
// same kinds and directions.
func compareRowsTo(keys []sortedKey, a int, other []sortedKey, b int) int {
	for i, k := range keys {
		w := other[i].v
		c := compareValuesTo(k.v, a, w, b, k.nullsFirst)
		if c != 0 {
			if k.desc {
				// NULL placement is not reversed by DESC.
				if k.v.isNull(a) || w.isNull(b) {
					return c
				}
				return -c
			}
			return c
		}
	}
	return 0
}

func compareValues(v *vector, a, b int, nullsFirst bool) int {
	return compareValuesTo(v, a, v, b, nullsFirst)
}

// compareValuesTo compares row a of v with row b of w, of v's kind.
func compareValuesTo(v *vector, a int, w *vector, b int, nullsFirst bool) int {
	an, bn := v.isNull(a), w.isNull(b)
	switch {
	case an && bn:
		return 0
	case an:
		if nullsFirst {
			return -1
		}
		return 1
	case bn:
		if nullsFirst {
			return 1
		}
		return -1
	}
	switch v.kind {
	case kindFloat:
		return compareFloat(v.floats[a], w.floats[b])
	case kindString:
		return strings.Compare(v.strs[a], w.strs[b])
	}
	return cmpInt(v.ints[a], w.ints[b])
}

// equalRows reports whether rows a and b agree on every key vector (NULLs equal).
func equalRows(keys []*vector, a, b int) bool {
	for _, v := range keys {
		if compareValues(v, a, b, false) != 0 {
			return false
		}
	}
	return true
}
