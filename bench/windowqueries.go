package main

import (
	"fmt"
	"strings"

	"github.com/strata-db/strata/windower/windowbench"
)

// windowQuery is one query of the window suite (windowbench, shared with
// windower's Go benchmarks and `strata bench window`). Its text is the same
// for every system (PostgreSQL syntax, which DuckDB and strata's parser
// accept).
type windowQuery = windowbench.Query

// timedText is the form the peers are timed with: the query computed in full
// and its output consumed by aggregates, so that no system is timed shipping
// a million rows to a client. Every output column is consumed, so no window
// can be pruned away (max of a string output reads every string). The
// result checks fetch the full result instead.
func timedText(q windowQuery) string {
	aggs := []string{"count(*)"}
	for _, c := range q.Outputs {
		aggs = append(aggs, fmt.Sprintf("max(%s)", c))
	}
	return fmt.Sprintf("SELECT %s FROM (%s) q", strings.Join(aggs, ", "), q.Text())
}

// windowQueries is the window suite but its spilling case: a grant is
// strata's, the peers' memory settings are not one, so a comparison of
// that case would measure nothing the others run.
func windowQueries() []windowQuery {
	var qs []windowQuery
	for _, q := range windowbench.Queries() {
		if !q.Spill {
			qs = append(qs, q)
		}
	}
	return qs
}
