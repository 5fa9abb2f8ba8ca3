package windower

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// writeContainer writes rec as a container at dir, sorted on key (rec must
// already be in that order).
func writeContainer(t *testing.T, dir string, rec arrow.RecordBatch, key columnar.SortKey) string {
	t.Helper()
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "t", Projection: "p", ID: filepath.Base(dir), Schema: rec.Schema(), SortKey: key, BlockRows: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func drain(t *testing.T, res *Result) []string {
	t.Helper()
	var rows []string
	for {
		rec, err := res.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
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
	return rows
}

// TestSpillMatchesInMemory runs queries over containers under the
// smallest grant, so they sort in runs, merge and stream (and evaluate a
// big partition in slices), and compares with the in-memory result.
func TestSpillMatchesInMemory(t *testing.T) {
	parallelSmall(t)
	spillThreads(t)
	behind := runsWrittenBehind.Load()
	defer func() {
		if runsWrittenBehind.Load() == behind {
			t.Error("no sorted run was written in the background")
		}
	}()
	rng := rand.New(rand.NewPCG(7, 8))
	n := 120000
	if testing.Short() {
		n = 60000
	}
	_, rec := randomTable(rng, n)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	queries := []*messages.WindowQuery{
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "c", Window: &messages.WindowCall{Func: "count", Star: true, PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "f"}, NullsFirst: true}}}},
			{Alias: "fv", Window: &messages.WindowCall{Func: "first_value", Args: []*messages.Expr{col("s")}, PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "f"}, NullsFirst: true}}}},
		}},
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "s", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")},
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
				OrderBy:     []messages.SortItem{{Expr: messages.Expr{Column: "t"}}},
				Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(3)}},
					End: messages.FrameBound{Kind: messages.BoundFollowing, Offset: &messages.Value{Int: i64(2)}}}}},
			{Alias: "r", Window: &messages.WindowCall{Func: "rank",
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
				OrderBy:     []messages.SortItem{{Expr: messages.Expr{Column: "t"}}}}},
		}, Where: []messages.Predicate{{Left: messages.Expr{Column: "x"}, Op: messages.OpIsNotNull}}},
		// One partition of every row: evaluated in slices with a halo.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "m", Window: &messages.WindowCall{Func: "min", Args: []*messages.Expr{col("f")},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}},
				Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(50)}},
					End: messages.FrameBound{Kind: messages.BoundFollowing, Offset: &messages.Value{Int: i64(9)}}, Exclude: messages.ExcludeCurrentRow}}},
			{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}}}},
			{Alias: "lag", Window: &messages.WindowCall{Func: "lag", Args: []*messages.Expr{col("s"), cint(3)}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}}}},
			{Alias: "lead", Window: &messages.WindowCall{Func: "lead", Args: []*messages.Expr{col("x"), cint(2), cint(-1)}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}}}},
		}},
		// Three window groups: three stages, each sorting what the last wrote.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "rk", Window: &messages.WindowCall{Func: "dense_rank",
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
				OrderBy:     []messages.SortItem{{Expr: messages.Expr{Column: "s"}, Desc: true}}}},
			{Alias: "x1", Expr: &messages.Expr{Op: "+", Args: []*messages.Expr{col("x"), cint(1)}}},
			{Alias: "n", Window: &messages.WindowCall{Func: "count", Args: []*messages.Expr{col("f")},
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(97)}}}}},
			{Alias: "lg", Window: &messages.WindowCall{Func: "lag", Args: []*messages.Expr{col("t")},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
			{Alias: "mx", Window: &messages.WindowCall{Func: "max", Args: []*messages.Expr{col("s")},
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
				OrderBy:     []messages.SortItem{{Expr: messages.Expr{Column: "s"}, Desc: true}}}},
		}, Where: []messages.Predicate{{Left: messages.Expr{Column: "g"}, Op: "<>", Right: &messages.Value{Int: i64(3)}}}, Limit: 50000},
		// The same, in ORDER BY order: a last stage sorts.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "x1", Expr: &messages.Expr{Op: "+", Args: []*messages.Expr{col("x"), cint(1)}}},
			{Alias: "n", Window: &messages.WindowCall{Func: "count", Args: []*messages.Expr{col("f")},
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(97)}}}}},
		}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "x1"}, Desc: true, NullsFirst: true}, {Expr: messages.Expr{Column: "id"}}}, Limit: 70000},
		// Whole-partition aggregates over partitions larger than the
		// grant: a first pass computes them, slices write them.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "cnt", Window: &messages.WindowCall{Func: "count", Star: true}},
			{Alias: "sum", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}}},
			{Alias: "min", Window: &messages.WindowCall{Func: "min", Args: []*messages.Expr{col("s")}}},
			{Alias: "maxf", Window: &messages.WindowCall{Func: "max", Args: []*messages.Expr{col("f")},
				Filter: []messages.Predicate{{Left: messages.Expr{Column: "x"}, Op: ">", Right: &messages.Value{Int: i64(2)}}}}},
			{Alias: "avg", Window: &messages.WindowCall{Func: "avg", Args: []*messages.Expr{col("f")}}},
			{Alias: "g_sum", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, PartitionBy: []messages.Expr{{Column: "g"}},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}},
				Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
					End: messages.FrameBound{Kind: messages.BoundUnboundedFollowing}}}},
			{Alias: "g_rows", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, PartitionBy: []messages.Expr{{Column: "g"}},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}},
				Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(3)}},
					End: messages.FrameBound{Kind: messages.BoundCurrentRow}}}},
		}},
		// Running aggregates over one partition larger than the grant:
		// each slice is combined with the rows before it.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "cnt", Window: runningCall_("count", "x", messages.FrameBound{Kind: messages.BoundCurrentRow}, nil)},
			{Alias: "sum", Window: runningCall_("sum", "x", messages.FrameBound{Kind: messages.BoundFollowing, Offset: &messages.Value{Int: i64(2)}}, nil)},
			{Alias: "min", Window: runningCall_("min", "s", messages.FrameBound{Kind: messages.BoundCurrentRow}, nil)},
			{Alias: "max", Window: runningCall_("max", "f", messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(1)}},
				[]messages.Predicate{{Left: messages.Expr{Column: "x"}, Op: ">", Right: &messages.Value{Int: i64(2)}}})},
			{Alias: "star", Window: runningCall_("count", "", messages.FrameBound{Kind: messages.BoundCurrentRow}, nil)},
		}},
		// Ranks and running RANGE/GROUPS frames over one partition larger
		// than the grant: slices end at peer-group boundaries.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "rk", Window: &messages.WindowCall{Func: "rank", OrderBy: []messages.SortItem{{Expr: messages.Expr{Op: "%", Args: []*messages.Expr{col("id"), cint(5000)}}, NullsFirst: true}}}},
			{Alias: "drk", Window: &messages.WindowCall{Func: "dense_rank", OrderBy: []messages.SortItem{{Expr: messages.Expr{Op: "%", Args: []*messages.Expr{col("id"), cint(5000)}}, NullsFirst: true}}}},
			{Alias: "sum", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Op: "%", Args: []*messages.Expr{col("id"), cint(5000)}}, NullsFirst: true}}}},
			{Alias: "min", Window: &messages.WindowCall{Func: "min", Args: []*messages.Expr{col("s")}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Op: "%", Args: []*messages.Expr{col("id"), cint(5000)}}, NullsFirst: true}}}},
			{Alias: "grp", Window: &messages.WindowCall{Func: "count", Star: true, OrderBy: []messages.SortItem{{Expr: messages.Expr{Op: "%", Args: []*messages.Expr{col("id"), cint(2000)}}, Desc: true}},
				Frame: &messages.Frame{Mode: messages.FrameGroups, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, End: messages.FrameBound{Kind: messages.BoundCurrentRow}}}},
		}},
		// ORDER BY input columns the select list lacks: the window stages
		// carry them, the result drops them.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "x1", Expr: &messages.Expr{Op: "+", Args: []*messages.Expr{col("x"), cint(1)}}},
			{Alias: "n", Window: &messages.WindowCall{Func: "count", Args: []*messages.Expr{col("f")},
				PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(97)}}}}},
			{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "s"}}, {Expr: messages.Expr{Column: "id"}}}}},
		}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "t"}, Desc: true, NullsFirst: true}, {Expr: messages.Expr{Op: "-", Args: []*messages.Expr{col("id"), cint(1)}}}}, Limit: 70000},
		// Positional functions over partitions larger than the grant: a
		// first pass counts the rows and picks the first, n-th and last.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "pr", Window: byG("percent_rank", nil, nil)},
			{Alias: "cd", Window: byG("cume_dist", nil, nil)},
			{Alias: "nt", Window: byG("ntile", []*messages.Expr{cint(7)}, nil)},
			{Alias: "nt1", Window: byG("ntile", []*messages.Expr{cint(100000)}, nil)},
			{Alias: "fv", Window: byG("first_value", []*messages.Expr{col("s")}, nil)},
			{Alias: "lv", Window: byG("last_value", []*messages.Expr{col("x")}, nil)},
			{Alias: "nv", Window: byG("nth_value", []*messages.Expr{col("f"), cint(3)}, nil)},
			{Alias: "lv_all", Window: byG("last_value", []*messages.Expr{col("s")}, rowsFrame(messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, messages.FrameBound{Kind: messages.BoundUnboundedFollowing}))},
			{Alias: "fv_tail", Window: byG("first_value", []*messages.Expr{col("t")}, rowsFrame(preceding(3), messages.FrameBound{Kind: messages.BoundUnboundedFollowing}))},
			{Alias: "nv_tail", Window: byG("nth_value", []*messages.Expr{col("s"), cint(5)}, rowsFrame(messages.FrameBound{Kind: messages.BoundCurrentRow}, messages.FrameBound{Kind: messages.BoundUnboundedFollowing}))},
			{Alias: "nv_head", Window: byG("nth_value", []*messages.Expr{col("x"), cint(40000)}, rowsFrame(messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, preceding(2)))},
			{Alias: "lv_peer", Window: byG("last_value", []*messages.Expr{col("id")}, &messages.Frame{Mode: messages.FrameGroups,
				Start: messages.FrameBound{Kind: messages.BoundCurrentRow}, End: messages.FrameBound{Kind: messages.BoundUnboundedFollowing}})},
		}},
		// Running avg and float sums over one partition larger than the
		// grant: carried across slices, added in row order.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "avg", Window: byG("avg", []*messages.Expr{col("x")}, nil)},
			{Alias: "avgf", Window: runningCall_("avg", "f", messages.FrameBound{Kind: messages.BoundFollowing, Offset: &messages.Value{Int: i64(2)}}, nil)},
			{Alias: "sumf", Window: runningCall_("sum", "f", preceding(3), nil)},
			{Alias: "sumf_range", Window: byG("sum", []*messages.Expr{col("f")}, nil)},
			{Alias: "cnt_prec", Window: runningCall_("count", "x", preceding(5), nil)},
			{Alias: "rk", Window: byG("rank", nil, nil)},
			{Alias: "lag", Window: byG("lag", []*messages.Expr{col("x"), cint(4)}, nil)},
			{Alias: "far_lag", Window: byG("lag", []*messages.Expr{col("x"), cint(1<<20 + 1), cint(-1)}, nil)},
			{Alias: "far_lead", Window: byG("lead", []*messages.Expr{col("s"), cint(-(1<<20 + 1))}, nil)},
		}},
		// RANGE and GROUPS offset frames over partitions larger than the
		// grant, frames larger than the buffer: two cursors per call.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "avg", Window: byT("avg", []*messages.Expr{col("x")}, messages.FrameRange, secs(-6), secs(3))},
			{Alias: "sumf", Window: byT("sum", []*messages.Expr{col("f")}, messages.FrameRange, messages.FrameBound{Kind: messages.BoundCurrentRow}, secs(9))},
			{Alias: "min", Window: byT("min", []*messages.Expr{col("s")}, messages.FrameRange, secs(-3), messages.FrameBound{Kind: messages.BoundCurrentRow})},
			{Alias: "cnt", Window: byT("count", nil, messages.FrameGroups, preceding(2), following(1))},
			{Alias: "max", Window: byT("max", []*messages.Expr{col("x")}, messages.FrameGroups, following(1), following(3))},
			{Alias: "fv", Window: byT("first_value", []*messages.Expr{col("s")}, messages.FrameRange, secs(3), messages.FrameBound{Kind: messages.BoundUnboundedFollowing})},
			{Alias: "lv", Window: byT("last_value", []*messages.Expr{col("x")}, messages.FrameGroups, messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, preceding(2))},
			{Alias: "nv", Window: byT("nth_value", []*messages.Expr{col("id"), cint(2000)}, messages.FrameRange, secs(-6), messages.FrameBound{Kind: messages.BoundCurrentRow})},
			{Alias: "far", Window: byT("sum", []*messages.Expr{col("x")}, messages.FrameRows, preceding(2000000), preceding(5))},
		}},
		// RANGE offsets on a float key, DESC NULLS FIRST, one partition
		// whose NULL peer group is larger than the buffer.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "sum", Window: byF("sum", []*messages.Expr{col("x")}, preceding(-1), following(-3))},
			{Alias: "cnt", Window: byF("count", []*messages.Expr{col("f")}, preceding(-2), preceding(-2))},
			{Alias: "fv", Window: byF("first_value", []*messages.Expr{col("id")}, messages.FrameBound{Kind: messages.BoundCurrentRow}, following(-1))},
			{Alias: "max", Window: byF("max", []*messages.Expr{col("f")}, preceding(-4), messages.FrameBound{Kind: messages.BoundCurrentRow})},
		}},
		// Peer groups larger than the buffer (ORDER BY g: half the rows
		// tie): ranks and peer frames from carried peer starts and cursors.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "rk", Window: byGroup("rank", nil, nil)},
			{Alias: "drk", Window: byGroup("dense_rank", nil, nil)},
			{Alias: "pr", Window: byGroup("percent_rank", nil, nil)},
			{Alias: "cd", Window: byGroup("cume_dist", nil, nil)},
			{Alias: "sum", Window: byGroup("sum", []*messages.Expr{col("x")}, nil)},
			{Alias: "avgf", Window: byGroup("avg", []*messages.Expr{col("f")}, nil)},
			{Alias: "min", Window: byGroup("min", []*messages.Expr{col("s")}, nil)},
			{Alias: "fv", Window: byGroup("first_value", []*messages.Expr{col("s")}, nil)},
			{Alias: "lv", Window: byGroup("last_value", []*messages.Expr{col("x")}, nil)},
			{Alias: "nv", Window: byGroup("nth_value", []*messages.Expr{col("t"), cint(70000)}, nil)},
			{Alias: "grp", Window: byGroup("count", nil, &messages.Frame{Mode: messages.FrameGroups, Start: preceding(1), End: messages.FrameBound{Kind: messages.BoundCurrentRow}})},
			{Alias: "nt", Window: byGroup("ntile", []*messages.Expr{cint(3)}, nil)},
			{Alias: "rn", Window: byGroup("row_number", nil, nil)},
		}},
		// A key column repeated in PARTITION BY and ORDER BY.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", PartitionBy: []messages.Expr{{Column: "x"}},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "x"}, Desc: true}, {Expr: messages.Expr{Column: "id"}}, {Expr: messages.Expr{Column: "id"}, Desc: true}}}},
			{Alias: "s", Expr: col("s")},
			{Alias: "t", Expr: col("t")},
			{Alias: "f", Expr: col("f")},
			{Alias: "g", Expr: col("g")},
		}},
		// EXCLUDE over partitions and peer groups larger than the buffer:
		// count, sum and avg subtract the excluded peers, kept by two more
		// cursors.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "cur", Window: excluding(byT("sum", []*messages.Expr{col("x")}, messages.FrameRange, secs(-3), secs(3)), messages.ExcludeCurrentRow)},
			{Alias: "grp", Window: excluding(byT("avg", []*messages.Expr{col("f")}, messages.FrameGroups, preceding(1), following(1)), messages.ExcludeGroup)},
			{Alias: "ties", Window: excluding(byT("count", []*messages.Expr{col("s")}, messages.FrameRange, messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, messages.FrameBound{Kind: messages.BoundCurrentRow}), messages.ExcludeTies)},
			{Alias: "rows", Window: excluding(byT("sum", []*messages.Expr{col("f")}, messages.FrameRows, preceding(3), following(3)), messages.ExcludeTies)},
			{Alias: "big", Window: excluding(byGroup("count", nil, &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
				End: messages.FrameBound{Kind: messages.BoundUnboundedFollowing}}), messages.ExcludeGroup)},
		}},
		// min, max, first_value and last_value with EXCLUDE: the frame
		// in two pieces around the excluded rows.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "min", Window: excluding(byT("min", []*messages.Expr{col("s")}, messages.FrameRange, secs(-3), secs(3)), messages.ExcludeGroup)},
			{Alias: "max", Window: excluding(byT("max", []*messages.Expr{col("x")}, messages.FrameGroups, preceding(1), messages.FrameBound{Kind: messages.BoundCurrentRow}), messages.ExcludeTies)},
			{Alias: "fv", Window: excluding(byT("first_value", []*messages.Expr{col("x")}, messages.FrameRange, messages.FrameBound{Kind: messages.BoundCurrentRow}, secs(3)), messages.ExcludeGroup)},
			{Alias: "lv", Window: excluding(byT("last_value", []*messages.Expr{col("s")}, messages.FrameGroups, preceding(2), messages.FrameBound{Kind: messages.BoundCurrentRow}), messages.ExcludeCurrentRow)},
			{Alias: "lvt", Window: excluding(byGroup("last_value", []*messages.Expr{col("id")}, &messages.Frame{Mode: messages.FrameRange, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
				End: messages.FrameBound{Kind: messages.BoundCurrentRow}}), messages.ExcludeTies)},
		}},
		// nth_value with EXCLUDE CURRENT ROW: the nth row of the frame, or
		// the one after it when the current row is among the first n.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "range", Window: excluding(byT("nth_value", []*messages.Expr{col("x"), cint(2)}, messages.FrameRange, secs(-3), secs(3)), messages.ExcludeCurrentRow)},
			{Alias: "groups", Window: excluding(byT("nth_value", []*messages.Expr{col("s"), cint(3)}, messages.FrameGroups, preceding(2), messages.FrameBound{Kind: messages.BoundCurrentRow}), messages.ExcludeCurrentRow)},
			{Alias: "rows", Window: excluding(byT("nth_value", []*messages.Expr{col("f"), cint(1)}, messages.FrameRows, messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, following(2)), messages.ExcludeCurrentRow)},
		}},
		// nth_value with EXCLUDE GROUP and TIES: the nth row past the
		// current row's peers, which moves back when a peer group has
		// fewer rows in the frame than the one before (peer groups of
		// id % 5000 within g of 2 to 12 rows, of t of hundreds).
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "g_whole", Window: excluding(byG("nth_value", []*messages.Expr{col("s"), cint(2)}, rowsFrame(messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, messages.FrameBound{Kind: messages.BoundUnboundedFollowing})), messages.ExcludeGroup)},
			{Alias: "g_ties", Window: excluding(byG("nth_value", []*messages.Expr{col("x"), cint(2)}, rowsFrame(preceding(1), following(4))), messages.ExcludeTies)},
			{Alias: "g_next", Window: excluding(byG("nth_value", []*messages.Expr{col("t"), cint(3)}, &messages.Frame{Mode: messages.FrameGroups, Start: following(1), End: following(2)}), messages.ExcludeTies)},
			{Alias: "g_groups", Window: excluding(byG("nth_value", []*messages.Expr{col("f"), cint(4)}, &messages.Frame{Mode: messages.FrameGroups, Start: preceding(1), End: following(2)}), messages.ExcludeGroup)},
		}},
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "t_ties", Window: excluding(byT("nth_value", []*messages.Expr{col("x"), cint(2)}, messages.FrameRange, secs(-3), secs(3)), messages.ExcludeTies)},
			{Alias: "t_group", Window: excluding(byT("nth_value", []*messages.Expr{col("s"), cint(40)}, messages.FrameGroups, preceding(1), following(1)), messages.ExcludeGroup)},
		}},
		// Over one partition of 120,000 rows in peer groups of thousands
		// (g), n reaching past the current row's peers for most rows.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "far_group", Window: excluding(byGroup("nth_value", []*messages.Expr{col("t"), cint(700)}, &messages.Frame{Mode: messages.FrameGroups, Start: preceding(1),
				End: following(1)}), messages.ExcludeGroup)},
			{Alias: "far_ties", Window: excluding(byGroup("nth_value", []*messages.Expr{col("s"), cint(300)}, &messages.Frame{Mode: messages.FrameRows, Start: preceding(200),
				End: following(400)}), messages.ExcludeTies)},
		}},
		// Peer groups of x: the NULLs (18,000 rows), then about 8,500 a
		// value. The row moves back by more than a block from the first
		// group to the second: the cursor is put at the nth cursor's row.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "back", Window: &messages.WindowCall{Func: "nth_value", Args: []*messages.Expr{col("s"), cint(30000)},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "x"}, NullsFirst: true}},
				Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
					End: messages.FrameBound{Kind: messages.BoundUnboundedFollowing}, Exclude: messages.ExcludeGroup}}},
		}},
		// A window of its own: its peer groups are half the rows, whose
		// order another window's stage would leave open.
		{Table: "t", Select: []messages.SelectItem{
			{Alias: "id", Expr: col("id")},
			{Alias: "far", Window: excluding(byGroup("nth_value", []*messages.Expr{col("t"), cint(50000)}, &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding},
				End: messages.FrameBound{Kind: messages.BoundUnboundedFollowing}}), messages.ExcludeCurrentRow)},
		}},
		// No window at all, only a sort larger than the grant.
		{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}, {Alias: "s", Expr: col("s")}},
			OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "s"}}, {Expr: messages.Expr{Column: "id"}, Desc: true}}},
	}
	for i, q := range queries {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			wantRows, wantStats := runThreads(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
				return RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, o)
			})
			gotRows, st := runThreads(t, Options{Grant: MinGrant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
				return Run(context.Background(), q, []string{dir}, o)
			})
			if st.SpilledBytes == 0 {
				t.Errorf("nothing spilled: %+v", st)
			}
			if st.PeakBytes > MinGrant {
				t.Errorf("peak %d bytes over the %d-byte grant", st.PeakBytes, MinGrant)
			}
			if len(gotRows) != len(wantRows) {
				t.Fatalf("%d rows, want %d", len(gotRows), len(wantRows))
			}
			if severalGroups(q) {
				// Rows whose last window's keys tie come in another order
				// when each window is a stage of its own; SQL leaves it open.
				slices.Sort(gotRows)
				slices.Sort(wantRows)
			}
			for r := range wantRows {
				if gotRows[r] != wantRows[r] {
					t.Fatalf("row %d: got %s, want %s (stats %+v)", r, gotRows[r], wantRows[r], st)
				}
			}
			if wantStats.Partitions != st.Partitions {
				t.Errorf("%d partitions, want %d", st.Partitions, wantStats.Partitions)
			}
		})
	}
}

// spillThreads runs the test's queries on 1, 2 and 4 threads
// (runThreads): on more than one, sorted runs are sorted on every thread
// and written while the next is read.
func spillThreads(t *testing.T) {
	old := threadCounts
	threadCounts = []int{1, 2, 4}
	t.Cleanup(func() { threadCounts = old })
}

// TestSpillSortedInput streams a container already sorted on the window's
// keys: no runs are written, WHERE is applied while reading.
func TestSpillSortedInput(t *testing.T) {
	parallelSmall(t)
	rng := rand.New(rand.NewPCG(5, 6))
	_, raw := randomTable(rng, 100000)
	defer raw.Release()
	// Sort the table on (g, t) with the windower itself.
	all := &messages.WindowQuery{Table: "t", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "g"}}, {Expr: messages.Expr{Column: "t"}}}}
	for _, f := range diffSchema.Fields() {
		all.Select = append(all.Select, messages.SelectItem{Alias: f.Name, Expr: col(f.Name)})
	}
	sorted, err := RunRecords(context.Background(), all, diffSchema, []arrow.RecordBatch{raw}, Options{Grant: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for {
		r, err := sorted.Next()
		if err == io.EOF {
			break
		}
		recs = append(recs, r)
	}
	dir := filepath.Join(t.TempDir(), "c0")
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "t", Projection: "p", ID: "c0", Schema: diffSchema,
		SortKey: columnar.SortKey{{Name: "g"}, {Name: "t"}}, BlockRows: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "s", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")},
			PartitionBy: []messages.Expr{{Column: "g"}}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "t"}}},
			Frame: &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(2)}},
				End: messages.FrameBound{Kind: messages.BoundCurrentRow}}}},
	}, Where: []messages.Predicate{{Left: messages.Expr{Column: "s"}, Op: messages.OpIsNotNull}}}
	// A partition larger than the grant reads the input container itself
	// again: a first pass and cursors.
	big := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "avg", Window: byT("avg", []*messages.Expr{col("x")}, messages.FrameRange, secs(-6), secs(3))},
		{Alias: "cd", Window: byT("cume_dist", nil, messages.FrameRange, messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, messages.FrameBound{Kind: messages.BoundCurrentRow})},
		{Alias: "nt", Window: byT("ntile", []*messages.Expr{cint(4)}, messages.FrameRows, messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, messages.FrameBound{Kind: messages.BoundCurrentRow})},
		{Alias: "all", Window: byT("max", []*messages.Expr{col("s")}, messages.FrameRows, messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, messages.FrameBound{Kind: messages.BoundUnboundedFollowing})},
	}}
	big.Select[2].Window.Star = false
	big.Select[2].Window.Frame = nil
	big.Select[3].Window.Frame = nil
	// The same with WHERE: the first pass and the cursors filter too.
	bigWhere := *big
	bigWhere.Where = []messages.Predicate{{Left: messages.Expr{Column: "x"}, Op: ">", Right: &messages.Value{Int: i64(0)}}}
	for _, q := range []*messages.WindowQuery{q, big, &bigWhere} {
		wantRows, _ := runThreads(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
			return RunRecords(context.Background(), q, diffSchema, recs, o)
		})
		gotRows, st := runThreads(t, Options{Grant: MinGrant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
			return Run(context.Background(), q, []string{dir}, o)
		})
		if !st.SortedInput {
			t.Errorf("input sorted on (g, t) was sorted again: %+v", st)
		}
		if len(gotRows) != len(wantRows) {
			t.Fatalf("%d rows, want %d", len(gotRows), len(wantRows))
		}
		for r := range wantRows {
			if gotRows[r] != wantRows[r] {
				t.Fatalf("row %d: got %s, want %s", r, gotRows[r], wantRows[r])
			}
		}
	}
}

// runningCall_ is fn(arg) OVER (ORDER BY id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND end).
func runningCall_(fn, arg string, end messages.FrameBound, filter []messages.Predicate) *messages.WindowCall {
	w := &messages.WindowCall{Func: fn, Filter: filter,
		OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true, NullsFirst: true}},
		Frame:   &messages.Frame{Mode: messages.FrameRows, Start: messages.FrameBound{Kind: messages.BoundUnboundedPreceding}, End: end}}
	if arg == "" {
		w.Star = true
	} else {
		w.Args = []*messages.Expr{col(arg)}
	}
	return w
}

// severalGroups reports whether q has window calls of different
// PARTITION BY / ORDER BY and no ORDER BY of its own.
func severalGroups(q *messages.WindowQuery) bool {
	sigs := map[string]bool{}
	for _, it := range q.Select {
		if it.Window != nil {
			sigs[keySignature(it.Window.PartitionBy, it.Window.OrderBy)] = true
		}
	}
	return len(sigs) > 1 && len(q.OrderBy) == 0
}

// byG is fn(args) OVER (PARTITION BY g ORDER BY id % 5000 NULLS FIRST [frame]):
// a partition larger than the grant, peer groups of about ten rows.
func byG(fn string, args []*messages.Expr, frame *messages.Frame) *messages.WindowCall {
	return &messages.WindowCall{Func: fn, Args: args, PartitionBy: []messages.Expr{{Column: "g"}},
		OrderBy: []messages.SortItem{{Expr: messages.Expr{Op: "%", Args: []*messages.Expr{col("id"), cint(5000)}}, NullsFirst: true}},
		Frame:   frame}
}

func rowsFrame(start, end messages.FrameBound) *messages.Frame {
	return &messages.Frame{Mode: messages.FrameRows, Start: start, End: end}
}

func preceding(n int64) messages.FrameBound {
	return messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{Int: i64(n)}}
}

// byT is fn(args) OVER (PARTITION BY g ORDER BY t frame).
func byT(fn string, args []*messages.Expr, mode string, start, end messages.FrameBound) *messages.WindowCall {
	w := &messages.WindowCall{Func: fn, Args: args, Star: args == nil, PartitionBy: []messages.Expr{{Column: "g"}},
		OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "t"}}},
		Frame:   &messages.Frame{Mode: mode, Start: start, End: end}}
	return w
}

// byF is fn(args) OVER (ORDER BY f DESC NULLS FIRST RANGE BETWEEN start AND end);
// offsets given as negative numbers are halves (-3: 1.5).
func byF(fn string, args []*messages.Expr, start, end messages.FrameBound) *messages.WindowCall {
	for _, b := range []*messages.FrameBound{&start, &end} {
		if b.Offset != nil && b.Offset.Int != nil && *b.Offset.Int < 0 {
			b.Offset = &messages.Value{Float: f64(float64(-*b.Offset.Int) / 2)}
		}
	}
	return &messages.WindowCall{Func: fn, Args: args, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "f"}, Desc: true, NullsFirst: true}},
		Frame: &messages.Frame{Mode: messages.FrameRange, Start: start, End: end}}
}

func following(n int64) messages.FrameBound {
	return messages.FrameBound{Kind: messages.BoundFollowing, Offset: &messages.Value{Int: i64(n)}}
}

// secs is an interval bound of |n| seconds, PRECEDING when n < 0.
func secs(n int64) messages.FrameBound {
	if n < 0 {
		return messages.FrameBound{Kind: messages.BoundPreceding, Offset: &messages.Value{IntervalMicros: i64(-n * 1e6)}}
	}
	return messages.FrameBound{Kind: messages.BoundFollowing, Offset: &messages.Value{IntervalMicros: i64(n * 1e6)}}
}

// byGroup is fn(args) OVER (ORDER BY g DESC [frame]): one partition whose
// peer groups are larger than the buffer (half the rows have g = 0).
func byGroup(fn string, args []*messages.Expr, frame *messages.Frame) *messages.WindowCall {
	return &messages.WindowCall{Func: fn, Args: args, Star: args == nil && fn == "count",
		OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "g"}, Desc: true}}, Frame: frame}
}

// TestSpillRandomCalls runs random window calls (every function, ROWS,
// RANGE and GROUPS frames with random offsets, FILTER) over partitions
// larger than the grant and compares with the in-memory result row for
// row.
func TestSpillRandomCalls(t *testing.T) {
	parallelSmall(t)
	spillThreads(t)
	rng := rand.New(rand.NewPCG(11, 12))
	rec, dir := spillTable(t, rng)
	queries := 10
	if testing.Short() {
		queries = 4
	}
	for qi := 0; qi < queries; qi++ {
		q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "id", Expr: col("id")}}}
		var first *messages.WindowCall
		for k := 0; k < 6; k++ {
			w := randomCall(rng)
			if first == nil {
				first = w
				// One big partition half the time.
				if rng.IntN(2) == 0 {
					w.PartitionBy = nil
				}
				seen := map[string]bool{}
				var order []messages.SortItem
				for _, o := range w.OrderBy {
					if !seen[o.Expr.Column] {
						seen[o.Expr.Column] = true
						order = append(order, o)
					}
				}
				w.OrderBy = order
			}
			w.PartitionBy, w.OrderBy = first.PartitionBy, first.OrderBy
			if w.Frame != nil {
				w.Frame = randomFrame(rng, w.OrderBy)
				if w.Frame.Mode == messages.FrameRows && rng.IntN(2) == 0 {
					// Offsets of thousands of rows, past what a halo of
					// the grant's buffer holds: cursors read them.
					for _, b := range []*messages.FrameBound{&w.Frame.Start, &w.Frame.End} {
						if b.Offset != nil && b.Offset.Int != nil {
							b.Offset.Int = i64(*b.Offset.Int * 4999)
						}
					}
				}
			}
			q.Select = append(q.Select, messages.SelectItem{Alias: fmt.Sprintf("w%d", k), Window: w})
		}
		t.Run(fmt.Sprint(qi), func(t *testing.T) {
			for _, it := range q.Select[1:] {
				t.Log(describeCall(it.Window))
			}
			gotRows, st, wantRows := runSpilledAndInMemory(t, q, rec, dir)
			if st.PeakBytes > MinGrant {
				t.Errorf("peak %d bytes over the %d-byte grant", st.PeakBytes, MinGrant)
			}
			if len(gotRows) != len(wantRows) {
				t.Fatalf("%d rows, want %d", len(gotRows), len(wantRows))
			}
			for r := range wantRows {
				if gotRows[r] != wantRows[r] {
					t.Fatalf("row %d: got %s, want %s", r, gotRows[r], wantRows[r])
				}
			}
		})
	}
}

// spillTable is a random table of 60000 rows, more than MinGrant holds,
// and the container at dir that holds it; rec is released when the test
// ends.
func spillTable(t *testing.T, rng *rand.Rand) (rec arrow.RecordBatch, dir string) {
	t.Helper()
	_, rec = randomTable(rng, 60000)
	t.Cleanup(rec.Release)
	return rec, writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
}

// runSpilledAndInMemory runs q, at every thread count, over the
// container at dir under MinGrant (spilling) and over rec, its rows, in
// memory; it returns the spilled rows and their stats, and the rows in
// memory.
func runSpilledAndInMemory(t *testing.T, q *messages.WindowQuery, rec arrow.RecordBatch, dir string) (spilled []string, st Stats, inMemory []string) {
	t.Helper()
	inMemory, _ = runThreads(t, Options{Grant: 1 << 30}, func(o Options) (*Result, error) {
		return RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, o)
	})
	spilled, st = runThreads(t, Options{Grant: MinGrant, TempDir: t.TempDir()}, func(o Options) (*Result, error) {
		return Run(context.Background(), q, []string{dir}, o)
	})
	return spilled, st, inMemory
}

func excluding(w *messages.WindowCall, x string) *messages.WindowCall {
	w.Frame.Exclude = x
	return w
}

// TestSpillShiftFarOffsets runs lag and lead whose offsets reach further
// than a small grant's buffer holds, over one partition larger than the
// grant, against the same queries in memory. A halo of the offset's rows
// needs a buffer four times as long, so such offsets read their rows with
// a cursor; before, any offset up to maxHalo took a halo, and the query
// failed as a grant too small.
func TestSpillShiftFarOffsets(t *testing.T) {
	spilledMatchesInMemory(t, rand.New(rand.NewPCG(13, 14)), []string{
		"SELECT id, lag(s, 50000) OVER () AS v FROM t",
		"SELECT id, lead(x, 3000, -1) OVER () AS v, lag(f, 2) OVER () AS w FROM t",
		"SELECT id, lead(s, 1048576) OVER (ORDER BY f) AS v FROM t",
	})
}

// TestSpillFarFrameOffsets runs calls over ROWS frames whose offsets, or
// whose nth_value n, reach further than a halo holds, over one partition
// larger than the grant, against the same queries in memory. A halo may
// take a sixteenth of the buffer (here about 1,250 rows of 20,000), never
// more than maxHalo (2^20): such calls take cursors. They were refused,
// the ones past 2^20 as "too large to evaluate in slices" and the others
// as a grant too small for a buffer of four halos.
func TestSpillFarFrameOffsets(t *testing.T) {
	spilledMatchesInMemory(t, rand.New(rand.NewPCG(15, 16)), []string{
		"SELECT id, first_value(s) OVER (ORDER BY id ROWS BETWEEN 1048577 PRECEDING AND UNBOUNDED FOLLOWING) AS v FROM t",
		"SELECT id, last_value(x) OVER (ORDER BY f, id ROWS BETWEEN UNBOUNDED PRECEDING AND 2000000 FOLLOWING) AS v FROM t",
		"SELECT id, nth_value(s, 1048578) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS v, " +
			"nth_value(x, 3) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 3000000 FOLLOWING) AS w FROM t",
		"SELECT id, min(x) OVER (ORDER BY id ROWS BETWEEN 50000 PRECEDING AND CURRENT ROW) AS v, " +
			"sum(x) OVER (ORDER BY id ROWS BETWEEN 50000 PRECEDING AND 10 FOLLOWING) AS w FROM t",
		"SELECT id, count(x) OVER (ORDER BY id ROWS BETWEEN 20000 PRECEDING AND 20000 FOLLOWING EXCLUDE CURRENT ROW) AS v, " +
			"max(s) OVER (ORDER BY id ROWS BETWEEN 3000 PRECEDING AND 3000 FOLLOWING EXCLUDE CURRENT ROW) AS w FROM t",
		"SELECT id, first_value(x) OVER (ORDER BY id ROWS BETWEEN 30000 PRECEDING AND 5 PRECEDING) AS v, " +
			"avg(f) OVER (ORDER BY id ROWS BETWEEN 5 FOLLOWING AND 40000 FOLLOWING) AS w FROM t",
		"SELECT id, sum(f) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 30000 FOLLOWING) AS v, " +
			"nth_value(x, 30000) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS w, " +
			"first_value(s) OVER (ORDER BY id ROWS BETWEEN 5000 PRECEDING AND UNBOUNDED FOLLOWING) AS u FROM t",
	})
}

// spilledMatchesInMemory runs each query over spillTable's rows spilled
// within MinGrant (on 1, 2 and 4 threads) and in memory, and checks the
// rows are the same and the peak within the grant.
func spilledMatchesInMemory(t *testing.T, rng *rand.Rand, sqls []string) {
	t.Helper()
	parallelSmall(t)
	spillThreads(t)
	rec, dir := spillTable(t, rng)
	for _, sql := range sqls {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		got, st, want := runSpilledAndInMemory(t, q, rec, dir)
		if st.PeakBytes > MinGrant {
			t.Errorf("%s: peak %d bytes over the %d-byte grant", sql, st.PeakBytes, MinGrant)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d rows spilled, %d in memory, or other rows", sql, len(got), len(want))
		}
	}
}
