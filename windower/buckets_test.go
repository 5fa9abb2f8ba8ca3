package windower

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

var bucketSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "ks", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// bucketTable makes rows id from..to-1 with many partitions: k an
// integer of keys distinct values (NULL on every 61st row), ks a string of
// 0 to 40 bytes naming about keys partitions (NULL on every 19th), v small
// integers with NULLs. keyBase offsets k, to make containers of other key
// ranges.
func bucketTable(rng *rand.Rand, from, to, keys int, keyBase int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), bucketSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%61 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(keyBase + int64(rng.IntN(keys)) - int64(keys/2))
		}
		if i%19 == 0 {
			b.Field(2).AppendNull()
		} else {
			n := rng.IntN(keys)
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%d%s", n, strings.Repeat("x", n%41)))
		}
		if i%7 == 0 {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Int64Builder).Append(int64(rng.IntN(100)))
		}
	}
	return b.NewRecordBatch()
}

// TestSpillRangeBuckets runs window groups with PARTITION BY over input
// larger than the grant, which the stage deals to range buckets of the
// partition key (integer keys with NULLs, strings of every length, two
// keys, a computed key), on 1, 2 and 4 threads (the same rows in the
// same order each time, though on more than one thread the chunks after
// the first are half as large and dealt while the next is read), and
// compares with the in-memory result.
func TestSpillRangeBuckets(t *testing.T) {
	parallelSmall(t)
	spillThreads(t)
	behind, overlapped := chunksWrittenBehind.Load(), chunksReadBehind.Load()
	defer func() {
		if chunksWrittenBehind.Load() == behind {
			t.Error("no chunk was written to its buckets in the background")
		}
		if chunksReadBehind.Load() == overlapped {
			t.Error("no chunk was dealt while the next was read")
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	n := 150000
	rec := bucketTable(rng, 0, n, 3000, 0)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	byK := func(fn string, args []*messages.Expr, part ...messages.Expr) *messages.WindowCall {
		return &messages.WindowCall{Func: fn, Args: args, PartitionBy: part,
			OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "v"}, NullsFirst: true}, {Expr: messages.Expr{Column: "id"}}}}
	}
	k, ks := messages.Expr{Column: "k"}, messages.Expr{Column: "ks"}
	queries := []struct {
		name     string
		q        *messages.WindowQuery
		unsorted bool // in memory, rows come in input order
	}{
		{"int key", &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "rn", Window: byK("row_number", nil, k)},
			{Alias: "rk", Window: byK("rank", nil, k)},
			{Alias: "lag", Window: byK("lag", []*messages.Expr{col("ks")}, k)},
		}}, false},
		{"string key", &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "ks", Expr: col("ks")},
			{Alias: "sum", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("v")}, PartitionBy: []messages.Expr{ks},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}},
				Frame:   rowsFrame(preceding(2), following(1))}},
			{Alias: "fv", Window: byK("first_value", []*messages.Expr{col("ks")}, ks)},
		}, Where: []messages.Predicate{{Left: messages.Expr{Column: "v"}, Op: "<>", Right: &messages.Value{Int: i64(5)}}}}, false},
		{"two keys and a computed one", &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "dr", Window: byK("dense_rank", nil, messages.Expr{Op: "%", Args: []*messages.Expr{col("k"), cint(40)}}, ks)},
		}}, false},
		{"whole-partition count", &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "c", Window: &messages.WindowCall{Func: "count", Star: true, PartitionBy: []messages.Expr{k}}},
			{Alias: "m", Window: &messages.WindowCall{Func: "max", Args: []*messages.Expr{col("ks")}, PartitionBy: []messages.Expr{k}}},
		}}, true},
	}
	for _, tc := range queries {
		t.Run(tc.name, func(t *testing.T) {
			want, wantStats := runThreads(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
				return RunRecords(context.Background(), tc.q, bucketSchema, []arrow.RecordBatch{rec}, o)
			})
			stages, uncounted := bucketStages.Load(), chunksDealtUncounted.Load()
			got, st := runThreads(t, Options{Grant: MinGrant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
				return Run(context.Background(), tc.q, []string{dir}, o)
			})
			if bucketStages.Load() == stages {
				t.Fatalf("no stage was dealt to range buckets (stats %+v)", st)
			}
			if n := chunksDealtUncounted.Load() - uncounted; n > 0 {
				t.Errorf("%d chunks dealt into storage the grant did not count", n)
			}
			if st.SpilledBytes == 0 || st.PeakBytes > MinGrant {
				t.Errorf("spilled %d bytes, peak %d of a %d-byte grant", st.SpilledBytes, st.PeakBytes, MinGrant)
			}
			if tc.unsorted {
				// The spilled rows come by partition; in memory in input order.
				want, got = slices.Clone(want), slices.Clone(got)
				slices.Sort(want)
				slices.Sort(got)
			}
			sameRows(t, tc.name, got, want)
			if st.Partitions != wantStats.Partitions || st.Rows != wantStats.Rows {
				t.Errorf("%d partitions and %d rows, want %d and %d", st.Partitions, st.Rows, wantStats.Partitions, wantStats.Rows)
			}
		})
	}
}

// TestSpillRangeBucketsLimit reads the first rows of a query whose last
// stage streams range buckets: the result stops at LIMIT, and its rows
// are the in-memory result's first.
func TestSpillRangeBucketsLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rec := bucketTable(rng, 0, 150000, 3000, 0)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "dr", Window: &messages.WindowCall{Func: "dense_rank", PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("k"), cint(40)}}, {Column: "ks"}},
			OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "v"}}, {Expr: messages.Expr{Column: "id"}}}}},
	}, Limit: 20000}
	res, err := RunRecords(context.Background(), q, bucketSchema, []arrow.RecordBatch{rec}, Options{Grant: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	want := drain(t, res)
	res.Close()
	for _, threads := range []int{1, 2, 4} {
		res, err := Run(context.Background(), q, []string{dir}, Options{Grant: MinGrant, Threads: threads, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, res)
		if st := res.Stats(); st.Rows != 20000 || st.PeakBytes > MinGrant {
			t.Errorf("threads %d: %d rows, peak %d bytes", threads, st.Rows, st.PeakBytes)
		}
		res.Close()
		sameRows(t, fmt.Sprintf("threads %d", threads), got, want)
	}
}

// TestSpillRangeBucketTooLarge deals input whose first container holds
// a narrow range of the partition key, so the ranges it gives leave most
// rows to the last bucket, which is too large for memory and runs on the
// external path of its own, where its rows, many partitions, go to
// buckets of their own: the result is still the in-memory one.
func TestSpillRangeBucketTooLarge(t *testing.T) {
	spillThreads(t)
	rng := rand.New(rand.NewPCG(5, 6))
	var recs []arrow.RecordBatch
	var dirs []string
	for i := 0; i < 4; i++ {
		keys, base := 100000, int64(1_000_000*(i+1))
		if i == 0 {
			keys, base = 50, 0
		}
		rec := bucketTable(rng, i*40000, (i+1)*40000, keys, base)
		defer rec.Release()
		recs = append(recs, rec)
		dirs = append(dirs, writeContainer(t, filepath.Join(t.TempDir(), fmt.Sprint("c", i)), rec, nil))
	}
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", PartitionBy: []messages.Expr{{Column: "k"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}}}},
		{Alias: "s", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("v")}, PartitionBy: []messages.Expr{{Column: "k"}}}},
	}}
	want, _ := runThreads(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
		return RunRecords(context.Background(), q, bucketSchema, recs, o)
	})
	stages, nested, external := bucketStages.Load(), nestedBucketStages.Load(), bucketsExternal.Load()
	got, _ := runThreads(t, Options{Grant: MinGrant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
		return Run(context.Background(), q, dirs, o)
	})
	if bucketStages.Load() == stages || bucketsExternal.Load() == external || nestedBucketStages.Load() == nested {
		t.Fatalf("stages dealt to buckets %d (%d of them a bucket's), buckets on the external path %d: want all",
			bucketStages.Load()-stages, nestedBucketStages.Load()-nested, bucketsExternal.Load()-external)
	}
	// Two window groups, the last without ORDER BY: in memory its rows
	// come in input order.
	slices.Sort(got)
	slices.Sort(want)
	sameRows(t, "a bucket too large", got, want)
}

// TestSpillPlainSelect reads a table larger than the grant without window
// functions or ORDER BY: it streams through one stage instead of being
// refused, in input order, WHERE and LIMIT applied.
func TestSpillPlainSelect(t *testing.T) {
	spillThreads(t)
	rng := rand.New(rand.NewPCG(7, 8))
	rec := bucketTable(rng, 0, 150000, 1000, 0)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	for _, q := range []*messages.WindowQuery{
		{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}, {Alias: "ks", Expr: col("ks")}, {Alias: "k", Expr: col("k")}}},
		{Table: "t", Select: []messages.SelectItem{{Alias: "ks", Expr: col("ks")}, {Alias: "v1", Expr: &messages.Expr{Op: "+", Args: []*messages.Expr{col("v"), cint(1)}}}},
			Where: []messages.Predicate{{Left: messages.Expr{Column: "v"}, Op: ">", Right: &messages.Value{Int: i64(50)}}}, Limit: 30000},
	} {
		want, _ := runThreads(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
			return RunRecords(context.Background(), q, bucketSchema, []arrow.RecordBatch{rec}, o)
		})
		got, st := runThreads(t, Options{Grant: MinGrant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
			return Run(context.Background(), q, []string{dir}, o)
		})
		if st.SpilledBytes == 0 || st.PeakBytes > MinGrant {
			t.Errorf("spilled %d bytes, peak %d of a %d-byte grant", st.SpilledBytes, st.PeakBytes, MinGrant)
		}
		if st.Rows != int64(len(want)) {
			t.Errorf("stats count %d rows, want %d", st.Rows, len(want))
		}
		sameRows(t, "plain select", got, want)
	}
}

// TestSpillRangeBucketsAbandoned closes a streamed result of range
// buckets after its first batch: the buckets being evaluated stop, and
// the grant's memory and the spill directory are given back.
func TestSpillRangeBucketsAbandoned(t *testing.T) {
	dir, q := rowNumberByK(t, 9, 10)
	for _, threads := range []int{1, 2, 4} {
		budget := columnar.NewBudget(MinGrant, nil)
		tmp := t.TempDir()
		stages := bucketStages.Load()
		res, err := Run(context.Background(), q, []string{dir}, Options{Budget: budget, Threads: threads, TempDir: tmp, BatchRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if bucketStages.Load() == stages {
			t.Fatalf("threads %d: no stage was dealt to range buckets", threads)
		}
		rec, err := res.Next()
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		res.Close()
		if n := budget.InUse(); n != 0 {
			t.Errorf("threads %d: %d bytes of the grant still counted after Close", threads, n)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("threads %d: spill directory not removed: %v", threads, left)
		}
	}
}

// TestSpillRangeBucketsCancelled cancels a query whose last stage streams
// range buckets before its result is read: Next returns the cancellation,
// and returns it again rather than waiting for a bucket no one evaluates.
func TestSpillRangeBucketsCancelled(t *testing.T) {
	dir, q := rowNumberByK(t, 11, 12)
	ctx, cancel := context.WithCancel(context.Background())
	budget := columnar.NewBudget(MinGrant, nil)
	res, err := Run(ctx, q, []string{dir}, Options{Budget: budget, Threads: 2, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Buckets whose evaluation the cancel cut short gave back what
		// they held.
		res.Close()
		if n := budget.InUse(); n != 0 {
			t.Errorf("%d bytes of the grant still counted after Close", n)
		}
	}()
	cancel()
	var first error
	for {
		rec, err := res.Next()
		if err != nil {
			first = err
			break
		}
		rec.Release()
	}
	if !errors.Is(first, context.Canceled) {
		t.Fatalf("Next after the cancel: %v, want context.Canceled", first)
	}
	if _, err := res.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next again: %v, want the same error", err)
	}
}

// rowNumberByK writes a bucketTable of 150,000 rows (seeds a, b) as one
// container and returns it with row_number() OVER (PARTITION BY k ORDER
// BY id), whose one stage, spilling, streams its range buckets.
func rowNumberByK(t *testing.T, a, b uint64) (string, *messages.WindowQuery) {
	t.Helper()
	rec := bucketTable(rand.New(rand.NewPCG(a, b)), 0, 150000, 3000, 0)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	return dir, &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", PartitionBy: []messages.Expr{{Column: "k"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
	}}
}

// TestBucketOfStrings checks that the string splitters' fast path
// (prefix words, then the strings) puts every row in the bucket the
// comparison of rows does, on strings sharing their first 8 bytes and
// more, strings ending in zero bytes, empty strings and NULLs.
func TestBucketOfStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	pieces := []string{"", "\x00", "a", "ab", "abcdefgh", "abcdefgh\x00", "abcdefghi", "abcdefgz", "b", "\xff\xff"}
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(4) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return sb.String()
	}
	const n = 20000
	rows := &vector{kind: kindString, strs: make([]string, n), nulls: make([]bool, n)}
	for i := range rows.strs {
		rows.strs[i] = str()
		rows.nulls[i] = i%13 == 0
	}
	splitters := make([]string, 40)
	for i := range splitters {
		splitters[i] = str()
	}
	slices.Sort(splitters)
	splitters = slices.Compact(splitters)
	for _, nullsFirst := range []bool{false, true} {
		for _, nullSplitter := range []bool{false, true} {
			// The splitters as chooseRanges gathers them: a NULL one
			// (the first row of the NULLs' partition) where NULLs sort.
			sv := &vector{kind: kindString, strs: slices.Clone(splitters), nulls: make([]bool, len(splitters))}
			if nullSplitter {
				at := len(sv.strs)
				if nullsFirst {
					at = 0
				}
				sv.strs = slices.Insert(sv.strs, at, "")
				sv.nulls = slices.Insert(sv.nulls, at, true)
			}
			kv := []sortedKey{{v: rows, nullsFirst: nullsFirst}}
			slow := &buckets{keys: []sortedKey{{v: sv, nullsFirst: nullsFirst}}}
			fast := &buckets{keys: slow.keys}
			fast.stringSplitters()
			if fast.strs == nil {
				t.Fatal("no fast path for one ascending string key")
			}
			for i := 0; i < n; i++ {
				if got, want := fast.bucketOf(kv, i), slow.bucketOf(kv, i); got != want {
					t.Fatalf("nullsFirst=%v, NULL splitter %v: row %d (%q, null %v) in bucket %d, want %d",
						nullsFirst, nullSplitter, i, rows.strs[i], rows.nulls[i], got, want)
				}
			}
		}
	}
}

// TestScatter checks that dealing a column by scatter gives what the
// gather through the permutation that groups rows by bucket gives, on
// every kind of vector, with NULLs, empty buckets and one bucket.
func TestScatter(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const n = 5000
	ints := &vector{kind: kindInt, ints: make([]int64, n), nulls: make([]bool, n)}
	floats := &vector{kind: kindFloat, floats: make([]float64, n)}
	strs := &vector{kind: kindString, strs: make([]string, n), nulls: make([]bool, n)}
	for i := 0; i < n; i++ {
		ints.ints[i], ints.nulls[i] = rng.Int64(), i%7 == 0
		floats.floats[i] = rng.Float64()
		strs.strs[i], strs.nulls[i] = strings.Repeat("s", rng.IntN(20)), i%11 == 0
	}
	for _, nb := range []int{1, 3, 64} {
		of, start, perm := randomBuckets(rng, n, nb)
		for _, v := range []*vector{ints, floats, strs} {
			got, want := v.scatter(of, start, &vector{}), v.gather(perm, &vector{})
			if !slices.Equal(got.ints, want.ints) || !slices.Equal(got.floats, want.floats) ||
				!slices.Equal(got.strs, want.strs) || !slices.Equal(got.nulls, want.nulls) {
				t.Fatalf("%d buckets, kind %v: scatter differs from gather", nb, v.kind)
			}
		}
	}
}

// TestCountAtMost checks the branch-free searches of the splitters against
// sort.Search: empty and one-element splitters, repeated values, keys
// below, between, on and above them, and the ends of the integer range.
func TestCountAtMost(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 2000; it++ {
		s := make([]int64, rng.IntN(40))
		for i := range s {
			s[i] = rng.Int64N(30) - 15
		}
		if it%7 == 0 && len(s) > 1 {
			s[0], s[len(s)-1] = math.MinInt64, math.MaxInt64
		}
		slices.Sort(s)
		u := make([]uint64, len(s))
		for i, x := range s {
			u[i] = uint64(x) ^ 1<<63 // order-preserving
		}
		for _, x := range []int64{math.MinInt64, -16, -15, -3, 0, 1, 14, 15, math.MaxInt64} {
			atMost := sort.Search(len(s), func(i int) bool { return s[i] > x })
			below := sort.Search(len(s), func(i int) bool { return s[i] >= x })
			ux := uint64(x) ^ 1<<63
			if got := countAtMost(s, x); got != atMost {
				t.Fatalf("countAtMost(%v, %d) = %d, want %d", s, x, got, atMost)
			}
			if got := countBelow(s, x); got != below {
				t.Fatalf("countBelow(%v, %d) = %d, want %d", s, x, got, below)
			}
			if got := countAtMost(u, ux); got != atMost {
				t.Fatalf("countAtMost(uint64, %d) = %d, want %d", x, got, atMost)
			}
			if got := countBelow(u, ux); got != below {
				t.Fatalf("countBelow(uint64, %d) = %d, want %d", x, got, below)
			}
		}
	}
}

// TestPackedStrings checks that a string column dealt packed gives, for
// every bucket, the Arrow array of the rows the gather through the
// bucket-grouping permutation gives: by scatter and through that
// permutation, with NULLs, empty strings, strings of up to 300 bytes,
// empty buckets, one bucket, and a second chunk dealt into the first's
// storage.
func TestPackedStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, nb := range []int{1, 3, 64} {
		ps := &packedStrings{}
		for chunk, n := range []int{5000, 3000} {
			v := &vector{kind: kindString, typ: arrow.BinaryTypes.String, strs: make([]string, n), nulls: make([]bool, n)}
			for i := range n {
				v.strs[i], v.nulls[i] = strings.Repeat(string(rune('a'+chunk)), rng.IntN(300)), i%11 == 0
			}
			if chunk == 1 {
				v.nulls = nil
			}
			of, start, perm := randomBuckets(rng, n, nb)
			want := v.gather(perm, &vector{})
			for _, byPerm := range []bool{false, true} {
				p := perm
				if !byPerm {
					p = nil
				}
				if !ps.deal(v, of, p, start) {
					t.Fatalf("%d rows of up to 300 bytes not packed", n)
				}
				for x := 0; x < nb; x++ {
					got := ps.array(v.typ, start[x], start[x+1])
					w := want.slice(start[x], start[x+1]).toArrow(memory.NewGoAllocator())
					if !array.Equal(got, w) {
						t.Fatalf("%d buckets, chunk %d, by permutation %v: bucket %d is\n%v\nwant\n%v", nb, chunk, byPerm, x, got, w)
					}
					if l, wl := ps.longest(start[x], start[x+1]), longestOf(want.strs[start[x]:start[x+1]]); l != wl {
						t.Errorf("bucket %d: longest %d, want %d", x, l, wl)
					}
					got.Release()
					w.Release()
				}
			}
		}
	}
}

// randomBuckets deals n rows to nb buckets at random, bucket 1 left
// empty, and returns each row's bucket, where each bucket starts, and the
// permutation that groups the rows by bucket (in input order within each).
func randomBuckets(rng *rand.Rand, n, nb int) (of []uint16, start []int, perm []int32) {
	of = make([]uint16, n)
	counts := make([]int, nb)
	for i := range of {
		x := rng.IntN(nb)
		if nb > 1 && x == 1 {
			x = 0
		}
		of[i] = uint16(x)
		counts[x]++
	}
	start = make([]int, nb+1)
	for x := 0; x < nb; x++ {
		start[x+1] = start[x] + counts[x]
	}
	perm = make([]int32, 0, n)
	for x := 0; x < nb; x++ {
		for i := range of {
			if int(of[i]) == x {
				perm = append(perm, int32(i))
			}
		}
	}
	return of, start, perm
}

func longestOf(strs []string) int64 {
	var most int
	for _, s := range strs {
		most = max(most, len(s))
	}
	return int64(most)
}

// A row's bucket by one integer key is the same through the table of
// keys between the splitters as by the search of them, for keys inside
// the table, below it, above it and at the ends of int64.
func TestBucketTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 100 {
		lo := rng.Int64N(1<<20) - 1<<19
		ints := []int64{lo}
		for len(ints) < 1+rng.IntN(40) {
			ints = append(ints, ints[len(ints)-1]+1+rng.Int64N(50))
		}
		b := &buckets{fast: true, ints: ints}
		b.bucketTable()
		if b.table == nil {
			t.Fatalf("round %d: no table for splitters %d apart", round, ints[len(ints)-1]-lo)
		}
		keys := []int64{math.MinInt64, math.MaxInt64, lo - 1, lo, ints[len(ints)-1], ints[len(ints)-1] + 1}
		for range 200 {
			keys = append(keys, lo-10+rng.Int64N(ints[len(ints)-1]-lo+20))
		}
		v := &vector{kind: kindInt, ints: keys}
		kv := []sortedKey{{v: v}}
		for i, x := range keys {
			if got, want := b.bucketOf(kv, i), countAtMost(ints, x); got != want {
				t.Fatalf("round %d: key %d in bucket %d, want %d (splitters %v)", round, x, got, want, ints)
			}
		}
	}
	wide := &buckets{fast: true, ints: []int64{math.MinInt64, 0, math.MaxInt64}}
	if wide.bucketTable(); wide.table != nil {
		t.Errorf("a table over splitters %d apart", uint64(math.MaxUint64))
	}
}
