package windower

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// The differential tests run every query with each of threadCounts and
// check that the runs agree row for row, in order; parallelSmall makes
// their small inputs take the parallel paths.
var threadCounts = []int{1, 4}

// parallelSmall lowers parallelMinRows for the duration of the test.
func parallelSmall(t *testing.T) {
	old := parallelMinRows
	parallelMinRows = 2
	t.Cleanup(func() { parallelMinRows = old })
}

// runThreads runs run with opts and each of threadCounts, checks every
// run returns the rows of the first in the same order within its grant,
// and returns the first run's rows and stats.
func runThreads(t *testing.T, opts Options, run func(Options) (*Result, error)) ([]string, Stats) {
	t.Helper()
	var first []string
	var firstStats Stats
	for i, threads := range threadCounts {
		o := opts
		o.Threads = threads
		res, err := run(o)
		if err != nil {
			t.Fatalf("threads %d: %v", threads, err)
		}
		rows := drain(t, res)
		st := res.Stats()
		res.Close()
		if o.Grant > 0 && st.PeakBytes > o.Grant {
			t.Errorf("threads %d: peak %d bytes over the %d-byte grant", threads, st.PeakBytes, o.Grant)
		}
		if i == 0 {
			first, firstStats = rows, st
			continue
		}
		if len(rows) != len(first) {
			t.Fatalf("threads %d: %d rows, threads %d: %d", threads, len(rows), threadCounts[0], len(first))
		}
		for r := range rows {
			if rows[r] != first[r] {
				t.Fatalf("threads %d: row %d: %s, threads %d: %s", threads, r, rows[r], threadCounts[0], first[r])
			}
		}
		if st.Partitions != firstStats.Partitions || st.Rows != firstStats.Rows {
			t.Errorf("threads %d: %+v, threads %d: %+v", threads, st, threadCounts[0], firstStats)
		}
	}
	return first, firstStats
}

// TestParallelSortPerm checks the hash-partitioned parallel sort against
// the single-thread sort: the same permutation, for keys with few and
// many partitions, NULLs, -0 and NaN, strings and several keys.
func TestParallelSortPerm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 300; it++ {
		n := 2 + rng.IntN(3000)
		distinct := 1 + rng.IntN(n)
		part := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64, ints: make([]int64, n)}
		fl := &vector{kind: kindFloat, typ: arrow.PrimitiveTypes.Float64, floats: make([]float64, n)}
		str := &vector{kind: kindString, typ: arrow.BinaryTypes.String, strs: make([]string, n)}
		order := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64, ints: make([]int64, n), nulls: make([]bool, n)}
		specials := []float64{0, negZero(), nan(), 1.5, -2}
		for i := 0; i < n; i++ {
			part.ints[i] = int64(rng.IntN(distinct))
			fl.floats[i] = specials[rng.IntN(len(specials))]
			str.strs[i] = string(rune('a' + rng.IntN(5)))
			order.ints[i] = int64(rng.IntN(10))
			order.nulls[i] = rng.IntN(7) == 0
		}
		if rng.IntN(2) == 0 {
			part.nulls = make([]bool, n)
			for i := range part.nulls {
				part.nulls[i] = rng.IntN(9) == 0
			}
		}
		var partKeys []*vector
		switch it % 4 {
		case 0:
			partKeys = []*vector{part}
		case 1:
			partKeys = []*vector{fl}
		case 2:
			partKeys = []*vector{str, part}
		case 3:
			partKeys = []*vector{part, fl}
		}
		gk := &groupKeys{part: partKeys}
		for _, v := range partKeys {
			gk.keys = append(gk.keys, sortedKey{v: v})
		}
		gk.keys = append(gk.keys, sortedKey{v: order, desc: rng.IntN(2) == 0, nullsFirst: rng.IntN(2) == 0})
		gk.order = []*vector{order}
		var s sorter
		want := s.sortPerm(gk.keys, n, nil)
		ev := &evaluation{o: Options{Threads: 1 + rng.IntN(6)}, budget: newTestBudget()}
		got, firstSorted, partStarts, ok := ev.parallelSortPerm(gk, n, ev.o.Threads)
		if !ok {
			t.Fatalf("iteration %d: refused", it)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (n %d, %d distinct, %d threads): permutations differ", it, n, distinct, ev.o.Threads)
		}
		if firstSorted != nil {
			if want == nil {
				t.Fatalf("iteration %d: first key of rows in order", it)
			}
			first := gk.keys[0].v
			for i, p := range want {
				if firstSorted.ints[i] != first.ints[p] {
					t.Fatalf("iteration %d: sorted first key %d at row %d, want %d", it, firstSorted.ints[i], i, first.ints[p])
				}
			}
		} else if want != nil && partStarts == nil && gk.keys[0].v.kind == kindInt && gk.keys[0].v.nulls == nil {
			t.Fatalf("iteration %d: no sorted first key", it)
		}
		if partStarts != nil {
			if wantStarts := partitionStarts(partKeys, want); !slices.Equal(partStarts, wantStarts) {
				t.Fatalf("iteration %d: partition starts %v, want %v", it, partStarts, wantStarts)
			}
		}
		if ev.budget.InUse() != 0 {
			t.Fatalf("iteration %d: %d bytes still reserved", it, ev.budget.InUse())
		}
	}
}

// TestParallelSmallGrant checks that a grant too small for the parallel
// sort's buffers falls back to one thread with the same result.
func TestParallelSmallGrant(t *testing.T) {
	parallelSmall(t)
	rng := rand.New(rand.NewPCG(7, 8))
	_, rec := randomTable(rng, 150)
	defer rec.Release()
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")},
		{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", PartitionBy: []messages.Expr{{Column: "g"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "x"}}}}}}}
	runThreads(t, Options{}, func(o Options) (*Result, error) {
		return RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, o)
	})
	ev := &evaluation{o: Options{Threads: 4}, budget: newTestBudgetOf(64)}
	v := &vector{kind: kindInt, ints: []int64{3, 1, 2, 1, 3}}
	if _, _, _, ok := ev.parallelSortPerm(&groupKeys{keys: []sortedKey{{v: v}}, part: []*vector{v}}, 5, 4); ok {
		t.Fatal("a 64-byte budget held the parallel sort's buffers")
	}
}

func negZero() float64 { return math.Copysign(0, -1) }
func nan() float64     { return math.NaN() }

func newTestBudget() *columnar.Budget          { return columnar.NewBudget(1<<30, nil) }
func newTestBudgetOf(n int64) *columnar.Budget { return columnar.NewBudget(n, nil) }

// TestParallelSortKey checks the range-parallel sort of one key against
// the single-thread sort: the same permutation and sorted values.
func TestParallelSortKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for it := 0; it < 300; it++ {
		n := 2 + rng.IntN(5000)
		distinct := 1 + rng.IntN(n)
		v := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64, ints: make([]int64, n)}
		// Narrow keys pack with their positions into words sorted in two
		// passes or fewer; keys of 30 bits take three passes, whose result
		// ends in the sorter's second buffer; keys of 64 bits do not pack.
		pool := make([]int64, distinct)
		for i := range pool {
			switch it % 3 {
			case 0:
				pool[i] = int64(i) - int64(distinct/2)
			case 1:
				pool[i] = rng.Int64N(1 << 30)
			case 2:
				pool[i] = int64(rng.Uint64())
			}
		}
		for i := range v.ints {
			v.ints[i] = pool[rng.IntN(distinct)]
		}
		if it%10 == 0 {
			slices.Sort(v.ints) // in order: no permutation
		}
		key := sortedKey{v: v, desc: rng.IntN(2) == 0}
		var s sorter
		want := s.sortPerm([]sortedKey{key}, n, nil)
		threads := 2 + rng.IntN(7)
		ev := &evaluation{o: Options{Threads: threads}, budget: newTestBudget()}
		got, sv, ok := ev.parallelSortKey(key, n, threads)
		if !ok {
			t.Fatalf("iteration %d: refused", it)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (n %d, %d distinct, %d threads, desc %v): permutations differ", it, n, distinct, threads, key.desc)
		}
		for i, p := range want {
			if sv.ints[i] != v.ints[p] {
				t.Fatalf("iteration %d: sorted value %d at row %d, want %d", it, sv.ints[i], i, v.ints[p])
			}
		}
		if ev.budget.InUse() != 0 {
			t.Fatalf("iteration %d: %d bytes still reserved", it, ev.budget.InUse())
		}
	}
}

// TestParallelSortRuns checks the range-parallel sort and merge of keys
// of any types against the single-thread sort: the same permutation, for
// NULLs first and last, DESC, -0 and NaN, strings and several keys.
func TestParallelSortRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for it := 0; it < 300; it++ {
		n := 2 + rng.IntN(4000)
		distinct := 1 + rng.IntN(n)
		in := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64, ints: make([]int64, n), nulls: make([]bool, n)}
		fl := &vector{kind: kindFloat, typ: arrow.PrimitiveTypes.Float64, floats: make([]float64, n)}
		str := &vector{kind: kindString, typ: arrow.BinaryTypes.String, strs: make([]string, n), nulls: make([]bool, n)}
		specials := []float64{0, negZero(), nan(), 1.5, -2, math.Inf(1)}
		for i := 0; i < n; i++ {
			in.ints[i] = int64(rng.IntN(distinct)) - int64(distinct/3)
			in.nulls[i] = rng.IntN(8) == 0
			fl.floats[i] = specials[rng.IntN(len(specials))]
			str.strs[i] = string(rune('a'+rng.IntN(4))) + string(rune('a'+rng.IntN(distinct%7+1)))
			str.nulls[i] = rng.IntN(9) == 0
		}
		if it%3 == 0 {
			in.nulls = nil
		}
		var vs []*vector
		switch it % 5 {
		case 0:
			vs = []*vector{str}
		case 1:
			vs = []*vector{fl}
		case 2:
			vs = []*vector{in, str}
		case 3:
			vs = []*vector{str, fl, in}
		case 4:
			vs = []*vector{in}
		}
		var keys []sortedKey
		for _, v := range vs {
			keys = append(keys, sortedKey{v: v, desc: rng.IntN(2) == 0, nullsFirst: rng.IntN(2) == 0})
		}
		var s sorter
		want := s.sortPerm(keys, n, nil)
		threads := 2 + rng.IntN(7)
		ev := &evaluation{o: Options{Threads: threads}, budget: newTestBudget()}
		got, ok := ev.parallelSortRuns(keys, n, threads)
		if !ok {
			t.Fatalf("iteration %d: refused", it)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (n %d, %d distinct, %d threads): permutations differ", it, n, distinct, threads)
		}
		if ev.budget.InUse() != 0 {
			t.Fatalf("iteration %d: %d bytes still reserved", it, ev.budget.InUse())
		}
	}
	ev := &evaluation{o: Options{Threads: 4}, budget: newTestBudgetOf(64)}
	v := &vector{kind: kindString, strs: []string{"c", "a", "b", "a", "c"}}
	if _, ok := ev.parallelSortRuns([]sortedKey{{v: v}}, 5, 4); ok {
		t.Fatal("a 64-byte budget held the parallel sort's buffers")
	}
}

// onePartitionCalls are window calls over one partition (or a dominant
// one) that the parallel paths cut into ranges of rows (RANGE offsets
// among them, when order is one key), and some that they evaluate by
// whole partitions (EXCLUDE, float sums over sliding frames).
func onePartitionCalls(order []messages.SortItem, part []messages.Expr) []*messages.WindowCall {
	rows := func(s, e string, so, eo int64) *messages.Frame {
		f := &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: s}, End: messages.FrameBound{Kind: e}}
		if s == messages.BoundPreceding || s == messages.BoundFollowing {
			f.Start.Offset = &messages.Value{Int: i64(so)}
		}
		if e == messages.BoundPreceding || e == messages.BoundFollowing {
			f.End.Offset = &messages.Value{Int: i64(eo)}
		}
		return f
	}
	const (
		up, pre, cur, fol, uf = messages.BoundUnboundedPreceding, messages.BoundPreceding, messages.BoundCurrentRow, messages.BoundFollowing, messages.BoundUnboundedFollowing
	)
	sliding := rows(pre, fol, 3, 2)
	running := rows(up, cur, 0, 0)
	whole := rows(up, uf, 0, 0)
	filter := []messages.Predicate{{Left: messages.Expr{Column: "x"}, Op: ">", Right: &messages.Value{Int: i64(2)}}}
	calls := []*messages.WindowCall{
		{Func: "row_number"}, {Func: "rank"}, {Func: "dense_rank"}, {Func: "percent_rank"}, {Func: "cume_dist"},
		{Func: "ntile", Args: []*messages.Expr{cint(7)}},
		{Func: "lag", Args: []*messages.Expr{col("x")}}, {Func: "lead", Args: []*messages.Expr{col("x"), cint(2), cint(99)}},
		{Func: "lag", Args: []*messages.Expr{col("s"), cint(3)}}, {Func: "lead", Args: []*messages.Expr{col("f"), cint(-1)}},
		{Func: "first_value", Args: []*messages.Expr{col("s")}, Frame: sliding},
		{Func: "last_value", Args: []*messages.Expr{col("f")}, Frame: rows(cur, fol, 0, 5)},
		{Func: "nth_value", Args: []*messages.Expr{col("x"), cint(2)}, Frame: running},
		{Func: "count", Star: true, Frame: sliding}, {Func: "count", Args: []*messages.Expr{col("x")}, Frame: rows(pre, pre, 4, 1)},
		{Func: "sum", Args: []*messages.Expr{col("x")}, Frame: sliding}, {Func: "avg", Args: []*messages.Expr{col("x")}, Frame: rows(pre, cur, 10, 0)},
		{Func: "min", Args: []*messages.Expr{col("x")}, Frame: sliding}, {Func: "max", Args: []*messages.Expr{col("s")}, Frame: rows(cur, fol, 0, 6)},
		{Func: "min", Args: []*messages.Expr{col("f")}, Frame: rows(pre, fol, 1, 1)},
		{Func: "count", Star: true, Frame: running}, {Func: "count", Args: []*messages.Expr{col("s")}, Frame: running},
		{Func: "sum", Args: []*messages.Expr{col("x")}, Frame: running}, {Func: "sum", Args: []*messages.Expr{col("x")}, Frame: running, Filter: filter},
		{Func: "sum", Args: []*messages.Expr{col("f")}, Frame: running}, {Func: "avg", Args: []*messages.Expr{col("f")}, Frame: rows(up, fol, 0, 3)},
		{Func: "avg", Args: []*messages.Expr{col("x")}, Frame: rows(up, pre, 0, 2)},
		{Func: "min", Args: []*messages.Expr{col("s")}, Frame: running}, {Func: "max", Args: []*messages.Expr{col("f")}, Frame: rows(up, fol, 0, 2)},
		{Func: "count", Star: true, Frame: whole},
		{Func: "sum", Args: []*messages.Expr{col("x")}, Frame: whole}, {Func: "min", Args: []*messages.Expr{col("s")}, Frame: whole},
		{Func: "count", Args: []*messages.Expr{col("f")}, Frame: whole, Filter: filter}, {Func: "sum", Args: []*messages.Expr{col("f")}, Frame: whole},
		{Func: "avg", Args: []*messages.Expr{col("f")}, Frame: whole}, {Func: "max", Args: []*messages.Expr{col("f")}, Frame: whole},
		// The default frame: RANGE from UNBOUNDED PRECEDING to the current
		// row's last peer.
		{Func: "sum", Args: []*messages.Expr{col("x")}}, {Func: "sum", Args: []*messages.Expr{col("f")}}, {Func: "max", Args: []*messages.Expr{col("x")}},
		{Func: "count", Args: []*messages.Expr{col("x")}, Frame: &messages.Frame{Mode: messages.FrameGroups,
			Start: messages.FrameBound{Kind: pre, Offset: &messages.Value{Int: i64(1)}}, End: messages.FrameBound{Kind: fol, Offset: &messages.Value{Int: i64(1)}}}},
		// By whole partitions.
		{Func: "sum", Args: []*messages.Expr{col("f")}, Frame: sliding},
		{Func: "sum", Args: []*messages.Expr{col("x")}, Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: pre, Offset: &messages.Value{Int: i64(2)}},
			End: messages.FrameBound{Kind: fol, Offset: &messages.Value{Int: i64(2)}}, Exclude: messages.ExcludeCurrentRow}},
	}
	if len(order) == 1 && (order[0].Expr.Column == "x" || order[0].Expr.Column == "f") {
		// RANGE offsets (one ORDER BY key): their bounds are found by
		// cursors, which a range of rows starts at its own first row's
		// bounds, found by binary search (framer.seek).
		rangeFrame := func(s, e string, so, eo int64) *messages.Frame {
			f := rows(s, e, so, eo)
			f.Mode = messages.FrameRange
			return f
		}
		calls = append(calls,
			&messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, Frame: rangeFrame(pre, cur, 2, 0)},
			&messages.WindowCall{Func: "avg", Args: []*messages.Expr{col("x")}, Frame: rangeFrame(pre, fol, 3, 1)},
			&messages.WindowCall{Func: "count", Star: true, Frame: rangeFrame(fol, fol, 1, 4)},
			&messages.WindowCall{Func: "min", Args: []*messages.Expr{col("x")}, Frame: rangeFrame(pre, fol, 2, 2)},
			&messages.WindowCall{Func: "max", Args: []*messages.Expr{col("s")}, Frame: rangeFrame(pre, cur, 40, 0)},
			&messages.WindowCall{Func: "first_value", Args: []*messages.Expr{col("s")}, Frame: rangeFrame(pre, fol, 1, 1)},
			&messages.WindowCall{Func: "last_value", Args: []*messages.Expr{col("x")}, Frame: rangeFrame(cur, fol, 0, 3)},
			&messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, Frame: rangeFrame(up, fol, 0, 2)},
			&messages.WindowCall{Func: "count", Args: []*messages.Expr{col("s")}, Frame: rangeFrame(pre, pre, 5, 1)},
		)
	}
	for _, c := range calls {
		c.OrderBy, c.PartitionBy = order, part
	}
	return calls
}

// TestParallelOnePartition runs the calls over one partition (no
// PARTITION BY, or a partition that holds half the rows) with 1 to 4
// threads, ordered by strings, several keys, DESC and NULLS FIRST with
// ties and NULLs, and checks every run returns the same rows.
func TestParallelOnePartition(t *testing.T) {
	parallelSmall(t)
	old := threadCounts
	threadCounts = []int{1, 2, 3, 4}
	t.Cleanup(func() { threadCounts = old })
	rng := rand.New(rand.NewPCG(13, 14))
	orders := [][]messages.SortItem{
		{{Expr: *col("s")}},
		{{Expr: *col("x"), Desc: true, NullsFirst: true}, {Expr: *col("s")}},
		{{Expr: *col("f")}, {Expr: *col("t"), Desc: true}},
		{{Expr: *col("x")}},
		{{Expr: *col("x"), Desc: true, NullsFirst: true}},
		{{Expr: *col("f"), Desc: true}},
		{{Expr: *col("c"), NullsFirst: true}},
		{{Expr: *col("s"), Desc: true}, {Expr: *col("id")}},
	}
	for _, n := range []int{5, 150, 1001} {
		_, rec := randomTable(rng, n)
		for oi, order := range orders {
			for _, part := range [][]messages.Expr{nil, {{Column: "g"}}} {
				calls := onePartitionCalls(order, part)
				q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}}}
				for k, w := range calls {
					q.Select = append(q.Select, messages.SelectItem{Alias: fmt.Sprintf("w%d", k), Window: w})
				}
				if oi%2 == 1 {
					q.OrderBy = []messages.SortItem{{Expr: *col("id")}} // results back in input order
				}
				runThreads(t, Options{Grant: 64 << 20}, func(o Options) (*Result, error) {
					return RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, o)
				})
			}
		}
		rec.Release()
	}
}

// TestParallelOnePartitionSmallGrant checks that a grant that holds the
// single-thread run but not the parallel sort's buffers sorts on one
// thread, with the same rows, within the grant.
func TestParallelOnePartitionSmallGrant(t *testing.T) {
	parallelSmall(t)
	rng := rand.New(rand.NewPCG(15, 16))
	const n = 20000
	_, rec := randomTable(rng, n)
	defer rec.Release()
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")},
		{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: *col("s")}, {Expr: *col("x"), Desc: true}}}},
		{Alias: "sum", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, OrderBy: []messages.SortItem{{Expr: *col("s")}, {Expr: *col("x"), Desc: true}}}}}}
	run := func(threads int, b *columnar.Budget) ([]string, int64) {
		res, err := RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, Options{Budget: b, Threads: threads})
		if err != nil {
			t.Fatalf("threads %d: %v", threads, err)
		}
		defer res.Close()
		return drain(t, res), res.Stats().PeakBytes
	}
	want, peak := run(1, newTestBudget())
	// Room for the single-thread run and less than the parallel sort's
	// buffers (32 bytes a row); the ballast keeps the grant above MinGrant.
	room := peak + 8*n
	ballast := max(0, MinGrant-room)
	b := columnar.NewBudget(room+ballast, nil)
	if err := b.Reserve(ballast); err != nil {
		t.Fatal(err)
	}
	got, gotPeak := run(4, b)
	if !slices.Equal(got, want) {
		t.Fatal("4 threads within a small grant returned other rows than 1 thread")
	}
	if gotPeak > b.Limit() {
		t.Fatalf("peak %d bytes over the %d-byte grant", gotPeak, b.Limit())
	}
}

// TestParallelOnePartitionOverflow checks that an integer sum that
// overflows in one range of a partition cut into ranges is the error it
// is on one thread, and that a running sum of large values that cancel
// out, carried into later ranges, is the one-thread sum.
func TestParallelOnePartitionOverflow(t *testing.T) {
	parallelSmall(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	build := func(xs []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
		defer b.Release()
		for i, x := range xs {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Int64Builder).Append(x)
		}
		return b.NewRecordBatch()
	}
	const n = 400
	big := make([]int64, n) // the running sum passes MaxInt64 at row 300
	wobble := make([]int64, n)
	for i := range big {
		big[i] = 1
		wobble[i] = 1
	}
	big[300] = math.MaxInt64
	wobble[100], wobble[101] = math.MaxInt64, -math.MaxInt64 // id 101 comes first: no sum overflows
	for _, c := range []struct {
		name     string
		xs       []int64
		frame    *messages.Frame
		overflow bool
	}{
		{"running", big, nil, true},
		{"sliding", big, &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(2)}},
			End: messages.FrameBound{Kind: messages.BoundCurrentRow}}, true},
		{"whole", big, &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
			End: messages.FrameBound{Kind: messages.BoundUnboundedFollowing}}, true},
		{"running, cancelling", wobble, &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
			End: messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(2)}}}, false},
	} {
		rec := build(c.xs)
		q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")},
			{Alias: "s", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, OrderBy: []messages.SortItem{{Expr: *col("id"), Desc: true}}, Frame: c.frame}}}}
		var want []string
		for _, threads := range []int{1, 2, 3, 4} {
			res, err := RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{Threads: threads})
			if c.overflow {
				if !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), `"s"`) {
					t.Fatalf("%s, threads %d: %v, want the overflow of select item s", c.name, threads, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s, threads %d: %v", c.name, threads, err)
			}
			rows := drain(t, res)
			res.Close()
			if want == nil {
				want = rows
			} else if !slices.Equal(rows, want) {
				t.Fatalf("%s, threads %d: other rows than one thread", c.name, threads)
			}
		}
		rec.Release()
	}
}

// TestParallelLoadBlockRanges loads input of fewer columns than threads
// from several containers of many blocks, each column's blocks decoded in
// ranges on their own goroutines: every thread count must return the
// rows of one thread, NULLs and strings included, in the same order (the
// containers' order: the last group is not sorted).
func TestParallelLoadBlockRanges(t *testing.T) {
	parallelSmall(t)
	old := threadCounts
	threadCounts = []int{1, 2, 3, 4, 7}
	t.Cleanup(func() { threadCounts = old })
	rng := rand.New(rand.NewPCG(31, 32))
	s := shape{n: 5000, containers: 3, blockRows: 64}
	ref := shapeTable(rng, s.n)
	dirs := writeShape(t, filepath.Join(t.TempDir(), "in"), ref, s)
	for _, sql := range []string{
		"SELECT id, count(*) OVER (PARTITION BY x) AS n FROM t",
		"SELECT s, x, count(*) OVER (PARTITION BY s) AS n FROM t",
		"SELECT id, u, max(x) OVER (PARTITION BY g) AS m FROM t",
	} {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := runThreads(t, Options{Grant: 64 << 20}, func(o Options) (*Result, error) {
			return Run(context.Background(), q, dirs, o)
		})
		if len(rows) != s.n {
			t.Fatalf("%s: %d rows, want %d", sql, len(rows), s.n)
		}
	}
}

// TestParallelSortPacked checks the parallel packed sort against the
// single-thread sort over integer keys without NULLs: one to three keys
// of every width a word holds (negative, huge, constant, few distinct,
// one partition dominating, timestamps on a stride), ascending and
// descending, on one to six threads: the same permutation, the
// partitions starting where the partition keys change, and every key
// read back out of the words in sorted order. Keys a word cannot hold
// are refused.
func TestParallelSortPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	packed := 0
	for it := 0; it < 400; it++ {
		n := 2 + rng.IntN(5000)
		nkeys := 1 + rng.IntN(3)
		var keys []sortedKey
		for k := 0; k < nkeys; k++ {
			v := &vector{kind: kindInt, typ: arrow.PrimitiveTypes.Int64, ints: make([]int64, n)}
			base := rng.Int64() >> rng.IntN(64)
			spread := int64(1) << rng.IntN(40)
			skewed := rng.IntN(4) == 0
			// Timestamps a second apart, in microseconds: too wide for
			// their bits that differ, narrow as multiples of a stride
			// with an odd factor (one off it, now and then).
			strided := !skewed && rng.IntN(3) == 0
			for i := range v.ints {
				switch {
				case strided:
					v.ints[i] = base/2 + rng.Int64N(1<<20)*1_000_000
				case skewed && rng.IntN(10) != 0:
					v.ints[i] = base
				default:
					v.ints[i] = base + rng.Int64N(spread)*int64(1+rng.IntN(3))
				}
			}
			if strided && rng.IntN(5) == 0 {
				v.ints[rng.IntN(n)]++
			}
			keys = append(keys, sortedKey{v: v, desc: rng.IntN(2) == 0})
		}
		np := 1 + rng.IntN(nkeys)
		gk := &groupKeys{keys: keys}
		for _, k := range keys[:np] {
			gk.part = append(gk.part, k.v)
		}
		var s sorter
		want := s.sortPerm(keys, n, nil)
		if want == nil {
			want = make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
		}
		threads := 1 + rng.IntN(6)
		ev := &evaluation{o: Options{Threads: threads}, budget: newTestBudget()}
		got, partStarts, ok := ev.sortPacked(gk, n, threads)
		if !ok {
			continue // codes wider than a word, or uneven buckets on threads: refused
		}
		packed++
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (n %d, %d keys, %d threads): permutations differ", it, n, nkeys, threads)
		}
		if wantStarts := partitionStarts(gk.part, want); !slices.Equal(partStarts, wantStarts) {
			t.Fatalf("iteration %d: partition starts %v, want %v", it, partStarts, wantStarts)
		}
		// Every key reads back out of the words in sorted order.
		for k, key := range keys {
			sv := ev.packed.decode(keys, k, threads)
			for i, p := range want {
				if sv.ints[i] != key.v.ints[p] {
					t.Fatalf("iteration %d: key %d of sorted row %d decodes as %d, is %d", it, k, i, sv.ints[i], key.v.ints[p])
				}
			}
		}
		if ev.budget.InUse() != 0 {
			t.Fatalf("iteration %d: %d bytes still reserved", it, ev.budget.InUse())
		}
	}
	if packed < 200 {
		t.Fatalf("only %d of 400 iterations packed: the test lost its keys", packed)
	}
	// What does not pack is refused, untouched.
	ints := &vector{kind: kindInt, ints: []int64{3, 1, 2}}
	withNull := &vector{kind: kindInt, ints: []int64{3, 1, 2}, nulls: []bool{false, true, false}}
	fl := &vector{kind: kindFloat, floats: []float64{3, 1, 2}}
	wide := &vector{kind: kindInt, ints: []int64{math.MinInt64, math.MaxInt64, 0}}
	for name, keys := range map[string][]*vector{"NULL": {ints, withNull}, "float": {fl, ints}, "wider than a word": {wide, wide}} {
		gk := &groupKeys{part: keys[:1]}
		for _, v := range keys {
			gk.keys = append(gk.keys, sortedKey{v: v})
		}
		ev := &evaluation{o: Options{Threads: 2}, budget: newTestBudget()}
		if _, _, ok := ev.sortPacked(gk, 3, 2); ok {
			t.Errorf("%s key: packed", name)
		}
	}
}

// partitionStarts is where the partitions of rows in perm's order start,
// where the keys part change, then len(perm).
func partitionStarts(part []*vector, perm []int32) []int32 {
	starts := []int32{0}
	for i := 1; i < len(perm); i++ {
		if !equalRows(part, int(perm[i-1]), int(perm[i])) {
			starts = append(starts, int32(i))
		}
	}
	return append(starts, int32(len(perm)))
}

// TestMakeConcurrently checks that every index is made once, and on as
// many goroutines at once as asked: the first calls wait until that many
// are running (a goroutine short, and they would wait until the timeout),
// and no more ever run at once.
func TestMakeConcurrently(t *testing.T) {
	for _, c := range []struct{ n, threads int }{{0, 4}, {1, 4}, {3, 1}, {3, 2}, {100, 4}} {
		want := int32(min(c.n, max(c.threads, 1)))
		made := make([]int32, c.n)
		var arrived, running, most atomic.Int32
		all := make(chan struct{})
		makeConcurrently(c.n, c.threads, func(i int) {
			now := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			atomic.AddInt32(&made[i], 1)
			switch k := arrived.Add(1); {
			case k == want:
				close(all)
			case k < want:
				select {
				case <-all:
				case <-time.After(10 * time.Second):
					t.Errorf("n=%d threads=%d: %d running at once after 10s, want %d", c.n, c.threads, running.Load(), want)
				}
			}
		})
		for i, m := range made {
			if m != 1 {
				t.Fatalf("n=%d threads=%d: index %d made %d times", c.n, c.threads, i, m)
			}
		}
		if most.Load() > want {
			t.Errorf("n=%d threads=%d: %d made at once, want at most %d", c.n, c.threads, most.Load(), want)
		}
	}
}
