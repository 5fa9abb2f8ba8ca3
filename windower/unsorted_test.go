package windower

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
		{"floats", []*vector{{kind: kindFloat, floats: repeat([]float64{0, math.Copysign(0, -1), nan, 1.5, nan, 2}, 8),
			nulls: repeat([]bool{false, false, false, false, false, true}, 8)}},
			repeat([]int32{0, 0, 1, 2, 1, 3}, 8), false},
		{"strings", []*vector{{kind: kindString, strs: []string{"b", "a", "", "b", ""}, nulls: []bool{false, false, true, false, false}}},
			[]int32{0, 1, 2, 0, 3}, false},
		{"two columns", []*vector{ints([]int64{1, 1, 2, 1}, nil), {kind: kindString, strs: []string{"x", "y", "x", "x"}}},
			[]int32{0, 1, 2, 0}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt := newPartitioner()
			n := len(c.want)
			if pt.prepare(c.keys, n) <= 0 {
				t.Errorf("prepare counts no memory")
			}
			if pt.isDense != c.dense {
				t.Errorf("dense table: %v, want %v", pt.isDense, c.dense)
			}
			ids, parts, ok := pt.partitionIDs(c.keys, n)
			if !ok {
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
	pt.prepare(keys, n)
	if _, _, ok := pt.partitionIDs(keys, n); ok {
		t.Errorf("%d distinct wide integer keys in %d rows were hashed", n, n)
	}
	strs := &vector{kind: kindString, strs: make([]string, n)}
	for i := range strs.strs {
		strs.strs[i] = string(rune('A' + i))
	}
	keys = []*vector{{kind: kindInt, ints: xs}, strs}
	pt.prepare(keys, n)
	if _, parts, ok := pt.partitionIDs(keys, n); !ok || parts != n {
		t.Errorf("string keys: %d partitions, ok %v; want %d, true", parts, ok, n)
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
