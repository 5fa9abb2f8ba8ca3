package windower

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/messages"
)

var diffSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "g", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	// c and d: timestamps and dates around month ends, for RANGE frames
	// with calendar intervals.
	{Name: "c", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
}, nil)

// calendarDay returns a random day near the end or start of a month of
// 2000, 2023 or 2024 (leap years, and one that is not), as days since 1970.
func calendarDay(rng *rand.Rand) int64 {
	y := []int{2000, 2023, 2024, 2024}[rng.IntN(4)]
	m := time.Month([]int{1, 2, 3, 12}[rng.IntN(4)])
	d := []int{1, 15, 28, 29, 30, 31}[rng.IntN(6)] // Feb 30 is Mar 1 or 2: fine
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// calendarOffsets are the RANGE offsets on c and d: months, days and
// time, some with fields of different signs (none negative overall).
var calendarOffsets = []messages.Interval{
	{}, {Months: 1}, {Months: 2}, {Months: 12}, {Days: 1}, {Micros: 12 * 3600e6}, {Micros: 90 * 60e6},
	{Months: 1, Days: 1}, {Months: 1, Days: -30}, {Months: 1, Days: -1}, {Days: 1, Micros: -3600e6},
	{Months: 1, Micros: 36 * 3600e6}, {Months: -1, Days: 45},
}

// randomTable makes n rows with NULLs, many ties and skewed partitions.
func randomTable(rng *rand.Rand, n int) (*refTable, arrow.RecordBatch) {
	t := &refTable{cols: map[string][]refVal{}, n: n, micros: map[string]int64{"t": 1, "c": 1, "d": 86400e6}}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), diffSchema)
	defer b.Release()
	null := func(p float64) bool { return rng.Float64() < p }
	for i := 0; i < n; i++ {
		t.cols["id"] = append(t.cols["id"], refVal{i: int64(i), kind: kindInt})
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		// g: skewed: half the rows in partition 0.
		if null(0.05) {
			t.cols["g"] = append(t.cols["g"], refVal{null: true, kind: kindInt})
			b.Field(1).AppendNull()
		} else {
			g := int64(0)
			if rng.IntN(2) == 0 {
				g = int64(rng.IntN(6))
			}
			t.cols["g"] = append(t.cols["g"], refVal{i: g, kind: kindInt})
			b.Field(1).(*array.Int32Builder).Append(int32(g))
		}
		if null(0.15) {
			t.cols["x"] = append(t.cols["x"], refVal{null: true, kind: kindInt})
			b.Field(2).AppendNull()
		} else {
			x := int64(rng.IntN(12)) - 3
			t.cols["x"] = append(t.cols["x"], refVal{i: x, kind: kindInt})
			b.Field(2).(*array.Int64Builder).Append(x)
		}
		if null(0.15) {
			t.cols["f"] = append(t.cols["f"], refVal{null: true, kind: kindFloat})
			b.Field(3).AppendNull()
		} else {
			f := float64(rng.IntN(20))/4 - 1
			t.cols["f"] = append(t.cols["f"], refVal{f: f, kind: kindFloat})
			b.Field(3).(*array.Float64Builder).Append(f)
		}
		if null(0.1) {
			t.cols["t"] = append(t.cols["t"], refVal{null: true, kind: kindInt})
			b.Field(4).AppendNull()
		} else {
			ts := int64(rng.IntN(30)) * 1e6
			t.cols["t"] = append(t.cols["t"], refVal{i: ts, kind: kindInt})
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
		}
		if null(0.1) {
			t.cols["s"] = append(t.cols["s"], refVal{null: true, kind: kindString})
			b.Field(5).AppendNull()
		} else {
			s := string(rune('a' + rng.IntN(8)))
			t.cols["s"] = append(t.cols["s"], refVal{s: s, kind: kindString})
			b.Field(5).(*array.StringBuilder).Append(s)
		}
		if null(0.1) {
			t.cols["c"] = append(t.cols["c"], refVal{null: true, kind: kindInt})
			b.Field(6).AppendNull()
		} else {
			// Times that a month later can fall on the same clamped day
			// in the other order (Jan 30 23:00, Jan 31 01:00).
			c := calendarDay(rng)*86400e6 + int64([]int{0, 1, 11, 23}[rng.IntN(4)])*3600e6
			t.cols["c"] = append(t.cols["c"], refVal{i: c, kind: kindInt})
			b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(c))
		}
		if null(0.1) {
			t.cols["d"] = append(t.cols["d"], refVal{null: true, kind: kindInt})
			b.Field(7).AppendNull()
		} else {
			d := calendarDay(rng)
			t.cols["d"] = append(t.cols["d"], refVal{i: d, kind: kindInt})
			b.Field(7).(*array.Date32Builder).Append(arrow.Date32(d))
		}
	}
	return t, b.NewRecordBatch()
}

func i64(v int64) *int64             { return &v }
func f64(v float64) *float64         { return &v }
func col(name string) *messages.Expr { return &messages.Expr{Column: name} }
func cint(v int64) *messages.Expr    { return &messages.Expr{Const: &messages.Value{Int: i64(v)}} }

var allFuncs = []string{"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile",
	"lag", "lead", "first_value", "last_value", "nth_value", "count", "count*", "sum", "avg", "min", "max"}

// randomCall makes a valid random window call.
func randomCall(rng *rand.Rand) *messages.WindowCall {
	w := &messages.WindowCall{}
	name := allFuncs[rng.IntN(len(allFuncs))]
	argCols := []string{"x", "f", "t", "s", "id"} // id: an integer never NULL
	numCols := []string{"x", "f", "id"}
	switch name {
	case "count*":
		w.Func, w.Star = "count", true
	case "ntile":
		w.Func, w.Args = name, []*messages.Expr{cint(int64(1 + rng.IntN(5)))}
	case "lag", "lead":
		w.Func = name
		c := []string{"x", "f", "s"}[rng.IntN(3)]
		w.Args = []*messages.Expr{col(c)}
		if rng.IntN(2) == 0 {
			// Offsets within a partition, past every partition, and at
			// the ends of PostgreSQL's integer (TestShiftOffsetsAtInt64Ends
			// has int64's).
			offsets := []int64{-1, 0, 1, 2, 3, -3, 40, 1 << 20, math.MaxInt32, -math.MaxInt32}
			w.Args = append(w.Args, cint(offsets[rng.IntN(len(offsets))]))
			if rng.IntN(2) == 0 && c != "s" {
				w.Args = append(w.Args, cint(99))
			}
		}
	case "first_value", "last_value":
		w.Func, w.Args = name, []*messages.Expr{col(argCols[rng.IntN(len(argCols))])}
	case "nth_value":
		w.Func, w.Args = name, []*messages.Expr{col(argCols[rng.IntN(len(argCols))]), cint(int64(1 + rng.IntN(4)))}
	case "count", "min", "max":
		w.Func, w.Args = name, []*messages.Expr{col(argCols[rng.IntN(len(argCols))])}
	case "sum", "avg":
		w.Func, w.Args = name, []*messages.Expr{col(numCols[rng.IntN(len(numCols))])}
	default:
		w.Func = name
	}
	if messages.IsAggregate(w.Func) && rng.IntN(4) == 0 {
		w.Filter = []messages.Predicate{{Left: messages.Expr{Column: "x"}, Op: ">", Right: &messages.Value{Int: i64(2)}}}
	}
	if rng.IntN(4) != 0 {
		// Integer keys of small range (g, x: a dense table without a sort),
		// of large range (t), float, string and multi-column keys (hashed).
		keys := [][]string{{"g"}, {"g"}, {"x"}, {"t"}, {"f"}, {"s"}, {"g", "s"}, {"s", "f", "x"}}[rng.IntN(8)]
		for _, k := range keys {
			w.PartitionBy = append(w.PartitionBy, messages.Expr{Column: k})
		}
	}
	orderCols := []string{"x", "f", "t", "s", "c", "d"}
	for k := rng.IntN(3); k > 0; k-- {
		w.OrderBy = append(w.OrderBy, messages.SortItem{
			Expr: messages.Expr{Column: orderCols[rng.IntN(len(orderCols))]}, Desc: rng.IntN(2) == 0, NullsFirst: rng.IntN(2) == 0})
	}
	if rng.IntN(5) != 0 {
		w.Frame = randomFrame(rng, w.OrderBy)
	}
	return w
}

func randomFrame(rng *rand.Rand, order []messages.SortItem) *messages.Frame {
	modes := []string{messages.FrameRows, messages.FrameRange}
	if len(order) > 0 {
		modes = append(modes, messages.FrameGroups)
	}
	f := &messages.Frame{Mode: modes[rng.IntN(len(modes))]}
	kinds := []string{messages.BoundUnboundedPreceding, messages.BoundPreceding, messages.BoundCurrentRow, messages.BoundFollowing, messages.BoundUnboundedFollowing}
	rangeOffsets := f.Mode != messages.FrameRange || (len(order) == 1 && order[0].Expr.Column != "s")
	for {
		s, e := rng.IntN(4), 1+rng.IntN(4)
		if e < s {
			continue
		}
		if !rangeOffsets && (s == 1 || s == 3 || e == 1 || e == 3) {
			continue
		}
		f.Start, f.End = messages.FrameBound{Kind: kinds[s]}, messages.FrameBound{Kind: kinds[e]}
		break
	}
	for _, b := range []*messages.FrameBound{&f.Start, &f.End} {
		if b.Kind != messages.BoundPreceding && b.Kind != messages.BoundFollowing {
			continue
		}
		off := int64(rng.IntN(4))
		switch {
		case f.Mode == messages.FrameRange && order[0].Expr.Column == "t":
			b.Offset = &messages.Value{IntervalMicros: i64(off * 3e6)}
		case f.Mode == messages.FrameRange && (order[0].Expr.Column == "c" || order[0].Expr.Column == "d"):
			b.Offset = messages.IntervalValue(calendarOffsets[rng.IntN(len(calendarOffsets))])
		case f.Mode == messages.FrameRange && order[0].Expr.Column == "f":
			fo := float64(off) / 2
			if off == 3 {
				fo = math.Inf(1) // with infinite keys, PostgreSQL's special case
			}
			b.Offset = &messages.Value{Float: f64(fo)}
		default:
			b.Offset = &messages.Value{Int: i64(off)}
		}
	}
	f.Exclude = []string{"", "", messages.ExcludeCurrentRow, messages.ExcludeGroup, messages.ExcludeTies}[rng.IntN(5)]
	return f
}

func sameValue(got, want refVal) bool {
	if got.null || want.null {
		return got.null == want.null
	}
	switch want.kind {
	case kindFloat:
		return floatsClose(got.f, want.f)
	case kindString:
		return got.s == want.s
	}
	return got.i == want.i
}

// resultValues reads column c of the result into refVals keyed by id.
func resultValues(t *testing.T, res *Result, idCol, c int) map[int64]refVal {
	t.Helper()
	out := map[int64]refVal{}
	for {
		rec, err := res.Next()
		if err != nil {
			break
		}
		ids := rec.Column(idCol).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			out[ids.Value(r)] = arrowRefVal(t, rec.Column(c), r)
		}
		rec.Release()
	}
	return out
}

// resultColumns reads every column of the result in one pass (a spilled
// result streams once) into refVals keyed by id.
func resultColumns(t *testing.T, res *Result, idCol int) []map[int64]refVal {
	t.Helper()
	cols, _ := readResult(t, res, idCol)
	return cols
}

// readResult reads every column of the result in one pass into refVals
// keyed by id, and its rows in order as drain has them.
func readResult(t *testing.T, res *Result, idCol int) ([]map[int64]refVal, []string) {
	t.Helper()
	out, rows, err := readResultErr(t, res, idCol)
	if err != nil {
		t.Fatal(err)
	}
	return out, rows
}

// readResultErr is readResult, returning the error of a batch that
// could not be read.
func readResultErr(t *testing.T, res *Result, idCol int) ([]map[int64]refVal, []string, error) {
	t.Helper()
	var out []map[int64]refVal
	var rows []string
	for {
		rec, err := res.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		for len(out) < int(rec.NumCols()) {
			out = append(out, map[int64]refVal{})
		}
		ids := rec.Column(idCol).(*array.Int64)
		for c := range out {
			for r := 0; r < int(rec.NumRows()); r++ {
				out[c][ids.Value(r)] = arrowRefVal(t, rec.Column(c), r)
			}
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			row := ""
			for c := 0; c < int(rec.NumCols()); c++ {
				row += rec.Column(c).ValueStr(r) + "|"
			}
			rows = append(rows, row)
		}
		rec.Release()
	}
	for len(out) < res.Schema().NumFields() {
		out = append(out, map[int64]refVal{})
	}
	return out, rows, nil
}

// arrowRefVal is row r of arr as a refVal. The string is copied: a
// record's buffers do not outlive it.
func arrowRefVal(t *testing.T, arr arrow.Array, r int) refVal {
	t.Helper()
	v := refVal{null: arr.IsNull(r)}
	if v.null {
		return v
	}
	switch a := arr.(type) {
	case *array.Int64:
		v.i, v.kind = a.Value(r), kindInt
	case *array.Int32:
		v.i, v.kind = int64(a.Value(r)), kindInt
	case *array.Timestamp:
		v.i, v.kind = int64(a.Value(r)), kindInt
	case *array.Date32:
		v.i, v.kind = int64(a.Value(r)), kindInt
	case *array.Float64:
		v.f, v.kind = a.Value(r), kindFloat
	case *array.String:
		v.s, v.kind = strings.Clone(a.Value(r)), kindString
	default:
		t.Fatalf("unexpected result type %s", arr.DataType())
	}
	return v
}

func describeCall(w *messages.WindowCall) string {
	q := messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "w", Window: w}}}
	return fmt.Sprintf("%s star=%v args=%s filter=%v part=%v order=%v frame=%s", w.Func, w.Star, argsString(w.Args), len(w.Filter) > 0, w.PartitionBy, q.Select[0].Window.OrderBy, frameString(w.Frame))
}

func frameString(f *messages.Frame) string {
	if f == nil {
		return "default"
	}
	bound := func(b messages.FrameBound) string {
		switch {
		case b.Offset == nil:
			return b.Kind
		case b.Offset.Int != nil:
			return fmt.Sprintf("%d %s", *b.Offset.Int, b.Kind)
		case b.Offset.Float != nil:
			return fmt.Sprintf("%g %s", *b.Offset.Float, b.Kind)
		}
		iv, _ := b.Offset.Interval()
		return fmt.Sprintf("%+v %s", iv, b.Kind)
	}
	return fmt.Sprintf("%s between %s and %s exclude %q", f.Mode, bound(f.Start), bound(f.End), f.Exclude)
}

func argsString(args []*messages.Expr) string {
	s := ""
	for _, a := range args {
		s += exprString(a) + " "
	}
	return s
}

func TestDifferential(t *testing.T) {
	parallelSmall(t)
	rng := rand.New(rand.NewPCG(1, 2))
	iterations := 1500
	if testing.Short() {
		iterations = 80
	}
	for it := 0; it < iterations; it++ {
		n := []int{0, 1, 2, 7, 40, 150}[rng.IntN(6)]
		ref, rec := randomTable(rng, n)
		var calls []*messages.WindowCall
		q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}}}
		for k := 1 + rng.IntN(3); k > 0; k-- {
			w := randomCall(rng)
			calls = append(calls, w)
			q.Select = append(q.Select, messages.SelectItem{Alias: fmt.Sprintf("w%d", len(calls)), Window: w})
		}
		var first []string
		// One thread, then 2, 3 or 4: ranges of one partition cut at
		// other rows.
		for _, threads := range []int{1, 2 + it%3} {
			res, err := RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, Options{Threads: threads})
			if err != nil {
				overflow := false
				for _, w := range calls {
					for _, v := range refWindow(ref, w) {
						if v.null && v.s == "overflow" {
							overflow = true
						}
					}
				}
				if !overflow {
					t.Fatalf("iteration %d, threads %d: %v\n%v", it, threads, err, describeCall(calls[0]))
				}
				continue
			}
			for k, w := range calls {
				want := refWindow(ref, w)
				res.next = 0
				got := resultValues(t, res, 0, k+1)
				if len(got) != n {
					t.Fatalf("iteration %d: %d result rows, want %d", it, len(got), n)
				}
				for id := 0; id < n; id++ {
					if !sameValue(got[int64(id)], want[id]) {
						t.Fatalf("iteration %d (n=%d, threads %d), call %s:\nrow id %d: got %+v, want %+v", it, n, threads, describeCall(w), id, got[int64(id)], want[id])
					}
				}
			}
			res.next = 0
			rows := drain(t, res)
			res.Close()
			if first == nil {
				first = rows
			} else if !slices.Equal(rows, first) {
				t.Fatalf("iteration %d: threads %d returned other rows or another order than one thread", it, threads)
			}
		}
		rec.Release()
	}
}

// describeCalls describes every call, one a line.
func describeCalls(calls []*messages.WindowCall) string {
	var b strings.Builder
	for _, w := range calls {
		b.WriteString(describeCall(w) + "\n")
	}
	return b.String()
}

// TestShiftOffsetsAtInt64Ends runs lag and lead with offsets at and near
// the ends of int64 (which PostgreSQL's integer offset cannot take, so
// TestDifferential's random calls stop at int32's) against the reference:
// a source row that overflows is outside every partition.
func TestShiftOffsetsAtInt64Ends(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ref, rec := randomTable(rng, 150)
	defer rec.Release()
	offsets := []int64{math.MaxInt64, math.MinInt64, -math.MaxInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 62, -(1 << 62)}
	for _, fn := range []string{"lag", "lead"} {
		for _, off := range offsets {
			for _, arg := range []string{"x", "s"} {
				w := &messages.WindowCall{Func: fn, Args: []*messages.Expr{col(arg), cint(off)},
					PartitionBy: []messages.Expr{{Column: "g"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}
				if arg == "x" {
					w.Args = append(w.Args, cint(99))
				}
				q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}, {Alias: "w", Window: w}}}
				res, err := RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, Options{})
				if err != nil {
					t.Fatalf("%s: %v", describeCall(w), err)
				}
				want := refWindow(ref, w)
				got := resultValues(t, res, 0, 1)
				for id := range want {
					if !sameValue(got[int64(id)], want[id]) {
						t.Fatalf("%s: row id %d: got %+v, want %+v", describeCall(w), id, got[int64(id)], want[id])
					}
				}
				res.Close()
			}
		}
	}
}
