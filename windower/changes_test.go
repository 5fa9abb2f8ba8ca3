package windower

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/messages"
)

// The keyed tables' tests: a query over a keyed table's containers sees
// exactly its current rows, on every path, as if it read one unkeyed
// container of them.

// keyedFields are the visible columns of the keyed test tables; the key
// is id, or (name, id).
var keyedFields = []arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "g", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}

var (
	keyedSchema = arrow.NewSchema(append(slices.Clone(keyedFields), columnar.ChangeFields()...), nil)
	plainSchema = arrow.NewSchema(keyedFields, nil)
)

// kRow is a row of a keyed test table; nil pointers are NULLs.
type kRow struct {
	id      int64
	name    *string
	g       *int32
	v       *int64
	s       *string
	version int64
	marker  bool
}

func (r kRow) key(pk []string) string {
	if len(pk) == 1 {
		return fmt.Sprint(r.id)
	}
	return *r.name + "\x00" + fmt.Sprint(r.id)
}

// keyedTable is the rows of a keyed table's containers.
type keyedTable struct {
	pk    []string
	conts [][]kRow
}

func ptr[T any](v T) *T { return &v }

// randomKeyedTable makes a load of keys rows (version 0) and changes
// containers of changes, each change a new version: updates, inserts
// and deletes (markers), at most one row of a key a container. Some
// changes are applied twice (the same row in a second container), and
// the containers are shuffled, so that a later container may hold older
// versions. v is never 0 in a current row and always 0 in a superseded
// one that is not a marker, so WHERE 1000000 / v fails on a row read
// before it is dropped.
func randomKeyedTable(rng *rand.Rand, pk []string, keys, changes int) *keyedTable {
	names := []string{"a", "bb", "ccc", "dddd"}
	newKey := func(k int) kRow {
		r := kRow{id: int64(k)}
		if len(pk) == 2 {
			r.id = int64(k / len(names))
			r.name = ptr(names[k%len(names)])
		}
		return r
	}
	values := func(r kRow) kRow {
		if len(pk) == 1 && rng.IntN(10) > 0 {
			r.name = ptr(names[rng.IntN(len(names))])
		}
		if rng.IntN(12) > 0 {
			r.g = ptr(int32(rng.IntN(7)))
		}
		if rng.IntN(8) > 0 {
			r.v = ptr(int64(rng.IntN(2000)) - 999)
			if *r.v == 0 {
				*r.v = 1
			}
		}
		if rng.IntN(10) > 0 {
			r.s = ptr(strings.Repeat(string(rune('a'+rng.IntN(26))), []int{0, 1, 3, 8, 17, 60, 200}[rng.IntN(7)]))
		}
		return r
	}
	t := &keyedTable{pk: pk, conts: [][]kRow{nil}}
	for k := range keys {
		if rng.IntN(10) < 9 {
			t.conts[0] = append(t.conts[0], values(newKey(k)))
		}
	}
	version := int64(0)
	for c := 1; c <= changes; c++ {
		var rows []kRow
		for _, k := range rng.Perm(keys + keys/4)[:rng.IntN(keys/2+1)] {
			version++
			r := newKey(k)
			r.version = version
			if rng.IntN(4) == 0 {
				r.marker = true
				if len(pk) == 1 {
					r.name = nil
				}
			} else {
				r = values(r)
			}
			rows = append(rows, r)
		}
		t.conts = append(t.conts, rows)
	}
	// Changes applied twice: a row of one change container copied into
	// another that lacks its key.
	for c := 1; c <= changes; c++ {
		into := 1 + rng.IntN(changes)
		has := map[string]bool{}
		for _, r := range t.conts[into] {
			has[r.key(pk)] = true
		}
		for _, r := range t.conts[c] {
			if into != c && !has[r.key(pk)] && rng.IntN(10) == 0 {
				t.conts[into] = append(t.conts[into], r)
				has[r.key(pk)] = true
			}
		}
	}
	rng.Shuffle(len(t.conts), func(i, j int) { t.conts[i], t.conts[j] = t.conts[j], t.conts[i] })
	for _, rows := range t.conts {
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	}
	// Superseded rows get v = 0 (see above).
	cur := t.current()
	for _, rows := range t.conts {
		for i, r := range rows {
			if c, ok := cur[r.key(pk)]; !r.marker && (!ok || c.version != r.version) {
				rows[i].v = ptr(int64(0))
			}
		}
	}
	return t
}

// current is the table's current rows by key, worked out by brute
// force: a key's row of the highest version, unless it is a marker.
func (t *keyedTable) current() map[string]kRow {
	best := t.latest()
	for k, r := range best {
		if r.marker {
			delete(best, k)
		}
	}
	return best
}

// latest is each key's row of the highest version, markers included.
func (t *keyedTable) latest() map[string]kRow {
	best := map[string]kRow{}
	for _, rows := range t.conts {
		for _, r := range rows {
			k := r.key(t.pk)
			if b, ok := best[k]; !ok || r.version > b.version {
				best[k] = r
			}
		}
	}
	return best
}

// rows counts the rows of every container, superseded or not.
func (t *keyedTable) rows() int {
	n := 0
	for _, rows := range t.conts {
		n += len(rows)
	}
	return n
}

// kRecord builds rows as a batch of schema: keyedSchema (with the
// change columns) or plainSchema.
func kRecord(schema *arrow.Schema, rows []kRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		appendOr(b.Field(1), r.name, func(v string) { b.Field(1).(*array.StringBuilder).Append(v) })
		appendOr(b.Field(2), r.g, func(v int32) { b.Field(2).(*array.Int32Builder).Append(v) })
		appendOr(b.Field(3), r.v, func(v int64) { b.Field(3).(*array.Int64Builder).Append(v) })
		appendOr(b.Field(4), r.s, func(v string) { b.Field(4).(*array.StringBuilder).Append(v) })
		if schema.NumFields() > len(keyedFields) {
			b.Field(5).(*array.Int64Builder).Append(r.version)
			b.Field(6).(*array.BooleanBuilder).Append(r.marker)
		}
	}
	return b.NewRecordBatch()
}

func appendOr[T any](b array.Builder, v *T, add func(T)) {
	if v == nil {
		b.AppendNull()
	} else {
		add(*v)
	}
}

// writeRows writes rows as a container at dir: keyed (pk set) or not,
// sorted on key (rows must be in that order) or not.
func writeRows(t testing.TB, dir string, rows []kRow, pk []string, key columnar.SortKey, blockRows int) string {
	t.Helper()
	schema := plainSchema
	if pk != nil {
		schema = keyedSchema
	}
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "t", Projection: "p", ID: filepath.Base(dir), Schema: schema,
		SortKey: key, PrimaryKey: pk, BlockRows: blockRows, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := kRecord(schema, rows)
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// write writes the table's containers under dir and, beside them, one
// unkeyed container of its current rows; it returns both.
func (t *keyedTable) write(tb testing.TB, dir string, blockRows int) (keyed []string, plain string) {
	for i, rows := range t.conts {
		keyed = append(keyed, writeRows(tb, filepath.Join(dir, fmt.Sprint("k", i)), rows, t.pk, nil, blockRows))
	}
	var cur []kRow
	for _, r := range t.current() {
		cur = append(cur, r)
	}
	slices.SortFunc(cur, func(a, b kRow) int { return strings.Compare(a.key(t.pk), b.key(t.pk)) })
	return keyed, writeRows(tb, filepath.Join(dir, "plain"), cur, nil, nil, blockRows)
}

func over(fn string, args []*messages.Expr, part []string, order ...string) *messages.WindowCall {
	w := &messages.WindowCall{Func: fn, Args: args}
	for _, p := range part {
		w.PartitionBy = append(w.PartitionBy, messages.Expr{Column: p})
	}
	for _, o := range order {
		w.OrderBy = append(w.OrderBy, messages.SortItem{Expr: messages.Expr{Column: o}})
	}
	return w
}

// keyedQueries are the differential test's queries. Their results do
// not depend on the input's order: every ORDER BY ends with the key.
func keyedQueries() map[string]*messages.WindowQuery {
	all := []messages.SelectItem{}
	for _, f := range keyedFields {
		all = append(all, messages.SelectItem{Alias: f.Name, Expr: col(f.Name)})
	}
	ids := all[:2]
	win := func(alias string, w *messages.WindowCall) messages.SelectItem {
		return messages.SelectItem{Alias: alias, Window: w}
	}
	count := over("count", nil, []string{"g"})
	count.Star = true
	byKey := []string{"name", "id"}
	positive := []messages.Predicate{{Left: messages.Expr{Op: "/", Args: []*messages.Expr{cint(1000000), col("v")}}, Op: ">", Right: &messages.Value{Int: i64(0)}}}
	return map[string]*messages.WindowQuery{
		// Every column the query may name, in key order (a query without
		// window functions spills only to sort).
		"all columns": {Table: "t", Select: all, OrderBy: []messages.SortItem{{Expr: *col("name")}, {Expr: *col("id")}}},
		"count by g":  {Table: "t", Select: append(slices.Clone(ids), win("n", count))},
		"running sum, row_number, lag": {Table: "t", Select: append(slices.Clone(ids),
			win("sum", over("sum", []*messages.Expr{col("v")}, []string{"g"}, byKey...)),
			win("rn", over("row_number", nil, []string{"g"}, "v", "name", "id")),
			win("lag", over("lag", []*messages.Expr{col("s")}, []string{"g"}, byKey...)))},
		"where, two groups": {Table: "t", Where: positive, Select: append(slices.Clone(all),
			win("total", over("sum", []*messages.Expr{col("v")}, []string{"g"})),
			win("rn", over("row_number", nil, nil, byKey...)))},
		"where s, no partition": {Table: "t",
			Where:  []messages.Predicate{{Left: messages.Expr{Column: "s"}, Op: messages.OpIsNotNull}},
			Select: append(slices.Clone(ids), win("lag", over("lag", []*messages.Expr{col("v")}, nil, byKey...)))},
	}
}

// sortedRows runs q and returns its rows (drain's form) sorted, and its stats.
func sortedRows(t *testing.T, opts Options, run func(Options) (*Result, error)) ([]string, Stats) {
	t.Helper()
	rows, st := runThreads(t, opts, run)
	slices.Sort(rows)
	return rows, st
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d: %s, want %s", what, i, got[i], want[i])
		}
	}
}

// TestKeyedDifferential runs window queries over random keyed tables of
// several containers and many blocks, in memory and spilling, on 1 and
// 4 threads, and compares each with the same query over one unkeyed
// container of the current rows.
func TestKeyedDifferential(t *testing.T) {
	parallelSmall(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		pk          []string
		keys, conts int
		blockRows   int
		grant       int64
	}{
		{"int key, in memory", []string{"id"}, 3000, 5, 16, 1 << 30},
		{"two-column key, in memory", []string{"name", "id"}, 3000, 4, 64, 1 << 30},
		{"int key, spilling", []string{"id"}, 60000, 4, 512, MinGrant},
		{"two-column key, spilling", []string{"name", "id"}, 60000, 3, 256, MinGrant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.keys), uint64(tc.conts)))
			tbl := randomKeyedTable(rng, tc.pk, tc.keys, tc.conts)
			keyed, plain := tbl.write(t, t.TempDir(), tc.blockRows)
			live := len(tbl.current())
			cache := columnar.NewBlockCache(1 << 30)
			pool := bufpool.New(1 << 30).WithMinBytes(1)
			for name, q := range keyedQueries() {
				want, _ := sortedRows(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
					return Run(ctx, q, []string{plain}, o)
				})
				got, st := sortedRows(t, Options{Grant: tc.grant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
					return Run(ctx, q, keyed, o)
				})
				sameRows(t, name, got, want)
				// Twice through a block cache and a vector pool: the second
				// run takes the blocks the first kept, drops the same rows
				// of them, and evaluates in buffers the runs before wrote.
				for run := range 2 {
					cached, cst := sortedRows(t, Options{Grant: tc.grant, TempDir: t.TempDir(), BlockCache: cache, VectorPool: pool}, func(o Options) (*Result, error) {
						return Run(ctx, q, keyed, o)
					})
					sameRows(t, name+" through the block cache", cached, want)
					if inMemory := cst.SpilledBytes == 0; run == 1 && inMemory != (cst.BlocksCached > 0) {
						t.Errorf("%s: second run through the cache took %d blocks from it, spilled %d bytes", name, cst.BlocksCached, cst.SpilledBytes)
					}
				}
				if st.SupersededRows != int64(tbl.rows()-live) || (q.Where == nil && st.InputRows != int64(live)) {
					t.Errorf("%s: input rows %d, superseded %d; want %d and %d", name, st.InputRows, st.SupersededRows, live, tbl.rows()-live)
				}
				if spills := tc.grant == MinGrant; spills != (st.SpilledBytes > 0) {
					t.Errorf("%s: spilled %d bytes under a %d-byte grant", name, st.SpilledBytes, tc.grant)
				}
			}
		})
	}
}

// TestKeyedSortedInput streams one keyed container sorted on the
// query's keys (a mergeout's output that kept its delete markers): the
// markers are dropped as the buffer fills and by the first passes and
// cursors that read a partition larger than the buffer again.
func TestKeyedSortedInput(t *testing.T) {
	parallelSmall(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 22))
	pk := []string{"name", "id"}
	tbl := randomKeyedTable(rng, pk, 160000, 2)
	// One container of every key's latest row, markers included, in
	// (name, id) order.
	var rows []kRow
	for _, r := range tbl.latest() {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b kRow) int {
		if c := strings.Compare(*a.name, *b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	one := &keyedTable{pk: pk, conts: [][]kRow{rows}}
	dir := t.TempDir()
	keyed := writeRows(t, filepath.Join(dir, "sorted"), rows, pk, columnar.SortKey{{Name: "name"}, {Name: "id"}}, 1024)
	_, plain := one.write(t, dir, 1024)
	live := len(one.current())
	if live == len(rows) {
		t.Fatal("the sorted container has no delete markers")
	}
	byName := func(fn string, args []*messages.Expr, mode string, start, end messages.FrameBound) *messages.WindowCall {
		w := over(fn, args, []string{"name"}, "id")
		w.Frame = &messages.Frame{Mode: mode, Start: start, End: end}
		return w
	}
	unbounded := messages.FrameBound{Kind: messages.BoundUnboundedPreceding}
	current := messages.FrameBound{Kind: messages.BoundCurrentRow}
	ids := []messages.SelectItem{{Alias: "id", Expr: col("id")}, {Alias: "name", Expr: col("name")}}
	// Counts rows, NULLs or not: a marker a cursor fails to drop counts.
	rangeCount := byName("count", nil, messages.FrameRange, preceding(30), following(30))
	rangeCount.Star = true
	big := &messages.WindowQuery{Table: "t", Select: append(slices.Clone(ids),
		messages.SelectItem{Alias: "avg", Window: byName("avg", []*messages.Expr{col("v")}, messages.FrameRange, preceding(40), following(25))},
		messages.SelectItem{Alias: "n", Window: rangeCount},
		messages.SelectItem{Alias: "cd", Window: over("cume_dist", nil, []string{"name"}, "id")},
		messages.SelectItem{Alias: "nt", Window: over("ntile", []*messages.Expr{cint(4)}, []string{"name"}, "id")},
		messages.SelectItem{Alias: "max", Window: byName("max", []*messages.Expr{col("s")}, messages.FrameRows, unbounded, messages.FrameBound{Kind: messages.BoundUnboundedFollowing})},
		messages.SelectItem{Alias: "sum", Window: byName("sum", []*messages.Expr{col("v")}, messages.FrameRows, unbounded, current)},
		messages.SelectItem{Alias: "lag", Window: over("lag", []*messages.Expr{col("g")}, []string{"name"}, "id")},
	)}
	bigWhere := *big
	bigWhere.Where = []messages.Predicate{{Left: messages.Expr{Column: "v"}, Op: ">", Right: &messages.Value{Int: i64(0)}}}
	for name, q := range map[string]*messages.WindowQuery{"big partitions": big, "big partitions, where": &bigWhere} {
		want, _ := sortedRows(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
			return Run(ctx, q, []string{plain}, o)
		})
		for _, grant := range []int64{1 << 30, MinGrant} {
			got, st := sortedRows(t, Options{Grant: grant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
				return Run(ctx, q, []string{keyed}, o)
			})
			what := fmt.Sprintf("%s, grant %d", name, grant)
			sameRows(t, what, got, want)
			if !st.SortedInput || st.SupersededRows != int64(len(rows)-live) {
				t.Errorf("%s: sorted input %v, superseded %d; want sorted and %d", what, st.SortedInput, st.SupersededRows, len(rows)-live)
			}
			if spills := grant == MinGrant; spills != (st.SpilledBytes > 0) {
				t.Errorf("%s: spilled %d bytes", what, st.SpilledBytes)
			}
		}
	}
}

// TestKeyedChangeColumnsHidden: a query cannot name the change columns,
// in any case, on Run or RunRecords, and the result of every column the
// query may name has none.
func TestKeyedChangeColumnsHidden(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 22))
	tbl := randomKeyedTable(rng, []string{"id"}, 50, 2)
	keyed, _ := tbl.write(t, t.TempDir(), 16)
	ctx := context.Background()
	for _, name := range []string{columnar.VersionColumn, columnar.DeletedColumn, strings.ToUpper(columnar.VersionColumn)} {
		for what, q := range map[string]*messages.WindowQuery{
			"select": {Table: "t", Select: []messages.SelectItem{{Alias: "x", Expr: col(name)}}},
			"where":  {Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}}, Where: []messages.Predicate{{Left: messages.Expr{Column: name}, Op: messages.OpIsNotNull}}},
			"window": {Table: "t", Select: []messages.SelectItem{{Alias: "m", Window: over("max", []*messages.Expr{col(name)}, nil)}}},
		} {
			_, err := Run(ctx, q, keyed, Options{})
			var qe *QueryError
			if !errors.As(err, &qe) || !strings.Contains(err.Error(), "does not exist") {
				t.Errorf("%s %s: error %v, want a query error that it does not exist", what, name, err)
			}
			_, err = RunRecords(ctx, q, keyedSchema, nil, Options{})
			if !errors.As(err, &qe) {
				t.Errorf("RunRecords %s %s: error %v, want a query error", what, name, err)
			}
		}
	}
	all := keyedQueries()["all columns"]
	res, err := RunRecords(ctx, all, keyedSchema, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	for _, f := range res.Schema().Fields() {
		if columnar.IsChangeColumn(f.Name) {
			t.Errorf("result column %s", f.Name)
		}
	}
}

// BenchmarkKeyed runs two queries over a keyed table of 1Mi rows, a
// load and eight containers of changes to 1%, 10% or 50% of its keys
// (a tenth of them deletes), and over the same current rows in one
// freshly merged container (keyed, without markers: what a full
// mergeout writes), in memory.
func BenchmarkKeyed(b *testing.B) {
	const n = 1 << 20
	queries := map[string]string{
		"running_sum": "sum(v) OVER (PARTITION BY g ORDER BY id)",
		"q0_count":    "count(*) OVER (PARTITION BY a)",
	}
	parse := func(name string) *messages.WindowQuery {
		q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}}}
		switch name {
		case "running_sum":
			q.Select = append(q.Select, messages.SelectItem{Alias: "s", Window: over("sum", []*messages.Expr{col("v")}, []string{"g"}, "id")})
		default:
			w := over("count", nil, []string{"a"})
			w.Star = true
			q.Select = append(q.Select, messages.SelectItem{Alias: "n", Window: w})
		}
		return q
	}
	dir := b.TempDir()
	for _, pct := range []int{1, 10, 50} {
		keyed, merged := benchKeyedTable(b, filepath.Join(dir, fmt.Sprint(pct)), n, pct)
		for _, name := range []string{"running_sum", "q0_count"} {
			q := parse(name)
			for _, in := range []struct {
				label string
				dirs  []string
			}{{"merged", merged}, {"changed", keyed}} {
				b.Run(fmt.Sprintf("%s/%d%%/%s", name, pct, in.label), func(b *testing.B) {
					b.Logf("%s: %s", name, queries[name])
					for i := 0; i < b.N; i++ {
						res, err := Run(context.Background(), q, in.dirs, Options{Grant: 1 << 30})
						if err != nil {
							b.Fatal(err)
						}
						for {
							rec, err := res.Next()
							if err != nil {
								break
							}
							rec.Release()
						}
						b.ReportMetric(float64(res.Stats().SupersededRows), "superseded")
						res.Close()
					}
				})
			}
		}
	}
}

// benchKeyedTable writes the keyed table of BenchmarkKeyed under dir:
// its containers, and one container of its current rows.
func benchKeyedTable(b *testing.B, dir string, n, pct int) (keyed, merged []string) {
	rng := rand.New(rand.NewPCG(uint64(pct), 7))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "g", Type: arrow.PrimitiveTypes.Int32},
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: columnar.VersionColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: columnar.DeletedColumn, Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	type row struct {
		id, a, v, version int64
		g                 int32
		marker            bool
	}
	random := func(id int64) row {
		return row{id: id, g: int32(rng.IntN(1000)), a: rng.Int64N(int64(n)), v: rng.Int64N(1000)}
	}
	write := func(name string, rows []row) string {
		b.Helper()
		d := filepath.Join(dir, name)
		w, err := columnar.Create(d, columnar.WriterOptions{Table: "t", Projection: "p", ID: name, Schema: schema, PrimaryKey: []string{"id"}, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer rb.Release()
		for _, r := range rows {
			rb.Field(0).(*array.Int64Builder).Append(r.id)
			rb.Field(1).(*array.Int32Builder).Append(r.g)
			rb.Field(2).(*array.Int64Builder).Append(r.a)
			if r.marker {
				rb.Field(3).AppendNull()
			} else {
				rb.Field(3).(*array.Int64Builder).Append(r.v)
			}
			rb.Field(4).(*array.Int64Builder).Append(r.version)
			rb.Field(5).(*array.BooleanBuilder).Append(r.marker)
		}
		rec := rb.NewRecordBatch()
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	load := make([]row, n)
	for i := range load {
		load[i] = random(int64(i))
	}
	current := slices.Clone(load)
	changed := rng.Perm(n)[:n*pct/100]
	changes := make([][]row, 8)
	for k, id := range changed {
		r := random(int64(id))
		r.version = int64(k + 1)
		if rng.IntN(10) == 0 {
			r.marker, r.g, r.a = true, 0, 0
		}
		current[id] = r
		changes[k*len(changes)/len(changed)] = append(changes[k*len(changes)/len(changed)], r)
	}
	keyed = append(keyed, write("load", load))
	for i, rows := range changes {
		keyed = append(keyed, write(fmt.Sprint("changes", i), rows))
	}
	live := slices.DeleteFunc(current, func(r row) bool { return r.marker })
	for i := range live {
		live[i].version = 0
	}
	return keyed, []string{write("merged", live)}
}
