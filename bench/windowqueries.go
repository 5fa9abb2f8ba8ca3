package main

import (
	"fmt"
	"strings"
)

// windowQuery is one query of the window suite. SQL is the same text for every
// system (PostgreSQL syntax, which DuckDB and strata's parser accept).
type windowQuery struct {
	Name    string   // short name used in tables and charts
	Title   string   // what it measures
	Table   string   // "w" (stored in id order) or "w_by_a" (stored sorted on a)
	SQL     string   // the query, FROM {{table}}
	Outputs []string // output column names, in select order
}

func (q windowQuery) text() string { return strings.ReplaceAll(q.SQL, "{{table}}", q.Table) }

// timedText is the form the peers are timed with: the query computed in full
// and its output consumed by aggregates, so that no system is timed shipping
// a million rows to a client. Every output column is consumed, so no window
// can be pruned away (max of a string output reads every string). The
// result checks fetch the full result instead.
func (q windowQuery) timedText() string {
	aggs := []string{"count(*)"}
	for _, c := range q.Outputs {
		aggs = append(aggs, fmt.Sprintf("max(%s)", c))
	}
	return fmt.Sprintf("SELECT %s FROM (%s) q", strings.Join(aggs, ", "), q.text())
}

// windowQueries is the window suite of the windower issue.
func windowQueries() []windowQuery {
	return []windowQuery{
		{
			Name: "q0_unsorted", Title: "Q0: count(*) OVER (PARTITION BY a), n distinct a, input not sorted on a",
			Table: "w", SQL: "SELECT a, count(*) OVER (PARTITION BY a) AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "q0_presorted", Title: "Q0 over input stored sorted on a",
			Table: "w_by_a", SQL: "SELECT a, count(*) OVER (PARTITION BY a) AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "q0_one_partition", Title: "Q0 with one partition (same rows)",
			Table: "w", SQL: "SELECT c, count(*) OVER (PARTITION BY c) AS n FROM {{table}}", Outputs: []string{"c", "n"},
		},
		{
			Name: "mod1000", Title: "count(*) OVER (PARTITION BY a % 1000)",
			Table: "w", SQL: "SELECT a, count(*) OVER (PARTITION BY a % 1000) AS n FROM {{table}}", Outputs: []string{"a", "n"},
		},
		{
			Name: "rownum_rank", Title: "row_number() and rank() OVER (PARTITION BY g ORDER BY x)",
			Table: "w",
			SQL: "SELECT id, row_number() OVER (PARTITION BY g ORDER BY x) AS rn, " +
				"rank() OVER (PARTITION BY g ORDER BY x) AS rk FROM {{table}}",
			Outputs: []string{"id", "rn", "rk"},
		},
		{
			Name: "sum_rows10", Title: "sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)",
			Table: "w",
			SQL: "SELECT id, sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS s " +
				"FROM {{table}}",
			Outputs: []string{"id", "s"},
		},
		{
			Name: "avg_range_1h", Title: "avg(x) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN INTERVAL '1 hour' PRECEDING AND CURRENT ROW)",
			Table: "w",
			SQL: "SELECT id, avg(x) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN INTERVAL '1 hour' PRECEDING AND CURRENT ROW) AS m " +
				"FROM {{table}}",
			Outputs: []string{"id", "m"},
		},
		minRowsQuery(10),
		minRowsQuery(1000),
		minRowsQuery(10000),
		{
			Name: "lag_lead", Title: "lag(x) and lead(x, 2, -1) OVER (PARTITION BY g ORDER BY t)",
			Table: "w",
			SQL: "SELECT id, lag(x) OVER (PARTITION BY g ORDER BY t) AS prev, " +
				"lead(x, 2, -1) OVER (PARTITION BY g ORDER BY t) AS next2 FROM {{table}}",
			Outputs: []string{"id", "prev", "next2"},
		},
		{
			Name: "first_value_s", Title: "first_value(s) OVER (PARTITION BY g ORDER BY x), s a nullable string",
			Table:   "w",
			SQL:     "SELECT id, first_value(s) OVER (PARTITION BY g ORDER BY x) AS fv FROM {{table}}",
			Outputs: []string{"id", "fv"},
		},
		{
			Name: "max_s_rows10", Title: "max(s) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)",
			Table: "w",
			SQL: "SELECT id, max(s) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS m " +
				"FROM {{table}}",
			Outputs: []string{"id", "m"},
		},
		{
			Name: "lag_k", Title: "lag(k) OVER (PARTITION BY g ORDER BY x), k a fixed-width string",
			Table:   "w",
			SQL:     "SELECT id, lag(k) OVER (PARTITION BY g ORDER BY x) AS prev FROM {{table}}",
			Outputs: []string{"id", "prev"},
		},
		{
			Name: "count_by_s", Title: "count(*) OVER (PARTITION BY s): a string partition key, NULLs one partition",
			Table: "w", SQL: "SELECT s, count(*) OVER (PARTITION BY s) AS n FROM {{table}}", Outputs: []string{"s", "n"},
		},
	}
}

func minRowsQuery(frame int) windowQuery {
	return windowQuery{
		Name:  fmt.Sprintf("min_rows%d", frame),
		Title: fmt.Sprintf("min(x) OVER (ORDER BY t ROWS BETWEEN %d PRECEDING AND CURRENT ROW)", frame),
		Table: "w",
		SQL: fmt.Sprintf("SELECT id, min(x) OVER (ORDER BY t ROWS BETWEEN %d PRECEDING AND CURRENT ROW) AS m FROM {{table}}",
			frame),
		Outputs: []string{"id", "m"},
	}
}
