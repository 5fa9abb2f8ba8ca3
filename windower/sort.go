package windower

import (
	"math"
	"slices"
	"strings"
)

// sorter computes stable sort permutations. Its buffers are reused across
// calls, so one sorter serves a whole query.
type sorter struct {
	keys, keys2 []uint64
	idx2        []int32
	flags       []uint64
}

// sortedKey is a key vector with its sort direction.
type sortedKey struct {
	v          *vector
	desc       bool
	nullsFirst bool
}

// sortPerm returns a stable permutation of 0..n-1 ordering rows by keys.
// perm is reused when large enough.
func (s *sorter) sortPerm(keys []sortedKey, n int, perm []int32) []int32 {
	perm = grow(perm, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	if len(keys) == 0 || n < 2 {
		return perm
	}
	radix := true
	for _, k := range keys {
		if k.v.kind == kindString {
			radix = false
		}
	}
	if !radix {
		slices.SortStableFunc(perm, func(a, b int32) int { return compareRows(keys, int(a), int(b)) })
		return perm
	}
	// LSD over the key columns: a stable sort on each column, least
	// significant first, yields the lexicographic order.
	s.keys = grow(s.keys, n)
	for k := len(keys) - 1; k >= 0; k-- {
		key := keys[k]
		v := key.v
		for i, p := range perm {
			s.keys[i] = normalize(v, int(p), key.desc)
		}
		perm = s.radix(s.keys, perm)
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
			perm = s.radix(s.flags, perm)
		}
	}
	return perm
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

// radix stably sorts perm by keys (keys[i] belongs to perm[i]) with 8-bit
// LSD passes, skipping the byte positions in which all keys agree. It
// sorts perm in place; keys are clobbered.
func (s *sorter) radix(keys []uint64, perm []int32) []int32 {
	n := len(keys)
	var counts [8][256]int
	for _, k := range keys {
		counts[0][k&0xff]++
		counts[1][k>>8&0xff]++
		counts[2][k>>16&0xff]++
		counts[3][k>>24&0xff]++
		counts[4][k>>32&0xff]++
		counts[5][k>>40&0xff]++
		counts[6][k>>48&0xff]++
		counts[7][k>>56]++
	}
	s.keys2 = grow(s.keys2, n)
	s.idx2 = grow(s.idx2, n)
	srcK, dstK := keys, s.keys2
	srcI, dstI := perm, s.idx2
	for pass := 0; pass < 8; pass++ {
		c := &counts[pass]
		if c[keys[0]>>(8*pass)&0xff] == n {
			continue // every key has the same byte here
		}
		var offs [256]int
		sum := 0
		for b := 0; b < 256; b++ {
			offs[b] = sum
			sum += c[b]
		}
		shift := uint(8 * pass)
		for i, k := range srcK {
			b := k >> shift & 0xff
			o := offs[b]
			dstK[o] = k
			dstI[o] = srcI[i]
			offs[b] = o + 1
		}
		srcK, dstK = dstK, srcK
		srcI, dstI = dstI, srcI
	}
	if &srcI[0] != &perm[0] {
		copy(perm, srcI) // the result is in the scratch buffer; callers own perm
	}
	return perm
}

// compareRows compares rows a and b on keys (NULLs per nullsFirst).
func compareRows(keys []sortedKey, a, b int) int {
	for _, k := range keys {
		c := compareValues(k.v, a, b, k.nullsFirst)
		if c != 0 {
			if k.desc {
				// NULL placement is not reversed by DESC.
				an, bn := k.v.isNull(a), k.v.isNull(b)
				if an || bn {
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
	an, bn := v.isNull(a), v.isNull(b)
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
		return compareFloat(v.floats[a], v.floats[b])
	case kindString:
		return strings.Compare(v.strs[a], v.strs[b])
	}
	return cmpInt(v.ints[a], v.ints[b])
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
