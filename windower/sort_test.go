package windower

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/cputime"
)

// TestSortPerm checks the radix paths (packed and unpacked, NULLs, DESC,
// floats, several keys) against a comparison sort.
func TestSortPerm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s sorter
	for it := 0; it < 200; it++ {
		n := 1 + rng.IntN(3000)
		nk := 1 + rng.IntN(3)
		keys := make([]sortedKey, nk)
		for k := range keys {
			v := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
			spread := []int64{2, 100, 1 << 40, 1 << 62}[rng.IntN(4)]
			floats := rng.IntN(4) == 0
			if floats {
				v.kind, v.typ = kindFloat, arrow.PrimitiveTypes.Float64
			}
			if rng.IntN(3) == 0 {
				v.nulls = make([]bool, n)
			}
			for i := 0; i < n; i++ {
				x := rng.Int64N(spread) - spread/2
				if floats {
					v.floats = append(v.floats, float64(x)/3)
				} else {
					v.ints = append(v.ints, x)
				}
				if v.nulls != nil {
					v.nulls[i] = rng.IntN(5) == 0
				}
			}
			keys[k] = sortedKey{v: v, desc: rng.IntN(2) == 0, nullsFirst: rng.IntN(2) == 0}
		}
		got := s.sortPerm(keys, n, nil)
		if got == nil { // already in order
			got = make([]int32, n)
			for i := range got {
				got[i] = int32(i)
			}
		}
		want := stablePerm(keys, n)
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (n=%d, keys=%d): permutation differs from a stable comparison sort", it, n, nk)
		}
	}
}

// TestSortPermStrings checks the string keys' radix on their first 8
// bytes, and the runs it leaves tied, against a comparison sort: strings
// that share their first 8 bytes and differ after, or only in length,
// zero bytes, the empty string, NULLs (holding a value, as a NULL row of
// a gathered vector may), ASC and DESC, NULLs first and last, and beside
// integer keys.
func TestSortPermStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	stems := []string{"", "a", "label wo", "label word ", "label words", "\x00", "\x00\x00\x00\x00\x00\x00\x00\x00\x01", "zzzzzzzzzzzz", "a long shared prefix of many words, ", "a long shared prefix of many words"}
	var s sorter
	for it := 0; it < 300; it++ {
		n := 1 + rng.IntN(2000)
		nk := 1 + rng.IntN(3)
		keys := make([]sortedKey, nk)
		for k := range keys {
			if k > 0 && rng.IntN(2) == 0 {
				v := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
				for range n {
					v.ints = append(v.ints, rng.Int64N(5))
				}
				keys[k] = sortedKey{v: v, desc: rng.IntN(2) == 0}
				continue
			}
			v := &vector{kind: kindString, typ: arrow.BinaryTypes.String}
			if rng.IntN(2) == 0 {
				v.nulls = make([]bool, n)
			}
			distinct := []int{1, 3, 50, 1000}[rng.IntN(4)]
			for i := range n {
				x := rng.IntN(distinct)
				str := stems[x%len(stems)] + string(rune('a'+x%26))
				if x%3 == 0 {
					str = stems[x%len(stems)]
				}
				v.strs = append(v.strs, str)
				if v.nulls != nil {
					v.nulls[i] = rng.IntN(6) == 0
				}
			}
			keys[k] = sortedKey{v: v, desc: rng.IntN(2) == 0, nullsFirst: rng.IntN(2) == 0}
		}
		got := s.sortPerm(keys, n, nil)
		if got == nil {
			got = make([]int32, n)
			for i := range got {
				got[i] = int32(i)
			}
		}
		if want := stablePerm(keys, n); !slices.Equal(got, want) {
			t.Fatalf("iteration %d (n=%d, keys=%d): permutation differs from a stable comparison sort", it, n, nk)
		}
	}
}

// stablePerm is the permutation a stable comparison sort of rows
// 0..n-1 by keys gives: what every radix path must give.
func stablePerm(keys []sortedKey, n int) []int32 {
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(a, b int32) int { return compareRows(keys, int(a), int(b)) })
	return perm
}

func BenchmarkRadix1M(b *testing.B) {
	n := 1 << 20
	rng := rand.New(rand.NewPCG(1, 1))
	v := &vector{kind: kindInt, ints: make([]int64, n)}
	for i := range v.ints {
		v.ints[i] = int64(i)
	}
	rng.Shuffle(n, func(i, j int) { v.ints[i], v.ints[j] = v.ints[j], v.ints[i] })
	var s sorter
	perm := make([]int32, n)
	cpu0 := cputime.Process()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		perm = s.sortPerm([]sortedKey{{v: v}}, n, perm)
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
}

// TestSortPermComposite checks the one-pass sort of several keys packed
// in a word over enough rows for the two-digit packed radix sort.
func TestSortPermComposite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := 1 << 17
	g := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
	x := &vector{kind: kindFloat, typ: arrow.PrimitiveTypes.Float64}
	for i := 0; i < n; i++ {
		g.ints = append(g.ints, rng.Int64N(1000)-500)
		x.floats = append(x.floats, float64(rng.IntN(n/4)))
	}
	for _, desc := range []bool{false, true} {
		keys := []sortedKey{{v: g}, {v: x, desc: desc}}
		var s sorter
		got := s.sortPerm(keys, n, nil)
		want := stablePerm(keys, n)
		if !slices.Equal(got, want) {
			t.Fatalf("desc=%v: permutation differs from a stable comparison sort", desc)
		}
		for i, u := range s.sorted {
			if int64(u^1<<63) != g.ints[got[i]] {
				t.Fatalf("desc=%v: sorted first key at %d is %d, want %d", desc, i, int64(u^1<<63), g.ints[got[i]])
			}
		}
	}
}

// TestSortPermWide checks the packed radix sort of keys of more than two
// digits over enough rows for the high digit to be sorted first (MSD).
func TestSortPermWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := 1 << 17
	for _, spread := range []int64{1 << 14, 1 << 36, 1 << 43} {
		v := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
		for i := 0; i < n; i++ {
			v.ints = append(v.ints, rng.Int64N(spread)*1000+1_700_000_000_000_000)
		}
		for _, desc := range []bool{false, true} {
			keys := []sortedKey{{v: v, desc: desc}}
			var s sorter
			got := s.sortPerm(keys, n, nil)
			want := stablePerm(keys, n)
			if !slices.Equal(got, want) {
				t.Fatalf("spread %d, desc=%v: permutation differs from a stable comparison sort", spread, desc)
			}
		}
	}
}

// BenchmarkSortComposite sorts 4Mi rows on (g, x) as rownum_rank does
// (1000 groups, x a permutation) and on (g, t) as lag_lead does (t
// distinct timestamps in whole seconds, in microseconds).
func BenchmarkSortComposite(b *testing.B) {
	const n = 1 << 22
	_, cases := suiteSortKeys(n)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var s sorter
			perm := make([]int32, n)
			for b.Loop() {
				perm = s.sortPerm(c.keys, n, perm)
			}
		})
	}
}

// BenchmarkSortPacked runs the packed sort of the suite's window groups
// over a million rows: (g, x), g one of 1000 groups and x a permutation,
// and (g, t), t distinct timestamps a second apart; on one thread and
// two. Its buckets hold about 500 rows each.
func BenchmarkSortPacked(b *testing.B) {
	const n = 1 << 20
	g, cases := suiteSortKeys(n)
	for _, c := range cases {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", c.name, threads), func(b *testing.B) {
				gk := &groupKeys{keys: c.keys, part: []*vector{g}}
				ev := &evaluation{o: Options{Threads: threads}, budget: newTestBudget()}
				for b.Loop() {
					if _, _, ok := ev.sortPacked(gk, n, threads); !ok {
						b.Fatal("the keys did not pack")
					}
				}
			})
		}
	}
}

// suiteSortKeys returns n rows of the window suite's sort keys: g, one
// of 1000 groups, and the cases (g, x), x a permutation, and (g, t), t
// distinct timestamps a second apart in microseconds.
func suiteSortKeys(n int) (*vector, []struct {
	name string
	keys []sortedKey
}) {
	rng := rand.New(rand.NewPCG(1, 1))
	g := &vector{kind: kindInt, ints: make([]int64, n)}
	x := &vector{kind: kindInt, ints: make([]int64, n)}
	t := &vector{kind: kindInt, ints: make([]int64, n)}
	for i, p := range rng.Perm(n) {
		g.ints[i] = rng.Int64N(1000)
		x.ints[i] = int64(p)
		t.ints[i] = 1_700_000_000_000_000 + int64(p)*1_000_000
	}
	return g, []struct {
		name string
		keys []sortedKey
	}{{"g,x", []sortedKey{{v: g}, {v: x}}}, {"g,t", []sortedKey{{v: g}, {v: t}}}}
}

// BenchmarkSortStrings sorts 1Mi rows on one string key, the labels of
// the suite's s column (NULLs, the empty string, a skewed vocabulary,
// long labels), as the sorted runs of a string PARTITION BY do.
func BenchmarkSortStrings(b *testing.B) {
	const n = 1 << 20
	s, nulls := columnar.GenLabels(n, rand.New(rand.NewPCG(1, 2)))
	v := &vector{kind: kindString, strs: s, nulls: nulls}
	keys := []sortedKey{{v: v}}
	var so sorter
	perm := make([]int32, n)
	for b.Loop() {
		perm = so.sortPerm(keys, n, perm)
	}
}

// BenchmarkSortOneKey sorts a million rows on the window suite's t
// alone, distinct timestamps a second apart (ORDER BY t over one
// partition): on one thread with a sorter of its own, as a query's, and
// on two with parallelSortKey, whose runs are radix-sorted and then
// merged.
func BenchmarkSortOneKey(b *testing.B) {
	const n = 1 << 20
	_, cases := suiteSortKeys(n)
	key := cases[1].keys[1]
	b.Run("threads=1", func(b *testing.B) {
		for b.Loop() {
			var s sorter
			s.sortPerm([]sortedKey{key}, n, nil)
		}
	})
	b.Run("threads=2", func(b *testing.B) {
		ev := &evaluation{o: Options{Threads: 2}, budget: newTestBudget()}
		for b.Loop() {
			if _, _, ok := ev.parallelSortKey(key, n, 2); !ok {
				b.Fatal("refused")
			}
		}
	})
}
