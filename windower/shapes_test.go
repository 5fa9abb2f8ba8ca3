package windower

// The differential test over the shapes users have: many containers and
// blocks (down to 7 rows a block), string columns of every length (empty,
// one byte, multi-byte UTF-8, kilobytes), NULLs, WHERE filters that keep
// none, some or all rows, input that streams sorted, and grants small
// enough to spill. Small inputs are checked against the reference
// evaluator; large ones against RunRecords over the same rows in one
// batch (itself checked against the reference by TestDifferential).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// shapeSchema is diffSchema plus u, a string column of mostly distinct
// values of random length.
var shapeSchema = arrow.NewSchema(append(slices.Clone(diffSchema.Fields()),
	arrow.Field{Name: "u", Type: arrow.BinaryTypes.String, Nullable: true}), nil)

// shapePool holds the values of s: few, so that they tie and partition,
// of every length class.
var shapePool = []string{"", "a", "b", "é", "日本語", "naïve café", "🙂🙃", "ab",
	strings.Repeat("x", 100), strings.Repeat("é", 700), strings.Repeat("ab🙂", 300)}

var shapeRunes = []rune("aZ09 _-éß日本語🙂\u0301")

// randomString is a string of random length (sometimes empty, sometimes
// long) of one- to four-byte UTF-8 characters.
func randomString(rng *rand.Rand) string {
	n := rng.IntN(12)
	switch rng.IntN(10) {
	case 0:
		n = 0
	case 1:
		n = 100 + rng.IntN(2000)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(shapeRunes[rng.IntN(len(shapeRunes))])
	}
	return b.String()
}

// shapeTable makes n rows of shapeSchema, as randomTable does but with the
// string columns of shapePool and randomString.
func shapeTable(rng *rand.Rand, n int) *refTable {
	t := &refTable{cols: map[string][]refVal{}, n: n, micros: map[string]int64{"t": 1, "c": 1, "d": 86400e6}}
	null := func(p float64) bool { return rng.Float64() < p }
	// f's infinities and NaN come from a stream of their own, which takes
	// nothing from rng: the other values are those the tests had before.
	specials := rand.New(rand.NewPCG(uint64(n), 0x1f))
	for i := 0; i < n; i++ {
		t.cols["id"] = append(t.cols["id"], refVal{i: int64(i), kind: kindInt})
		g := refVal{null: null(0.05), kind: kindInt}
		if !g.null && rng.IntN(2) == 0 {
			g.i = int64(rng.IntN(6))
		}
		t.cols["g"] = append(t.cols["g"], g)
		t.cols["x"] = append(t.cols["x"], refVal{null: null(0.15), i: int64(rng.IntN(12)) - 3, kind: kindInt})
		f := refVal{null: null(0.15), f: float64(rng.IntN(20))/4 - 1, kind: kindFloat}
		if u := specials.IntN(75); u < 3 {
			f.f = []float64{math.Inf(1), math.Inf(-1), math.NaN()}[u]
		}
		t.cols["f"] = append(t.cols["f"], f)
		t.cols["t"] = append(t.cols["t"], refVal{null: null(0.1), i: int64(rng.IntN(30)) * 1e6, kind: kindInt})
		t.cols["s"] = append(t.cols["s"], refVal{null: null(0.1), s: shapePool[rng.IntN(len(shapePool))], kind: kindString})
		t.cols["c"] = append(t.cols["c"], refVal{null: null(0.1), i: calendarDay(rng)*86400e6 + int64([]int{0, 1, 11, 23}[rng.IntN(4)])*3600e6, kind: kindInt})
		t.cols["d"] = append(t.cols["d"], refVal{null: null(0.1), i: calendarDay(rng), kind: kindInt})
		t.cols["u"] = append(t.cols["u"], refVal{null: null(0.1), s: randomString(rng), kind: kindString})
	}
	for name, vals := range t.cols {
		for i := range vals {
			if vals[i].null {
				vals[i] = refVal{null: true, kind: vals[i].kind}
			}
		}
		t.cols[name] = vals
	}
	return t
}

// records builds the rows of t at the positions rows, as one batch.
func (t *refTable) records(rows []int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), shapeSchema)
	defer b.Release()
	for _, r := range rows {
		for c, f := range shapeSchema.Fields() {
			v := t.cols[f.Name][r]
			if v.null {
				b.Field(c).AppendNull()
				continue
			}
			switch fb := b.Field(c).(type) {
			case *array.Int64Builder:
				fb.Append(v.i)
			case *array.Int32Builder:
				fb.Append(int32(v.i))
			case *array.Float64Builder:
				fb.Append(v.f)
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(v.i))
			case *array.Date32Builder:
				fb.Append(arrow.Date32(v.i))
			case *array.StringBuilder:
				fb.Append(v.s)
			}
		}
	}
	return b.NewRecordBatch()
}

// filtered returns the rows of t that pass where, ids kept.
func (t *refTable) filtered(where []messages.Predicate) *refTable {
	out := &refTable{cols: map[string][]refVal{}, micros: t.micros}
	for r := 0; r < t.n; r++ {
		if !refFilter(t, where, r) {
			continue
		}
		for name, vals := range t.cols {
			out.cols[name] = append(out.cols[name], vals[r])
		}
		out.n++
	}
	return out
}

// shapeWheres keep no row, some rows (NULLs out), and every row.
var shapeWheres = [][]messages.Predicate{
	nil,
	{{Left: messages.Expr{Column: "id"}, Op: "<", Right: &messages.Value{Int: i64(0)}}},
	{{Left: messages.Expr{Column: "id"}, Op: ">=", Right: &messages.Value{Int: i64(0)}}},
	{{Left: messages.Expr{Column: "x"}, Op: ">", Right: &messages.Value{Int: i64(2)}}},
	{{Left: messages.Expr{Column: "u"}, Op: messages.OpIsNotNull}},
	{{Left: messages.Expr{Column: "g"}, Op: "<>", Right: &messages.Value{Int: i64(0)}}, {Left: messages.Expr{Column: "s"}, Op: messages.OpIsNotNull}},
}

// shape is one input layout of a shapes case.
type shape struct {
	n, containers, blockRows int
	sorted                   bool  // one container sorted on (g, id); the calls are PARTITION BY g ORDER BY id
	grant                    int64 // 0: the default
}

func (s shape) String() string {
	return fmt.Sprintf("n=%d containers=%d block=%d sorted=%v grant=%d", s.n, s.containers, s.blockRows, s.sorted, s.grant)
}

// writeShape writes the rows of t as the containers of s and returns their
// directories.
func writeShape(t *testing.T, dir string, ref *refTable, s shape) []string {
	t.Helper()
	rows := make([]int, ref.n)
	for i := range rows {
		rows[i] = i
	}
	var key columnar.SortKey
	if s.sorted {
		g := ref.cols["g"]
		slices.SortFunc(rows, func(a, b int) int {
			if c := refCompare(g[a], g[b], false); c != 0 {
				return c
			}
			return cmpInt(int64(a), int64(b))
		})
		key = columnar.SortKey{{Name: "g"}, {Name: "id"}}
	}
	var dirs []string
	per := (len(rows) + s.containers - 1) / max(1, s.containers)
	for c := 0; c < s.containers; c++ {
		lo, hi := min(len(rows), c*per), min(len(rows), (c+1)*per)
		if lo == hi && c > 0 {
			break
		}
		rec := ref.records(rows[lo:hi])
		d := filepath.Join(dir, fmt.Sprintf("c%04d", c))
		w, err := columnar.Create(d, columnar.WriterOptions{Table: "t", Projection: "p", ID: filepath.Base(d),
			Schema: shapeSchema, SortKey: key, BlockRows: s.blockRows})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		dirs = append(dirs, d)
	}
	return dirs
}

// shapeQuery makes a query over shapeSchema: id, the string columns as
// they are, and 1-3 random window calls, some reading u.
func shapeQuery(rng *rand.Rand, s shape) (*messages.WindowQuery, []*messages.WindowCall) {
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")}, {Alias: "s", Expr: col("s")}, {Alias: "u", Expr: col("u")}}}
	q.Where = shapeWheres[rng.IntN(len(shapeWheres))]
	var calls []*messages.WindowCall
	for k := 1 + rng.IntN(3); k > 0; k-- {
		w := randomCall(rng)
		for _, a := range w.Args {
			if a.Column == "s" && rng.IntN(2) == 0 {
				a.Column = "u"
			}
		}
		if s.n > refMaxRows && !s.sorted {
			// Checked against RunRecords, whose sort breaks ties in
			// another order than a spilled run's merge: SQL leaves the
			// order of peers open, so order-sensitive calls get a total
			// order.
			deterministic(w)
		}
		if s.sorted {
			w.PartitionBy = []messages.Expr{{Column: "g"}}
			w.OrderBy = []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}
			if w.Frame != nil {
				w.Frame = randomFrame(rng, w.OrderBy)
			}
		}
		calls = append(calls, w)
		q.Select = append(q.Select, messages.SelectItem{Alias: fmt.Sprintf("w%d", len(calls)), Window: w})
	}
	return q, calls
}

// stringKeyQuery is a query each shape read through the block cache runs
// beside its random ones (and draws nothing from the shape's stream, so
// that a seed's cases stay as they were): aggregates over the whole
// partition by a lone string key, of a few values (s) and of nearly all
// distinct (u), which such a run numbers from the containers'
// dictionaries (keydict.go).
func stringKeyQuery() (*messages.WindowQuery, []*messages.WindowCall) {
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")}, {Alias: "s", Expr: col("s")}, {Alias: "u", Expr: col("u")}}}
	calls := []*messages.WindowCall{
		{Func: "count", Star: true, PartitionBy: []messages.Expr{{Column: "u"}}},
		{Func: "sum", Args: []*messages.Expr{col("x")}, PartitionBy: []messages.Expr{{Column: "u"}}},
		{Func: "min", Args: []*messages.Expr{col("f")}, PartitionBy: []messages.Expr{{Column: "s"}}},
		{Func: "count", Args: []*messages.Expr{col("u")}, PartitionBy: []messages.Expr{{Column: "s"}}},
	}
	for i, w := range calls {
		q.Select = append(q.Select, messages.SelectItem{Alias: fmt.Sprintf("w%d", i+1), Window: w})
	}
	return q, calls
}

// refMaxRows is the largest input checked against the reference evaluator,
// which is quadratic in the partition size.
const refMaxRows = 1200

// TestShapesDifferential runs random queries over random shapes of input
// (sizes, containers, blocks, sorted or not, the smallest grant) at each
// thread count, against the reference evaluator or RunRecords. Its random
// cases come from seed 21; STRATA_SHAPES_SEED=N runs those of seed N, to
// soak the same checks over other cases, and STRATA_SHAPES_ITERATION=I
// runs only iteration I of them (the rest are drawn, not run), to rerun a
// failing case alone.
func TestShapesDifferential(t *testing.T) {
	parallelSmall(t)
	seed := uint64(21)
	if s := os.Getenv("STRATA_SHAPES_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRATA_SHAPES_SEED=%q: %v", s, err)
		}
	}
	only := -1
	if s := os.Getenv("STRATA_SHAPES_ITERATION"); s != "" {
		var err error
		if only, err = strconv.Atoi(s); err != nil {
			t.Fatalf("STRATA_SHAPES_ITERATION=%q: %v", s, err)
		}
	}
	small, large := 400, 24
	if testing.Short() {
		small, large = 60, 4
	}
	dicts := keyDictsUsed.Load()
	shapesDifferential(t, seed, only, small, large)
	if keyDictsUsed.Load() == dicts && only < 0 {
		t.Error("no query was numbered from a cached dictionary of its string key")
	}
}

// TestShapesPinned runs cases of other seeds that found bugs, each alone:
// blocks of 8Ki rows of long strings at the smallest grant, spilled.
//   - seed 101, 403: a merge in passes whose intermediate blocks were
//     larger than planned (an internal error), and the recycled buffers
//     of the input's blocks kept while the first stage's buckets were
//     evaluated (the grant overrun, on more than one thread);
//   - seed 107, 400: range buckets' block buffers sized from their first
//     piece (the grant overrun);
//   - seed 112, 403: a reader holding the last block's buffers beside the
//     next block's, of strings of other sizes (the grant overrun);
//   - seed 108, 408: blocks of long strings read in a grant with no room
//     left for range buckets' blocks (the grant overrun; now the sorted
//     runs);
//   - seed 110, 412: block buffers sized for all of their room, sealed
//     after every chunk, and past it within one (the grant overrun);
//   - seeds 105, 417 and 110, 413: in memory on one thread, spilled on
//     more (a reader's block a thread did not fit beside the input), and
//     the two paths order ties differently.
func TestShapesPinned(t *testing.T) {
	parallelSmall(t)
	for _, c := range []struct {
		seed uint64
		it   int
	}{{101, 403}, {107, 400}, {108, 408}, {110, 412}, {112, 403}, {105, 417}, {110, 413}, {120, 421}, {125, 329}, {130, 405}, {163, 413}} {
		t.Run(fmt.Sprintf("seed=%d/iteration=%d", c.seed, c.it), func(t *testing.T) {
			shapesDifferential(t, c.seed, c.it, 400, 24)
		})
	}
}

// shapesDifferential runs TestShapesDifferential's cases of seed: small
// iterations of small inputs, then large of large ones; only iteration
// only if it is not negative.
func shapesDifferential(t *testing.T, seed uint64, only, small, large int) {
	rng := rand.New(rand.NewPCG(seed, 22))
	sizes := []int{0, 1, 2, 7, 40, 150, 600, refMaxRows}
	blocks := []int{7, 64, 1000, columnar.DefaultBlockRows}
	var shapes, queries, refused, cachedRuns int
	// Every other shape's runs share a block cache, small enough that
	// the larger inputs read around it and the others evict: the runs
	// after the first of a query take blocks the first kept.
	cache := columnar.NewBlockCache(16 << 20)
	// Two shapes in three borrow their columns from a pool that lends
	// buffers of every size, so that runs in memory take buffers an
	// earlier run wrote (and, built with strata_poison, every lent buffer
	// reads as garbage until written): a value read before the run wrote
	// it fails the comparison.
	pool := bufpool.New(16 << 20).WithMinBytes(1)
	var current string // the query being run, for failures that do not name it
	defer func() {
		if t.Failed() && current != "" {
			t.Logf("while running %s", current)
		}
	}()
	for it := 0; it < small+large; it++ {
		s := shape{n: sizes[rng.IntN(len(sizes))], containers: 1 + rng.IntN(20), blockRows: blocks[rng.IntN(len(blocks))]}
		if it >= small {
			s.n = []int{5000, 20000, 50000}[rng.IntN(3)]
			s.blockRows = blocks[1+rng.IntN(len(blocks)-1)]
		}
		if rng.IntN(4) == 0 {
			s.containers, s.sorted = 1, true
		}
		if rng.IntN(3) == 0 {
			s.grant = MinGrant
		}
		ref := shapeTable(rng, s.n)
		if only >= 0 && it != only {
			shapeQuery(rng, s)
			shapeQuery(rng, s)
			continue
		}
		dirs := writeShape(t, filepath.Join(t.TempDir(), "in"), ref, s)
		shapes++
		for qi := 0; qi < 3; qi++ {
			if qi == 2 && it%2 != 0 {
				break // a shape read around the cache numbers by hashing, as its random queries do
			}
			var q *messages.WindowQuery
			var calls []*messages.WindowCall
			if qi < 2 {
				q, calls = shapeQuery(rng, s)
			} else {
				q, calls = stringKeyQuery()
			}
			queries++
			label := fmt.Sprintf("iteration %d.%d (%s, where %v)", it, qi, s, q.Where)
			current = label + "\n" + describeCalls(calls)
			want := shapeWant(t, ref, q, calls)
			var first []string
			for _, threads := range threadCounts {
				o := Options{Grant: s.grant, TempDir: t.TempDir(), Threads: threads}
				if it%2 == 0 {
					o.BlockCache = cache
				}
				if it%3 != 2 {
					o.VectorPool = pool
				}
				res, err := Run(context.Background(), q, dirs, o)
				if err != nil {
					if s.grant == MinGrant && errors.Is(err, ErrGrantTooSmall) {
						// Blocks of long strings (8Ki rows of a few hundred
						// bytes) can be most of the smallest grant: refused
						// with the reason, never run over the grant.
						if threads == threadCounts[0] {
							refused++
						}
						continue
					}
					if s.n <= refMaxRows && refOverflows(ref.filtered(q.Where), calls) {
						continue
					}
					t.Fatalf("%s, threads %d: %v\n%s", label, threads, err, describeCall(calls[0]))
				}
				got, rows, err := readResultErr(t, res, 0)
				st := res.Stats()
				res.Close()
				if err != nil {
					t.Fatalf("%s, threads %d: %v\n%s", label, threads, err, describeCalls(calls))
				}
				if st.BlocksCached > 0 {
					cachedRuns++
					if o.BlockCache == nil || st.SpilledBytes > 0 {
						t.Fatalf("%s, threads %d: %d blocks from a cache the run had no use for (spilled %d bytes)", label, threads, st.BlocksCached, st.SpilledBytes)
					}
				}
				if s.grant > 0 && st.PeakBytes > s.grant {
					t.Errorf("%s, threads %d: peak %d bytes over the %d-byte grant\n%s", label, threads, st.PeakBytes, s.grant, describeCalls(calls))
				}
				if first == nil {
					first = rows
				} else if !slices.Equal(rows, first) {
					at := 0
					for at < min(len(rows), len(first)) && rows[at] == first[at] {
						at++
					}
					var a, b string
					if at < len(first) {
						a = first[at]
					}
					if at < len(rows) {
						b = rows[at]
					}
					t.Fatalf("%s: threads %d returned other rows or another order than threads %d (%d rows against %d): row %d is %q against %q\n%s",
						label, threads, threadCounts[0], len(rows), len(first), at, b, a, describeCalls(calls))
				}
				if threads != threadCounts[0] {
					continue // the same rows as the run checked below
				}
				if want == nil {
					continue // overflow in the oracle
				}
				// Spilled, a query of several window groups evaluates each
				// in a stage of its own, whose peers come in the order the
				// stage before left them, not in input order as in memory
				// and in the reference (doc.go): calls that see the order
				// of peers are checked across thread counts only.
				peersOpen := s.n <= refMaxRows && st.SpilledBytes > 0 && severalGroups(q)
				for c, it := range q.Select {
					if peersOpen && it.Window != nil && seesPeerOrder(it.Window) {
						continue
					}
					if len(got[c]) != len(want[c]) {
						t.Fatalf("%s: column %s: %d rows, want %d", label, it.Alias, len(got[c]), len(want[c]))
					}
					for id, w := range want[c] {
						if g, ok := got[c][id]; !ok || !sameValue(g, w) {
							what := it.Alias
							if it.Window != nil {
								what = describeCall(it.Window)
							}
							t.Fatalf("%s: %s: row id %d: got %+v, want %+v", label, what, id, short(g), short(w))
						}
					}
				}
			}
		}
	}
	ps := pool.Stats()
	t.Logf("%d data shapes, %d queries (%d refused: grant too small for the input's blocks), %d runs took blocks from the cache; the pool lent %d buffers again and made %d",
		shapes, queries, refused, cachedRuns, ps.Lent, ps.Made)
	if only < 0 && refused > queries/10 {
		t.Errorf("%d of %d queries refused for the grant", refused, queries)
	}
	if only < 0 && shapes > 1 && cachedRuns == 0 {
		t.Errorf("no run of %d shapes took a block from the cache", shapes)
	}
	if only < 0 && shapes > 2 && ps.Lent == 0 {
		t.Errorf("no run of %d shapes borrowed a buffer an earlier one returned", shapes)
	}
}

// shapeWant computes the expected result columns of q, keyed by id: from
// the reference evaluator for small inputs, else from RunRecords over the
// rows in one batch. nil: the oracle overflowed.
func shapeWant(t *testing.T, ref *refTable, q *messages.WindowQuery, calls []*messages.WindowCall) []map[int64]refVal {
	t.Helper()
	want := make([]map[int64]refVal, len(q.Select))
	if ref.n > refMaxRows {
		rows := make([]int, ref.n)
		for i := range rows {
			rows[i] = i
		}
		rec := ref.records(rows)
		defer rec.Release()
		res, err := RunRecords(context.Background(), q, shapeSchema, []arrow.RecordBatch{rec}, Options{Grant: 1 << 30, Threads: 1})
		if err != nil {
			t.Fatalf("oracle: %v", err)
		}
		defer res.Close()
		return resultColumns(t, res, 0)
	}
	kept := ref.filtered(q.Where)
	if refOverflows(kept, calls) {
		return nil
	}
	ids := kept.cols["id"]
	k := 0
	for c, it := range q.Select {
		want[c] = map[int64]refVal{}
		var vals []refVal
		if it.Window != nil {
			vals = refWindow(kept, calls[k])
			k++
		} else {
			vals = kept.cols[it.Expr.Column]
		}
		for r, v := range vals {
			want[c][ids[r].i] = v
		}
	}
	return want
}

// refOverflows reports whether the reference overflows on any call.
func refOverflows(t *refTable, calls []*messages.WindowCall) bool {
	for _, w := range calls {
		for _, v := range refWindow(t, w) {
			if v.null && v.s == "overflow" {
				return true
			}
		}
	}
	return false
}

// short abbreviates a long string value for a failure message.
func short(v refVal) refVal {
	if len(v.s) > 40 {
		v.s = fmt.Sprintf("%q...(%d bytes)", v.s[:40], len(v.s))
	}
	return v
}

// TestStringsAcrossBlocks is the reproduction of wrong strings: a string
// column spanning several blocks, selected as it is through a window
// query, came back with values of other blocks.
func TestStringsAcrossBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ref := shapeTable(rng, 20000)
	dirs := writeShape(t, t.TempDir(), ref, shape{n: ref.n, containers: 1, blockRows: 2000})
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")}, {Alias: "u", Expr: col("u")},
		{Alias: "n", Window: &messages.WindowCall{Func: "count", Star: true, PartitionBy: []messages.Expr{{Column: "s"}}}}}}
	res, err := Run(context.Background(), q, dirs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	got := resultValues(t, res, 0, 1)
	if len(got) != ref.n {
		t.Fatalf("%d rows, want %d", len(got), ref.n)
	}
	for id, v := range ref.cols["u"] {
		if !sameValue(got[int64(id)], v) {
			t.Fatalf("row id %d: got %+v, want %+v", id, short(got[int64(id)]), short(v))
		}
	}
}

// TestEmptyFilteredInput is the reproduction of the empty-input crash: an
// ORDER BY window over input that WHERE empties panicked in markChanges.
func TestEmptyFilteredInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ref := shapeTable(rng, 3000)
	for _, s := range []shape{{n: ref.n, containers: 1, blockRows: 100}, {n: ref.n, containers: 3, blockRows: 7}, {n: ref.n, containers: 1, blockRows: 100, sorted: true}} {
		dirs := writeShape(t, t.TempDir(), ref, s)
		for _, grant := range []int64{0, MinGrant} {
			q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
				{Alias: "id", Expr: col("id")},
				{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
				{Alias: "rk", Window: &messages.WindowCall{Func: "rank", PartitionBy: []messages.Expr{{Column: "g"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "u"}}}}},
				{Alias: "lg", Window: &messages.WindowCall{Func: "lag", Args: []*messages.Expr{col("u")}, PartitionBy: []messages.Expr{{Column: "g"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
			}, Where: []messages.Predicate{{Left: messages.Expr{Column: "id"}, Op: "<", Right: &messages.Value{Int: i64(0)}}}}
			res, err := Run(context.Background(), q, dirs, Options{Grant: grant, TempDir: t.TempDir()})
			if err != nil {
				t.Fatalf("%s grant %d: %v", s, grant, err)
			}
			if rows := drain(t, res); len(rows) != 0 {
				t.Errorf("%s grant %d: %d rows, want 0", s, grant, len(rows))
			}
			res.Close()
		}
	}
}

// TestSortedStreamLongStringBlocks runs a window query over a container
// sorted on (g, id) whose blocks of 8192 rows hold long strings, some 5
// to 7MB a block, in grants a few blocks large. It must run within the
// grant or be refused as too small (ErrGrantTooSmall), never fail for
// going over it:
//   - The sorted stream appends a block whole to its buffer, so it may
//     hold a block's rows beyond its size. Sized without them, in the
//     smallest grant, it took the grant and the reader's block past the
//     limit, and the evaluation's first reservation failed ("memory
//     budget exceeded"); it is now refused there.
//   - The choice to run in memory did not count what loading holds
//     beside the input: a block on each reader and the buffers kept to
//     recycle. At 20000 rows in 32MiB the load failed ("they hold ...
//     more than estimated").
//   - In 64MiB, 60000 rows are too many for memory and stream.
func TestSortedStreamLongStringBlocks(t *testing.T) {
	cases := []struct {
		rows, strRepeats int
		grant            int64
		mustRun          bool
	}{
		{rows: 60000, strRepeats: 30, grant: MinGrant},
		{rows: 20000, strRepeats: 45, grant: 4 * MinGrant},
		{rows: 60000, strRepeats: 30, grant: 8 * MinGrant, mustRun: true},
	}
	q, err := sqlparse.Parse("SELECT id, u, lag(x) OVER (PARTITION BY g ORDER BY id) AS w FROM t WHERE s IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		ref := shapeTable(rand.New(rand.NewPCG(31, 32)), c.rows)
		for i, v := range ref.cols["u"] {
			if !v.null {
				ref.cols["u"][i].s = strings.Repeat("long string ", c.strRepeats+i%5)
			}
		}
		dirs := writeShape(t, t.TempDir(), ref, shape{n: ref.n, containers: 1, blockRows: columnar.DefaultBlockRows, sorted: true})
		want := ref.filtered(q.Where).n
		for _, threads := range []int{1, 2} {
			label := fmt.Sprintf("%d rows of %d-byte strings, grant %d, threads %d", c.rows, 12*c.strRepeats, c.grant, threads)
			res, err := Run(context.Background(), q, dirs, Options{Grant: c.grant, TempDir: t.TempDir(), Threads: threads})
			if errors.Is(err, ErrGrantTooSmall) && !c.mustRun {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			_, rows := readResult(t, res, 0)
			st := res.Stats()
			res.Close()
			if len(rows) != want || st.PeakBytes > c.grant {
				t.Errorf("%s: %d rows (want %d), peak %d bytes", label, len(rows), want, st.PeakBytes)
			}
		}
	}
}

// TestRepeatedOrderKeySpilled runs windows whose ORDER BY repeats a column
// in the other direction (ORDER BY t, t DESC NULLS FIRST: the repeat
// orders nothing the first use did not) over input that spills, against
// the same query in memory. The sorted runs left the repeat out of their
// sort key while the window group kept it, and the spilled running count
// and cume_dist came out wrong on half the rows. STRATA_SHAPES_SEED=106
// found it.
func TestRepeatedOrderKeySpilled(t *testing.T) {
	spilledAsInMemory(t,
		"SELECT id, s, u, count(*) OVER (PARTITION BY g ORDER BY t, t DESC NULLS FIRST) AS w FROM t",
		"SELECT id, s, u, cume_dist() OVER (PARTITION BY g ORDER BY t, t DESC NULLS FIRST) AS w FROM t WHERE x > 2",
		"SELECT id, s, u, rank() OVER (PARTITION BY g, g ORDER BY t DESC, x, t) AS w FROM t",
	)
}

// TestInfiniteFloatOffsetSpilled runs frames of infinite RANGE offsets
// over a float key holding infinities and NaN (f) on partitions larger
// than a spilling query's buffer, whose bounds cursors find, against the
// same query in memory: the cursors took +inf minus inf as NaN, where
// PostgreSQL has every key but NaN within range (floatTarget).
// STRATA_SHAPES_SEED=110 found it.
func TestInfiniteFloatOffsetSpilled(t *testing.T) {
	spilledAsInMemory(t,
		"SELECT id, s, u, count(*) OVER (PARTITION BY g ORDER BY f RANGE BETWEEN 0.5 PRECEDING AND 'Infinity'::float8 PRECEDING EXCLUDE TIES) AS w FROM t",
		"SELECT id, s, u, count(*) OVER (PARTITION BY g ORDER BY f DESC RANGE BETWEEN 'Infinity'::float8 FOLLOWING AND 'Infinity'::float8 FOLLOWING) AS w FROM t",
		"SELECT id, s, u, sum(x) OVER (PARTITION BY g ORDER BY f RANGE BETWEEN 'Infinity'::float8 PRECEDING AND 1 FOLLOWING) AS w FROM t",
	)
}

// TestBucketsSealLongStrings spills a window partitioned by id % 400
// whose rows of keys below 40 carry 4800-byte strings, the rest short
// ones, so that the range buckets of those keys fill their block buffers,
// sized for the average row, with long strings. The buffers are sealed
// (sealIfOver) when they would pass their room, and the rest of each
// bucket's rows go to a part of its own: here, with the bound lowered,
// after most chunks, and the result is still the query's in memory,
// within the grant. Before sealing, such buffers went past the grant
// (STRATA_SHAPES_SEED=107 found it).
func TestBucketsSealLongStrings(t *testing.T) {
	ref := longStringsTable()
	for _, percent := range []int64{100, 20} {
		sealPercent = percent
		seals := bucketSeals.Load()
		spilledAsInMemoryOver(t, ref, shape{n: ref.n, containers: 5, blockRows: 64}, MinGrant,
			"SELECT id, s, u, lag(x) OVER (PARTITION BY id % 400 ORDER BY id) AS w FROM t",
			"SELECT id, s, u, count(u) OVER (PARTITION BY id % 400 ORDER BY x, id) AS w FROM t")
		if percent < 100 && bucketSeals.Load() == seals {
			t.Errorf("no range bucket was sealed at %d%% of the buffers' room", percent)
		}
	}
	sealPercent = 100
}

// TestRepeatedLongStringsSpilled spills queries whose results repeat a
// partition's 4800-byte strings over its rows (first_value, max...), and
// pass the strings on, in the smallest grant: the result's rows must be
// written as they are, without copies held beside them (the result
// writer's partial block held whole copies of the buffer's results, a
// peak of 8.9MB in 8MiB).
func TestRepeatedLongStringsSpilled(t *testing.T) {
	spilledAsInMemoryOver(t, longStringsTable(), shape{n: 20000, containers: 5, blockRows: 64}, MinGrant,
		"SELECT id, s, u, first_value(u) OVER (PARTITION BY id % 400 ORDER BY id) AS w FROM t",
		"SELECT id, s, u, last_value(u) OVER (PARTITION BY id % 400 ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS w FROM t",
		"SELECT id, s, u, max(u) OVER (PARTITION BY id % 400) AS w FROM t",
		"SELECT id, s, u, lag(u) OVER (PARTITION BY id % 400 ORDER BY x) AS w FROM t")
}

// longStringsTable is 20000 rows of shapeTable whose u is a 4800-byte
// string on the rows whose keys id % 400 are below 40.
func longStringsTable() *refTable {
	ref := shapeTable(rand.New(rand.NewPCG(35, 36)), 20000)
	for i, v := range ref.cols["u"] {
		if !v.null && i%400 < 40 {
			ref.cols["u"][i].s = strings.Repeat("long string ", 400)
		}
	}
	return ref
}

// spilledAsInMemory runs each query over 20000 rows of shapeTable in five
// containers in the smallest grant, where it spills, and in 1GiB, where
// it does not, and fails on the first row whose window value differs, or
// if the spilled run's peak passes its grant. The queries select id, s, u
// and the window w.
func spilledAsInMemory(t *testing.T, sqls ...string) {
	t.Helper()
	ref := shapeTable(rand.New(rand.NewPCG(33, 34)), 20000)
	spilledAsInMemoryOver(t, ref, shape{n: ref.n, containers: 5, blockRows: 64}, MinGrant, sqls...)
}

// spilledAsInMemoryOver is spilledAsInMemory over ref, written as s,
// spilled in grant.
func spilledAsInMemoryOver(t *testing.T, ref *refTable, s shape, grant int64, sqls ...string) {
	t.Helper()
	dirs := writeShape(t, t.TempDir(), ref, s)
	for _, sql := range sqls {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		run := func(grant int64) (map[string]string, Stats) {
			res, err := Run(context.Background(), q, dirs, Options{Grant: grant, TempDir: t.TempDir(), Threads: 2})
			if err != nil {
				t.Fatalf("%s, grant %d: %v", sql, grant, err)
			}
			defer res.Close()
			byID := map[string]string{}
			for _, row := range drain(t, res) {
				id, rest, _ := strings.Cut(row, "|")
				byID[id] = rest
			}
			return byID, res.Stats()
		}
		want, _ := run(1 << 30)
		got, st := run(grant)
		if st.SpilledBytes == 0 {
			t.Fatalf("%s: did not spill in %d bytes", sql, grant)
		}
		if st.PeakBytes > grant {
			t.Errorf("%s: peak %d bytes over the %d-byte grant", sql, st.PeakBytes, grant)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows spilled, %d in memory", sql, len(got), len(want))
		}
		for id, w := range want {
			if got[id] != w {
				// The window's value, after s and u (which can be long).
				value := func(row string) string { return strings.Split(row, "|")[2] }
				t.Fatalf("%s: row id %s: spilled %s, in memory %s", sql, id, value(got[id]), value(w))
			}
		}
	}
}
