package messages

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func i64p(v int64) *int64 { return &v }
func i32p(v int32) *int32 { return &v }

func sampleWindowJob() *WindowJob {
	return &WindowJob{
		JobID: "w1", ResultTable: "r", Output: "c1", Grant: Grant{Pool: "tm", Bytes: 64 << 20, Target: 64 << 20},
		Query: WindowQuery{
			SQL:   "SELECT a, sum(x) OVER w FROM t WINDOW w AS (PARTITION BY a ORDER BY x ROWS 2 PRECEDING)",
			Table: "t",
			Select: []SelectItem{
				{Alias: "a", Expr: &Expr{Column: "a"}},
				{Alias: "sum", Window: &WindowCall{
					Func: "sum", Args: []*Expr{{Column: "x"}},
					PartitionBy: []Expr{{Op: "%", Args: []*Expr{{Column: "a"}, {Const: &Value{Int: i64p(1000)}}}}},
					OrderBy:     []SortItem{{Expr: Expr{Column: "x"}, Desc: true, NullsFirst: true}},
					Frame: &Frame{Mode: FrameRows, Start: FrameBound{Kind: BoundPreceding, Offset: &Value{Int: i64p(2)}},
						End: FrameBound{Kind: BoundCurrentRow}, Exclude: ExcludeTies},
				}},
			},
			Where: []Predicate{{Left: Expr{Column: "a"}, Op: OpIsNotNull}},
			Limit: 10,
		},
	}
}

// sampleIntervalJob is a window job whose frame has interval offsets.
func sampleIntervalJob(sql string, start, end *Value) *WindowJob {
	return &WindowJob{
		JobID: "w2", ResultTable: "r", Output: "c2", Grant: Grant{Pool: "general", Bytes: 64 << 20, Target: 64 << 20},
		Query: WindowQuery{
			SQL:   sql,
			Table: "t",
			Select: []SelectItem{
				{Alias: "ts", Expr: &Expr{Column: "ts"}},
				{Alias: "count", Window: &WindowCall{
					Func: "count", Star: true,
					OrderBy: []SortItem{{Expr: Expr{Column: "ts"}}},
					Frame: &Frame{Mode: FrameRange, Start: FrameBound{Kind: BoundPreceding, Offset: start},
						End: FrameBound{Kind: BoundFollowing, Offset: end}},
				}},
			},
		},
	}
}

// sampleMicrosJob has offsets with microseconds only, the one form of
// interval before months and days were added: its golden bytes were
// written by that version and must decode to the same offsets.
func sampleMicrosJob() *WindowJob {
	return sampleIntervalJob("SELECT ts, count(*) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '90 minutes' PRECEDING AND INTERVAL '1 day' FOLLOWING) FROM t",
		&Value{IntervalMicros: i64p(90 * 60e6)}, &Value{IntervalMicros: i64p(86400e6)})
}

func sampleCalendarJob() *WindowJob {
	return sampleIntervalJob("SELECT ts, count(*) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '1 month 2 days 03:00' PRECEDING AND INTERVAL '1 day' FOLLOWING) FROM t",
		IntervalValue(Interval{Months: 1, Days: 2, Micros: 3 * 3600e6}), IntervalValue(Interval{Days: 1}))
}

func TestIntervalValue(t *testing.T) {
	cases := []struct {
		iv   Interval
		want Value
	}{
		{Interval{}, Value{IntervalMicros: i64p(0)}},
		{Interval{Micros: 5}, Value{IntervalMicros: i64p(5)}},
		{Interval{Months: 1}, Value{IntervalMonths: i32p(1)}},
		{Interval{Days: -2}, Value{IntervalDays: i32p(-2)}},
		{Interval{Months: 14, Days: 3, Micros: 4}, Value{IntervalMonths: i32p(14), IntervalDays: i32p(3), IntervalMicros: i64p(4)}},
	}
	for _, c := range cases {
		v := IntervalValue(c.iv)
		if !reflect.DeepEqual(*v, c.want) {
			t.Errorf("IntervalValue(%+v) = %+v, want %+v", c.iv, *v, c.want)
		}
		got, ok := v.Interval()
		if !ok || got != c.iv {
			t.Errorf("IntervalValue(%+v).Interval() = %+v, %v", c.iv, got, ok)
		}
		if v.IsNull() {
			t.Errorf("IntervalValue(%+v) is NULL", c.iv)
		}
		if err := v.validate(); err != nil {
			t.Errorf("IntervalValue(%+v): %v", c.iv, err)
		}
	}
	if _, ok := (&Value{Int: i64p(1)}).Interval(); ok {
		t.Error("an integer is not an interval")
	}
	if err := (&Value{Int: i64p(1), IntervalDays: i32p(1)}).validate(); err == nil {
		t.Error("an integer and an interval in one constant must be refused")
	}
}

func TestIntervalSign(t *testing.T) {
	const day = 86400e6
	cases := []struct {
		iv   Interval
		want int
	}{
		{Interval{}, 0},
		{Interval{Micros: 1}, 1},
		{Interval{Micros: -1}, -1},
		{Interval{Months: 1, Days: -30}, 0},
		{Interval{Months: 1, Days: -31}, -1},
		{Interval{Months: 1, Days: -29}, 1},
		{Interval{Days: 1, Micros: -day}, 0},
		{Interval{Days: 1, Micros: -day - 1}, -1},
		{Interval{Days: -1, Micros: day + 1}, 1},
		{Interval{Months: -1, Micros: 30*day + 1}, 1},
		{Interval{Micros: math.MinInt64}, -1},
		{Interval{Months: math.MaxInt32, Days: math.MaxInt32, Micros: math.MaxInt64}, 1},
		{Interval{Months: math.MinInt32, Days: math.MinInt32, Micros: math.MinInt64}, -1},
		{Interval{Months: 3600000, Micros: math.MinInt64}, 1}, // 1.08e8 days > 2^63 microseconds
		{Interval{Months: 3500000, Micros: math.MinInt64}, -1},
	}
	for _, c := range cases {
		if got := c.iv.Sign(); got != c.want {
			t.Errorf("%+v.Sign() = %d, want %d", c.iv, got, c.want)
		}
	}
}

func TestWindowQueryRoundTrip(t *testing.T) {
	in := sampleWindowJob()
	data, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out WindowJob
	if err := Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("round trip changed the job:\n in: %+v\nout: %+v", in, &out)
	}
	if err := out.Query.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestWindowQueryWireNames pins the msgpack field names: changing one
// breaks every recorded job stream.
func TestWindowQueryWireNames(t *testing.T) {
	data, err := Marshal(sampleWindowJob())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sql", "table", "select", "alias", "expr", "window", "func", "args",
		"partition_by", "order_by", "nulls_first", "desc", "frame", "mode", "start", "end", "kind", "offset",
		"exclude", "where", "left", "op", "limit", "column", "const"} {
		if !strings.Contains(string(data), name) {
			t.Errorf("encoded window job lacks field name %q", name)
		}
	}
}

// rangeInterval is RANGE BETWEEN iv PRECEDING AND CURRENT ROW.
func rangeInterval(iv Interval) *Frame {
	return &Frame{Mode: FrameRange, Start: FrameBound{Kind: BoundPreceding, Offset: IntervalValue(iv)}, End: FrameBound{Kind: BoundCurrentRow}}
}

func TestWindowQueryValidate(t *testing.T) {
	neg := int64(-1)
	cases := []struct {
		name string
		edit func(q *WindowQuery)
		want string
	}{
		{"ok", func(q *WindowQuery) {}, ""},
		{"no table", func(q *WindowQuery) { q.Table = "" }, "no table"},
		{"dup alias", func(q *WindowQuery) { q.Select[1].Alias = "a" }, "alias also used"},
		{"unknown func", func(q *WindowQuery) { q.Select[1].Window.Func = "median" }, "unknown window function"},
		{"negative offset", func(q *WindowQuery) { q.Select[1].Window.Frame.Start.Offset = &Value{Int: &neg} }, "must not be negative"},
		{"null offset", func(q *WindowQuery) { q.Select[1].Window.Frame.Start.Offset = &Value{} }, "must not be null"},
		{"start unbounded following", func(q *WindowQuery) {
			q.Select[1].Window.Frame.Start = FrameBound{Kind: BoundUnboundedFollowing}
		}, "cannot be UNBOUNDED FOLLOWING"},
		{"current row then preceding", func(q *WindowQuery) {
			f := q.Select[1].Window.Frame
			f.Start, f.End = FrameBound{Kind: BoundCurrentRow}, FrameBound{Kind: BoundPreceding, Offset: &Value{Int: i64p(1)}}
		}, "cannot have preceding rows"},
		{"filter on rank", func(q *WindowQuery) {
			q.Select[1].Window.Func, q.Select[1].Window.Args = "rank", nil
			q.Select[1].Window.Filter = []Predicate{{Left: Expr{Column: "a"}, Op: OpIsNull}}
		}, "FILTER"},
		{"bad op", func(q *WindowQuery) { q.Where[0].Op = "like" }, "unknown predicate operator"},
		{"star on sum", func(q *WindowQuery) { q.Select[1].Window.Star = true; q.Select[1].Window.Args = nil }, "only count(*)"},
		{"negative interval", func(q *WindowQuery) {
			q.Select[1].Window.Frame = rangeInterval(Interval{Days: -1})
		}, "invalid preceding or following size in window function"},
		{"negative calendar interval", func(q *WindowQuery) {
			q.Select[1].Window.Frame = rangeInterval(Interval{Months: 1, Days: -31})
		}, "invalid preceding or following size in window function"},
		{"calendar interval of mixed signs", func(q *WindowQuery) {
			q.Select[1].Window.Frame = rangeInterval(Interval{Months: 1, Days: -30})
		}, ""},
		{"old negative micros", func(q *WindowQuery) {
			q.Select[1].Window.Frame = &Frame{Mode: FrameRange, Start: FrameBound{Kind: BoundPreceding, Offset: &Value{IntervalMicros: &neg}}, End: FrameBound{Kind: BoundCurrentRow}}
		}, "invalid preceding or following size in window function"},
		{"interval and integer", func(q *WindowQuery) {
			q.Select[1].Window.Frame = rangeInterval(Interval{Days: 1})
			q.Select[1].Window.Frame.Start.Offset.Int = i64p(1)
		}, "more than one value"},
		{"interval offset in rows", func(q *WindowQuery) {
			q.Select[1].Window.Frame = rangeInterval(Interval{Months: 1})
			q.Select[1].Window.Frame.Mode = FrameRows
		}, "rows frame offset must be an integer"},
		{"groups without order", func(q *WindowQuery) {
			q.Select[1].Window.OrderBy = nil
			q.Select[1].Window.Frame.Mode = FrameGroups
		}, "GROUPS mode requires an ORDER BY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := sampleWindowJob().Query
			c.edit(&q)
			err := q.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an ErrInvalidQuery containing %q", err, c.want)
			}
		})
	}
}
