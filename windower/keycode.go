package windower

import (
	"math/bits"
	"slices"
)

// Key codes: the radix sorts order normalized 64-bit keys by the bits in
// which they differ. A key code narrows those bits further, the way a
// columnar codec stores such a column (frame of reference and greatest
// common divisor, as ClickHouse's Gcd codec): a key's code is its distance
// from the smallest key divided by the stride every distance shares, a
// power of two times an odd factor. Timestamps in whole seconds stored in
// microseconds, dates as timestamps, prices in whole cents of a dollar
// column: ten million distinct seconds take 24 bits as codes against 38
// as the bits that vary, which is what lets (partition key, timestamp)
// pack into one word with a row position, and a single such key take
// fewer radix passes.
//
// Codes preserve order (the stride divides every distance exactly) and
// decode exactly, so the sorted keys the sorter hands back are the
// normalized keys themselves.

// keyCode maps normalized keys to dense codes in [0, 2^width).
type keyCode struct {
	base  uint64 // the smallest key
	shift uint   // the stride's power of two
	odd   uint64 // the stride's odd factor
	inv   uint64 // odd's inverse modulo 2^64, so dividing is a multiply
	width int    // the bits of the largest code
}

// encode returns k's code; k must be one of the keys the code was made for.
func (c keyCode) encode(k uint64) uint64 { return (k - c.base) >> c.shift * c.inv }

// decode returns the key whose code is q.
func (c keyCode) decode(q uint64) uint64 { return q*c.odd<<c.shift + c.base }

// xorCode is the code of keys that share every bit but those set in
// diff (the OR of every key XOR first): those bits, shifted down. It
// needs one cheap pass (no range, no stride) and is as narrow as codeOf's
// where the keys fill their range.
func xorCode(diff, first uint64) keyCode {
	c := keyCode{odd: 1, inv: 1}
	if diff == 0 {
		c.base = first
		return c
	}
	c.shift = uint(bits.TrailingZeros64(diff))
	c.width = bits.Len64(diff) - int(c.shift)
	c.base = first &^ (widthMask(c.width) << c.shift) // the bits every key shares
	return c
}

// keyStats are what one pass over keys learns for a code: the smallest
// and largest key, and the OR of every key XOR the first (its trailing
// zeros are those every distance from the smallest shares).
type keyStats struct {
	min, max, diff uint64
}

// word is what statsOf and codeOf read keys from: normalized keys, or
// integers that normalize by XOR with a flip (flipOf).
type word interface{ ~uint64 | ~int64 }

// statsOf scans the keys x^flip of xs.
func statsOf[W word](xs []W, flip uint64) keyStats {
	first := uint64(xs[0]) ^ flip
	st := keyStats{min: first, max: first}
	for _, x := range xs {
		k := uint64(x) ^ flip
		st.min = min(st.min, k)
		st.max = max(st.max, k)
		st.diff |= k ^ first
	}
	return st
}

// codeSample is how many keys, evenly spaced, propose a stride's odd
// factor, which every key is then checked against.
const codeSample = 64

// mayShareStride reports whether a sample of keys, whose distances all
// divide by 2^shift, has distances that share an odd factor too: whether
// codeOf may find a stride, worth the pass its range takes.
func mayShareStride(keys []uint64, shift uint) bool {
	return sampleOdd(keys, 0, keys[0], shift) > 1
}

// sampleOdd is the odd factor of the greatest common divisor of the
// distances from base of a sample of the keys x^flip of xs, each
// distance divided by 2^shift first.
func sampleOdd[W word](xs []W, flip, base uint64, shift uint) uint64 {
	var g uint64
	n := len(xs)
	for i := 0; i < codeSample && g != 1; i++ {
		k := uint64(xs[i*n/codeSample%n]) ^ flip
		d := k - base
		if k < base {
			d = base - k
		}
		g = gcd(g, d>>shift)
	}
	return g >> bits.TrailingZeros64(g|1<<63)
}

// codeOf returns the code of the keys x^flip of xs (st their stats). The
// stride's power of two is exact from the stats; an odd factor is
// proposed by a sample (sampleOdd) and kept only when every key's
// distance divides by it and it narrows the codes.
func codeOf[W word](xs []W, flip uint64, st keyStats) keyCode {
	return strideCode(xs, flip, st, nil)
}

// strideCode is codeOf checking that every key is on the stride over
// ranges of xs, a goroutine each (nil: all of xs, on this one).
func strideCode[W word](xs []W, flip uint64, st keyStats, ranges [][2]int) keyCode {
	c := keyCode{base: st.min, odd: 1, inv: 1}
	if st.diff == 0 {
		return c
	}
	c.shift = uint(bits.TrailingZeros64(st.diff))
	span := (st.max - st.min) >> c.shift
	c.width = bits.Len64(span)
	odd := sampleOdd(xs, flip, st.min, c.shift)
	if odd <= 1 || bits.Len64(span/odd) == c.width {
		return c
	}
	inv := inverse(odd)
	most := ^uint64(0) / odd // the largest quotient of an exact division
	if ranges == nil {
		ranges = [][2]int{{0, len(xs)}}
	}
	off := make([]bool, len(ranges))
	parallelFor(len(ranges), func(r int) {
		for _, x := range xs[ranges[r][0]:ranges[r][1]] {
			if (uint64(x)^flip-st.min)>>c.shift*inv > most {
				off[r] = true // a key off the stride
				return
			}
		}
	})
	if slices.Contains(off, true) {
		return c
	}
	c.odd, c.inv, c.width = odd, inv, bits.Len64(span/odd)
	return c
}

// gcd is the greatest common divisor of a and b (gcd(0, b) = b).
func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// inverse returns the inverse of the odd number x modulo 2^64 by Newton's
// iteration: x is its own inverse to 3 bits, and each step doubles the
// bits that are right.
func inverse(x uint64) uint64 {
	y := x
	for range 5 {
		y *= 2 - x*y
	}
	return y
}
