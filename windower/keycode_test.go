package windower

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestKeyCode checks that codes keep the keys' order, decode exactly, and
// take the width of the keys' span over their common stride, on strides
// of every kind and on keys where one is off the stride.
func TestKeyCode(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cases := []struct {
		name   string
		base   uint64
		stride uint64
		span   uint64 // codes up to span
		off    bool   // one key is off the stride
		width  int
	}{
		{"seconds in microseconds", 1 << 63, 1_000_000, 10_000_000, false, 24},
		{"days in microseconds", 1<<63 + 1_700_000_000_000_000, 86_400_000_000, 3650, false, 12},
		{"a power of two", 5, 1 << 20, 1000, false, 10},
		{"odd stride", 1 << 40, 3, 1 << 30, false, 31},
		{"cents", 0, 100, 1 << 20, false, 21},
		{"no stride", 7, 1, 1 << 33, false, 34},
		{"one key off the stride", 1 << 63, 1_000_000, 10_000_000, true, 44},
		{"near the top", math.MaxUint64 - 999*1000, 1000, 999, false, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := 5000
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = tc.base + tc.stride*rng.Uint64N(tc.span+1)
			}
			keys[0], keys[1] = tc.base, tc.base+tc.stride*tc.span // the span is reached
			if tc.off {
				keys[n/3]++ // not in the sample
			}
			st := statsOf(keys, 0)
			c := codeOf(keys, 0, st)
			odd := tc.stride >> bits.TrailingZeros64(tc.stride)
			if may := mayShareStride(keys, uint(bits.TrailingZeros64(st.diff))); may != (odd > 1) {
				t.Errorf("mayShareStride %v for a stride of %d", may, tc.stride)
			}
			if c.width != tc.width {
				t.Errorf("width %d, want %d (code %+v)", c.width, tc.width, c)
			}
			if c.width < 64 && st.diff != 0 {
				if most := uint64(1)<<c.width - 1; c.encode(st.max) > most {
					t.Errorf("largest code %d over %d bits", c.encode(st.max), c.width)
				}
			}
			sorted := slices.Clone(keys)
			slices.Sort(sorted)
			for i, k := range sorted {
				q := c.encode(k)
				if c.decode(q) != k {
					t.Fatalf("key %d decodes as %d", k, c.decode(q))
				}
				if i > 0 && (q < c.encode(sorted[i-1]) || (q == c.encode(sorted[i-1])) != (k == sorted[i-1])) {
					t.Fatalf("codes of %d and %d out of order", sorted[i-1], k)
				}
			}
		})
	}
}

func TestInverse(t *testing.T) {
	for _, x := range []uint64{1, 3, 15625, 675, 1<<63 + 1, math.MaxUint64} {
		if got := x * inverse(x); got != 1 {
			t.Errorf("%d * inverse = %d", x, got)
		}
	}
}

// TestSortPermStrided sorts keys on a stride (timestamps in whole
// seconds, days) alone and behind a partition key, wide enough that only
// their codes pack with a row position, against a comparison sort, with
// the sorted first key checked; and the same with one key off the
// stride, which must sort right on the wider path.
func TestSortPermStrided(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	n := 1 << 17
	const second = 1_000_000
	for _, tc := range []struct {
		name   string
		stride int64
		span   int64
		off    bool
	}{
		{"seconds", second, 1 << 36 / second * 64, false}, // 2^36 µs in steps of a second: 37 bits of XOR
		{"days", 86_400 * second, 1 << 20, false},
		{"seconds, one off", second, 1 << 36 / second * 64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
			ts := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
			for i := 0; i < n; i++ {
				g.ints = append(g.ints, rng.Int64N(1<<12)-1<<11)
				ts.ints = append(ts.ints, 1_700_000_000*second+tc.stride*(rng.Int64N(tc.span)-tc.span/2))
			}
			if tc.off {
				ts.ints[n/3]++
			}
			if w := 64 - bits.LeadingZeros64(uint64(slices.Max(ts.ints)-slices.Min(ts.ints))); w+12+17 <= 64 {
				t.Fatalf("the keys fit a word without codes (%d bits): the test proves nothing", w)
			}
			for _, keys := range [][]sortedKey{
				{{v: g}, {v: ts}},
				{{v: g, desc: true}, {v: ts, desc: true}},
				{{v: ts}},
				{{v: ts, desc: true}},
			} {
				var s sorter
				got := s.sortPerm(keys, n, nil)
				want := stablePerm(keys, n)
				if !slices.Equal(got, want) {
					t.Fatalf("%d keys, desc=%v: permutation differs from a stable comparison sort", len(keys), keys[0].desc)
				}
				for i, u := range s.sorted {
					if u != normalize(keys[0].v, int(got[i]), keys[0].desc) {
						t.Fatalf("%d keys, desc=%v: sorted first key at %d is %d, want %d", len(keys), keys[0].desc,
							i, u, normalize(keys[0].v, int(got[i]), keys[0].desc))
					}
				}
			}
		})
	}
}
