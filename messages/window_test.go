package messages

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func i64p(v int64) *int64 { return &v }

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
