package windower

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower/sqlparse"
)

func TestPartitionIDs(t *testing.T) {
	ints := func(xs []int64, nulls []bool) *vector { return &vector{kind: kindInt, ints: xs, nulls: nulls} }
	nan := math.NaN()
	cases := []struct {
		name  string
		keys  []*vector
		want  []int32
		dense bool
	}{
		{"dense", []*vector{ints([]int64{5, 3, 5, 4, 3}, nil)}, []int32{0, 1, 0, 2, 1}, true},
		{"dense with NULLs", []*vector{ints([]int64{5, 0, 5, 0}, []bool{false, true, false, true})}, []int32{0, 1, 0, 1}, true},
		{"all NULL", []*vector{ints([]int64{0, 0}, []bool{true, true})}, []int32{0, 0}, true},
		{"wide range hashed", []*vector{ints(repeat([]int64{math.MinInt64, math.MaxInt64, 7, math.MaxInt64}, 8), nil)},
			repeat([]int32{0, 1, 2, 1}, 8), false},
		{"wide range hashed with NULLs", []*vector{ints(repeat([]int64{0, 0, 1 << 50, 0}, 8), repeat([]bool{false, true, false, true}, 8))},
			repeat([]int32{0, 1, 2, 1}, 8), false},
		{"floats", []*vector{{kind: kindFloat, floats: repeat([]float64{0, math.Copysign(0, -1), nan, 1.5, nan, 2}, 8),
			nulls: repeat([]bool{false, false, false, false, false, true}, 8)}},
			repeat([]int32{0, 0, 1, 2, 1, 3}, 8), false},
		{"strings", []*vector{{kind: kindString, strs: []string{"b", "a", "", "b", ""}, nulls: []bool{false, false, true, false, false}}},
			[]int32{0, 1, 2, 0, 3}, false},
		{"strings without NULLs", []*vector{{kind: kindString, strs: repeat([]string{"b", "a", "", "b", "ab"}, 8)}},
			repeat([]int32{0, 1, 2, 0, 3}, 8), false},
		{"two columns", []*vector{ints([]int64{1, 1, 2, 1}, nil), {kind: kindString, strs: []string{"x", "y", "x", "x"}}},
			[]int32{0, 1, 2, 0}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt := newPartitioner()
			n := len(c.want)
			if pt.prepare(c.keys, nil, n, 1) <= 0 {
				t.Errorf("prepare counts no memory")
			}
			if pt.isDense != c.dense {
				t.Errorf("dense table: %v, want %v", pt.isDense, c.dense)
			}
			ids, parts, ok, err := pt.partitionIDs(c.keys, n, noReserve)
			if err != nil || !ok {
				t.Fatalf("gave up on %d rows", n)
			}
			wantParts := 0
			for i, w := range c.want {
				wantParts = max(wantParts, int(w)+1)
				if ids[i] != w {
					t.Fatalf("row %d: partition %d, want %d (all %v)", i, ids[i], w, ids)
				}
			}
			if parts != wantParts {
				t.Errorf("%d partitions, want %d", parts, wantParts)
			}
		})
	}
}

func noReserve(int64) error { return nil }

// TestPartitionIDsParallel numbers many partitions of string, integer and
// two-column keys, with NULLs, on one to four tables: every count of
// tables must put the same rows together, through the tables' growth.
func TestPartitionIDsParallel(t *testing.T) {
	defer func(old int) { parallelMinRows = old }(parallelMinRows)
	parallelMinRows = 16
	const n = 50_000
	r := rand.New(rand.NewPCG(7, 8))
	strs := &vector{kind: kindString, strs: make([]string, n), nulls: make([]bool, n)}
	wide := &vector{kind: kindInt, ints: make([]int64, n)}
	for i := range n {
		switch u := r.IntN(100); {
		case u < 5:
			strs.nulls[i] = true
		case u < 60:
			strs.strs[i] = strings.Repeat("k", r.IntN(40)) + strconv.Itoa(r.IntN(3000))
		default:
			strs.strs[i] = strconv.Itoa(r.IntN(n))
		}
		wide.ints[i] = int64(r.IntN(4000)) << 40 // under the give-up limit, over a table's first size
	}
	for _, c := range []struct {
		name string
		keys []*vector
	}{{"string", []*vector{strs}}, {"wide integer", []*vector{wide}}, {"two columns", []*vector{wide, strs}}} {
		t.Run(c.name, func(t *testing.T) {
			var want []int32
			for threads := 1; threads <= 4; threads++ {
				pt := newPartitioner()
				pt.prepare(c.keys, nil, n, threads)
				var reserved atomic.Int64
				ids, parts, ok, err := pt.partitionIDs(c.keys, n, func(b int64) error { reserved.Add(b); return nil })
				if err != nil || !ok {
					t.Fatalf("threads %d: ok %v, %v", threads, ok, err)
				}
				if reserved.Load() == 0 {
					t.Errorf("threads %d: the tables grew without reserving", threads)
				}
				if threads == 1 {
					want = slices.Clone(ids)
					continue
				}
				// The same rows together: a bijection between the ids.
				fwd, back := map[int32]int32{}, map[int32]int32{}
				for i, id := range ids {
					if id < 0 || int(id) >= parts {
						t.Fatalf("threads %d: row %d in partition %d of %d", threads, i, id, parts)
					}
					if w, seen := fwd[id]; seen && w != want[i] {
						t.Fatalf("threads %d: row %d apart from the rows it was with on one thread", threads, i)
					}
					if g, seen := back[want[i]]; seen && g != id {
						t.Fatalf("threads %d: row %d with rows it was apart from on one thread", threads, i)
					}
					fwd[id], back[want[i]] = want[i], id
				}
				if len(fwd) != parts {
					t.Errorf("threads %d: %d partitions, %d used", threads, parts, len(fwd))
				}
			}
		})
	}
}

// A hash table that cannot reserve its growth fails the numbering.
func TestPartitionIDsGrowthReserved(t *testing.T) {
	const n = 10_000
	strs := &vector{kind: kindString, strs: make([]string, n)}
	for i := range strs.strs {
		strs.strs[i] = strconv.Itoa(i)
	}
	keys := []*vector{strs}
	pt := newPartitioner()
	pt.prepare(keys, nil, n, 1)
	full := errors.New("grant exceeded")
	_, _, _, err := pt.partitionIDs(keys, n, func(int64) error { return full })
	if !errors.Is(err, full) {
		t.Fatalf("growth beyond the grant: %v, want %v", err, full)
	}
}

// BenchmarkPartitionIDsStrings numbers the suite's string column s on one
// and two tables: a million rows (about 178k partitions, a table in the
// caches), and ten million generated a block at a time as the spill
// suite's are (about 1.8M partitions, a table of 32MiB that misses them).
func BenchmarkPartitionIDsStrings(b *testing.B) {
	for _, size := range []struct {
		name       string
		rows, each int // rows, generated each rows at a time
	}{{"rows=1Mi", 1 << 20, 1 << 20}, {"rows=10Mi", 10 << 20, 64 << 10}} {
		r := rand.New(rand.NewPCG(1, 2))
		var s []string
		var null []bool
		for len(s) < size.rows {
			more, moreNull := columnar.GenLabels(size.each, r)
			s, null = append(s, more...), append(null, moreNull...)
		}
		// Back to back in one buffer, as a column loaded from a container
		// holds them: a repeated label is not the same string twice, and
		// comparing it reads its bytes.
		all, at := strings.Join(s, ""), 0
		for i, x := range s {
			s[i], at = all[at:at+len(x)], at+len(x)
		}
		keys := []*vector{{kind: kindString, strs: s, nulls: null}}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", size.name, threads), func(b *testing.B) {
				pt := newPartitioner()
				for b.Loop() {
					pt.prepare(keys, nil, size.rows, threads)
					if _, _, ok, err := pt.partitionIDs(keys, size.rows, noReserve); err != nil || !ok {
						b.Fatal(ok, err)
					}
				}
			})
		}
	}
}

func repeat[T any](xs []T, times int) []T {
	var out []T
	for range times {
		out = append(out, xs...)
	}
	return out
}

// Hashed numeric keys with more than one partition per hashGiveUp rows
// are left to the sort.
func TestPartitionIDsGiveUp(t *testing.T) {
	const n = 64
	xs := make([]int64, n)
	for i := range xs {
		xs[i] = int64(i) << 40 // too wide for the dense table
	}
	pt := newPartitioner()
	keys := []*vector{{kind: kindInt, ints: xs}}
	pt.prepare(keys, nil, n, 1)
	if _, _, ok, _ := pt.partitionIDs(keys, n, noReserve); ok {
		t.Errorf("%d distinct wide integer keys in %d rows were hashed", n, n)
	}
	strs := &vector{kind: kindString, strs: make([]string, n)}
	for i := range strs.strs {
		strs.strs[i] = string(rune('A' + i))
	}
	keys = []*vector{{kind: kindInt, ints: xs}, strs}
	pt.prepare(keys, nil, n, 1)
	if _, parts, ok, _ := pt.partitionIDs(keys, n, noReserve); !ok || parts != n {
		t.Errorf("string keys: %d partitions, ok %v; want %d, true", parts, ok, n)
	}
}

// The tables give up on numeric keys with more partitions than the limit,
// and on no fewer, on any count of tables: they share their count a batch
// of partitions at a time, and the total decides.
func TestPartitionIDsGiveUpExact(t *testing.T) {
	defer func(old int) { parallelMinRows = old }(parallelMinRows)
	parallelMinRows = 16
	const n = 5 * countEvery * hashGiveUp
	limit := n / hashGiveUp
	for _, distinct := range []int{limit - 1, limit, limit + 1, 2 * limit} {
		xs := make([]int64, n)
		for i := range xs {
			xs[i] = int64(i%distinct) << 40
		}
		keys := []*vector{{kind: kindInt, ints: xs}}
		for threads := 1; threads <= 4; threads++ {
			pt := newPartitioner()
			pt.prepare(keys, nil, n, threads)
			_, parts, ok, err := pt.partitionIDs(keys, n, noReserve)
			if err != nil {
				t.Fatal(err)
			}
			if want := distinct <= limit; ok != want || ok && parts != distinct {
				t.Errorf("%d distinct keys on %d tables (limit %d): hashed %v with %d partitions, want %v", distinct, threads, limit, ok, parts, want)
			}
		}
	}
}

// TestUnsortedGroupInputOrder checks that whole-partition aggregates
// without ORDER BY come out in input order, and that float sums equal
// those of the sorted path bit for bit.
func TestUnsortedGroupInputOrder(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "g", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 5000
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if rng.IntN(20) == 0 {
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
		} else {
			g := rng.Int64N(50)
			b.Field(1).(*array.Int64Builder).Append(g)
			b.Field(2).(*array.StringBuilder).Append(string(rune('a' + g%7)))
		}
		// Magnitudes far apart, so the order of addition shows in the sum.
		b.Field(3).(*array.Float64Builder).Append(math.Ldexp(rng.Float64(), rng.IntN(80)-40))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for _, part := range []string{"g", "s", "g, s", "g % 7"} {
		// The sorted group comes first: the result is in the last group's order.
		q, err := sqlparse.Parse("SELECT id, sum(f) OVER (PARTITION BY " + part + " ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS sorted, " +
			"count(*) OVER (PARTITION BY " + part + ") AS c, sum(f) OVER (PARTITION BY " + part + ") AS u, " +
			"max(f) FILTER (WHERE g > 10) OVER (PARTITION BY " + part + ") AS m FROM t")
		if err != nil {
			t.Fatal(err)
		}
		res, err := RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{})
		if err != nil {
			t.Fatalf("partition by %s: %v", part, err)
		}
		next := int64(0)
		for {
			out, err := res.Next()
			if err != nil {
				break
			}
			ids := out.Column(0).(*array.Int64)
			cnt := out.Column(2).(*array.Int64)
			u, sorted := out.Column(3).(*array.Float64), out.Column(1).(*array.Float64)
			for r := 0; r < int(out.NumRows()); r++ {
				if ids.Value(r) != next {
					t.Fatalf("partition by %s: row %d has id %d, want input order", part, next, ids.Value(r))
				}
				if cnt.Value(r) <= 0 {
					t.Fatalf("partition by %s: row %d: count %d", part, next, cnt.Value(r))
				}
				if math.Float64bits(u.Value(r)) != math.Float64bits(sorted.Value(r)) {
					t.Fatalf("partition by %s: row %d: sum %v, sorted path %v", part, next, u.Value(r), sorted.Value(r))
				}
				next++
			}
			out.Release()
		}
		if next != n {
			t.Errorf("partition by %s: %d rows, want %d", part, next, n)
		}
		if st := res.Stats(); st.Partitions < 2 {
			t.Errorf("partition by %s: %d partitions", part, st.Partitions)
		}
		res.Close()
	}
}

// countKeys counts as a loop of increments does, with its sets of
// counters (keys in runs, few of them, many rows) and without, whatever
// the rows' count modulo the sets.
// TestIntBounds checks the four-chain scan for a key's range against a
// plain one, over every length up to 40 (the chains and the tail).
func TestIntBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 41 {
		xs := make([]int64, n)
		for i := range xs {
			xs[i] = rng.Int64() >> rng.IntN(64)
			if rng.IntN(2) == 0 {
				xs[i] = -xs[i]
			}
		}
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for _, x := range xs {
			lo, hi = min(lo, x), max(hi, x)
		}
		if gotLo, gotHi := intBounds(xs); gotLo != lo || gotHi != hi {
			t.Errorf("%d values: bounds %d, %d, want %d, %d", n, gotLo, gotHi, lo, hi)
		}
	}
}

func TestCountKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, span := range []int{1, 2, 7, 1000, countLanesSpan, countLanesSpan + 1} {
		for _, n := range []int{0, 3, 4*countLanes*span - 1, 4*countLanes*span + 3, 4*countLanes*span + 6, 100_003, 100_004} {
			lo := int64(rng.IntN(1000)) - 500
			xs := make([]int64, n)
			want := make([]int64, span)
			runs := n%2 == 1 // half the rows the key of the row before: countKeys's sets of counters
			k := 0
			for i := range xs {
				if !runs || rng.IntN(2) == 0 {
					k = rng.IntN(span)
				}
				xs[i] = lo + int64(k)
				want[k]++
			}
			got := make([]int64, span)
			countKeys(xs, lo, got)
			if !slices.Equal(got, want) {
				t.Fatalf("span %d, %d rows: counts differ", span, n)
			}
		}
	}
}

// BenchmarkCountKeys counts a million keys in random order over one,
// sixteen, a thousand and a hundred thousand partitions, with countKeys
// and with the plain loop of increments it replaces.
func BenchmarkCountKeys(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(7, 8))
	for _, span := range []int{1, 16, 1000, 100_000} {
		xs := make([]int32, n)
		for i := range xs {
			xs[i] = int32(rng.IntN(span))
		}
		c := make([]int64, span)
		b.Run(fmt.Sprintf("span=%d/countKeys", span), func(b *testing.B) {
			for b.Loop() {
				clear(c)
				countKeys(xs, 0, c)
			}
		})
		b.Run(fmt.Sprintf("span=%d/plain", span), func(b *testing.B) {
			for b.Loop() {
				clear(c)
				for _, x := range xs {
					c[x]++
				}
			}
		})
	}
}

// BenchmarkIntBounds finds the range of a million keys, as denseRange
// does before numbering an integer PARTITION BY key: constant (one
// partition), a thousand values, and a permutation.
func BenchmarkIntBounds(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(9, 10))
	for _, span := range []int64{1, 1000, n} {
		xs := make([]int64, n)
		for i := range xs {
			xs[i] = rng.Int64N(span)
		}
		b.Run(fmt.Sprintf("span=%d", span), func(b *testing.B) {
			var sink int64
			for b.Loop() {
				lo, hi := intBounds(xs)
				sink += hi - lo
			}
			if sink < 0 {
				b.Fatal(sink)
			}
		})
	}
}

// Counts over a dense key: one key without NULLs (every row's count is
// the rows'), one key and NULLs, a few keys, remainders by a constant
// (whose table is sized from the divisor, not from a pass over the rows;
// negative, NULL, by 1 and by a negative divisor), on one to three
// threads and over one block and several, each row's count against the
// rows that share its key.
func TestDenseCounts(t *testing.T) {
	defer func(old int) { parallelMinRows = old }(parallelMinRows)
	parallelMinRows = 64
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "c", Type: arrow.PrimitiveTypes.Int64},
		{Name: "cn", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "g", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 5, 1000} {
		var recs []arrow.RecordBatch
		const null = math.MinInt64
		var keys [8][]int64 // c, cn, g, then the remainders below, by row
		exprs := []string{"c", "cn", "g", "x % 7", "(x - 500) % 7", "cn % 5", "x % 1", "x % -3"}
		b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
		for i := range n {
			cn := int64(null)
			if rng.IntN(3) > 0 {
				cn = 7
			}
			g := int64(rng.IntN(4))
			x := int64(i)
			cn5 := int64(null)
			if cn != null {
				cn5 = cn % 5
			}
			for k, v := range []int64{7, cn, g, x % 7, (x - 500) % 7, cn5, 0, x % -3} {
				keys[k] = append(keys[k], v)
			}
			b.Field(0).(*array.Int64Builder).Append(7)
			if cn == null {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Int64Builder).Append(cn)
			}
			b.Field(2).(*array.Int64Builder).Append(g)
			b.Field(3).(*array.Int64Builder).Append(int64(i))
			if (i+1)%300 == 0 || i == n-1 {
				recs = append(recs, b.NewRecordBatch())
			}
		}
		b.Release()
		for k, col := range exprs {
			want := map[int64]int64{}
			for _, x := range keys[k] {
				want[x]++
			}
			q, err := sqlparse.Parse("SELECT count(*) OVER (PARTITION BY " + col + ") AS a, count(x) OVER (PARTITION BY " + col + ") AS b FROM t")
			if err != nil {
				t.Fatal(err)
			}
			for threads := 1; threads <= 3; threads++ {
				res, err := RunRecords(context.Background(), q, schema, recs, Options{Threads: threads})
				if err != nil {
					t.Fatalf("%d rows by %s: %v", n, col, err)
				}
				row := 0
				for {
					out, err := res.Next()
					if err != nil {
						break
					}
					a, c := out.Column(0).(*array.Int64), out.Column(1).(*array.Int64)
					for r := range int(out.NumRows()) {
						w := want[keys[k][row]]
						if a.Value(r) != w || c.Value(r) != w {
							t.Fatalf("%d rows by %s on %d threads: row %d counts %d and %d, want %d", n, col, threads, row, a.Value(r), c.Value(r), w)
						}
						row++
					}
					out.Release()
				}
				res.Close()
				if row != n {
					t.Fatalf("%d rows by %s: %d rows out", n, col, row)
				}
			}
		}
		for _, r := range recs {
			r.Release()
		}
	}
}
