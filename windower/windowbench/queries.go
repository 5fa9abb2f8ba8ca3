// Package windowbench is the window-function benchmark suite: its queries
// and the tables they read. Three suites run it: windower's Go benchmarks,
// `strata bench window`, and the comparison with DuckDB and PostgreSQL in
// bench/ (its own module). A query's Name is stable: bench/results.json,
// its charts and BENCHMARKS.md key on it.
//
// # Queries
//
// A query's SQL is PostgreSQL syntax, which DuckDB and strata's parser
// (windower/sqlparse) accept alike, and reads FROM {{table}}, one of:
//
//	w       Table stored in id order: not sorted on any window key
//	w_by_a  the same rows stored sorted on a
//	big     a series of timestamps ts and values x (WriteSeries), almost in
//	        ts order; the spilling case's
//
// Query.Text puts the table's name in. Outputs names the output columns in
// select order, for suites that consume every output (the peers' timed
// form aggregates them, so no window is pruned away).
//
// The spilling case (Spill) runs over a large series (`strata bench window
// --big-rows`, 10M rows) within SpillGrant, so its sort spills; the
// comparison with DuckDB and PostgreSQL leaves it out, their memory
// settings not being a grant.
//
// # Tables
//
// Generate makes the rows of w from a seed, the same rows for every
// system; see Table for its columns. WriteSeries writes big a batch at a
// time, so ten million rows cost no memory.
package windowbench

import (
	"fmt"
	"strings"
)

// The tables a query reads.
const (
	TableByID   = "w"      // Table stored in id order
	TableByA    = "w_by_a" // the same rows stored sorted on a
	TableSeries = "big"    // a timestamp series, one partition (WriteSeries)
)

// SpillGrant is the memory grant of the spilling case.
const SpillGrant = 64 << 20

// Query is one query of the suite.
type Query struct {
	Name    string   // short name used in tables and charts; stable
	Title   string   // what it measures
	Table   string   // TableByID, TableByA or TableSeries
	SQL     string   // the query, FROM {{table}}
	Outputs []string // output column names, in select order
	// Spill: run over a large TableSeries within SpillGrant.
	Spill bool `json:",omitempty"`
}

// Text is the query's SQL with its table's name.
func (q Query) Text() string { return strings.ReplaceAll(q.SQL, "{{table}}", q.Table) }

// Queries returns the suite, in report order.
func Queries() []Query {
	return []Query{
		{
			Name: "q0_unsorted", Title: "Q0: count(*) OVER (PARTITION BY a), n distinct a, input not sorted on a",
			Table: TableByID, SQL: "SELECT a, count(*) OVER (PARTITION BY a) AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "q0_presorted", Title: "Q0 over input stored sorted on a",
			Table: TableByA, SQL: "SELECT a, count(*) OVER (PARTITION BY a) AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "q0_one_partition", Title: "Q0 with one partition (same rows)",
			Table: TableByID, SQL: "SELECT c, count(*) OVER (PARTITION BY c) AS n FROM {{table}}", Outputs: []string{"c", "n"},
		},
		{
			// Q0's per-partition cost isolated: the same 1M-distinct column
			// decoded as in q0_unsorted, but one partition (q0_one_partition
			// also decodes a cheaper constant column).
			Name: "q0_one_partition_distinct", Title: "count(*) OVER () beside the 1M-distinct column a: one partition",
			Table: TableByID, SQL: "SELECT a, count(*) OVER () AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			// q0_presorted's per-partition cost isolated: the same stored
			// column (a, in the table sorted on a) decoded, one partition.
			// Sorted, a is LZ4 in short matches that decode 2.7 times
			// slower than a in id order, so q0_one_partition_distinct is
			// not q0_presorted's twin.
			Name: "q0_one_partition_sorted", Title: "count(*) OVER () beside the 1M-distinct column a stored sorted: one partition",
			Table: TableByA, SQL: "SELECT a, count(*) OVER () AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "mod1000", Title: "count(*) OVER (PARTITION BY a % 1000)",
			Table: TableByID, SQL: "SELECT a, count(*) OVER (PARTITION BY a % 1000) AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "rownum_rank", Title: "row_number() and rank() OVER (PARTITION BY g ORDER BY x)",
			Table: TableByID,
			SQL: "SELECT id, row_number() OVER (PARTITION BY g ORDER BY x) AS rn, " +
				"rank() OVER (PARTITION BY g ORDER BY x) AS rk FROM {{table}}",
			Outputs: []string{"id", "rn", "rk"},
		},
		{
			Name: "sum_rows10", Title: "sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)",
			Table: TableByID,
			SQL: "SELECT id, sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS s " +
				"FROM {{table}}",
			Outputs: []string{"id", "s"},
		},
		{
			Name: "avg_range_1h", Title: "avg(x) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN INTERVAL '1 hour' PRECEDING AND CURRENT ROW)",
			Table: TableByID,
			SQL: "SELECT id, avg(x) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN INTERVAL '1 hour' PRECEDING AND CURRENT ROW) AS m " +
				"FROM {{table}}",
			Outputs: []string{"id", "m"},
		},
		{
			Name: "avg_range_ts", Title: "avg(x) OVER (ORDER BY t RANGE BETWEEN INTERVAL '10 seconds' PRECEDING AND CURRENT ROW), one partition",
			Table: TableByID,
			SQL: "SELECT id, avg(x) OVER (ORDER BY t RANGE BETWEEN INTERVAL '10 seconds' PRECEDING AND CURRENT ROW) AS m " +
				"FROM {{table}}",
			Outputs: []string{"id", "m"},
		},
		minRowsQuery(10),
		minRowsQuery(1000),
		minRowsQuery(10000),
		{
			Name: "lag_lead", Title: "lag(x) and lead(x, 2, -1) OVER (PARTITION BY g ORDER BY t)",
			Table: TableByID,
			SQL: "SELECT id, lag(x) OVER (PARTITION BY g ORDER BY t) AS prev, " +
				"lead(x, 2, -1) OVER (PARTITION BY g ORDER BY t) AS next2 FROM {{table}}",
			Outputs: []string{"id", "prev", "next2"},
		},
		{
			Name: "lag_lead_one_partition", Title: "lag(x) and lead(x, 2, 0) OVER (ORDER BY t)",
			Table: TableByID,
			SQL: "SELECT id, lag(x) OVER (ORDER BY t) AS prev, " +
				"lead(x, 2, 0) OVER (ORDER BY t) AS next2 FROM {{table}}",
			Outputs: []string{"id", "prev", "next2"},
		},
		{
			Name: "first_value_s", Title: "first_value(s) OVER (PARTITION BY g ORDER BY x), s a nullable string",
			Table:   TableByID,
			SQL:     "SELECT id, first_value(s) OVER (PARTITION BY g ORDER BY x) AS fv FROM {{table}}",
			Outputs: []string{"id", "fv"},
		},
		{
			Name: "max_s_rows10", Title: "max(s) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)",
			Table: TableByID,
			SQL: "SELECT id, max(s) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS m " +
				"FROM {{table}}",
			Outputs: []string{"id", "m"},
		},
		{
			Name: "lag_k", Title: "lag(k) OVER (PARTITION BY g ORDER BY x), k a fixed-width string",
			Table:   TableByID,
			SQL:     "SELECT id, lag(k) OVER (PARTITION BY g ORDER BY x) AS prev FROM {{table}}",
			Outputs: []string{"id", "prev"},
		},
		{
			Name: "count_by_s", Title: "count(*) OVER (PARTITION BY s): a string partition key, NULLs one partition",
			Table: TableByID, SQL: "SELECT s, count(*) OVER (PARTITION BY s) AS n FROM {{table}}", Outputs: []string{"s", "n"},
		},
		{
			Name: "spill_one_partition", Title: "sum(x) OVER (ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW), one large partition sorted within a 64MiB grant",
			Table:   TableSeries,
			SQL:     "SELECT ts, sum(x) OVER (ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS s FROM {{table}}",
			Outputs: []string{"ts", "s"},
			Spill:   true,
		},
	}
}

func minRowsQuery(frame int) Query {
	return Query{
		Name:  fmt.Sprintf("min_rows%d", frame),
		Title: fmt.Sprintf("min(x) OVER (ORDER BY t ROWS BETWEEN %d PRECEDING AND CURRENT ROW)", frame),
		Table: TableByID,
		SQL: fmt.Sprintf("SELECT id, min(x) OVER (ORDER BY t ROWS BETWEEN %d PRECEDING AND CURRENT ROW) AS m FROM {{table}}",
			frame),
		Outputs: []string{"id", "m"},
	}
}
