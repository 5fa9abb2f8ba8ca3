package windower

import (
	"testing"

	"github.com/strata-db/strata/windower/sqlparse"
)

// TestReadsPeers: a group finds its peer groups when a call reads them
// (rank and its kin; frames in RANGE or GROUPS mode, the default frame
// with ORDER BY among them; EXCLUDE GROUP or TIES), and not for
// positional calls and ROWS frames alone.
func TestReadsPeers(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT row_number() OVER w, lag(x) OVER w, lead(x, 2) OVER w, ntile(3) OVER w FROM t WINDOW w AS (PARTITION BY g ORDER BY x)": false,
		"SELECT sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM t":                              false,
		"SELECT max(s) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) FROM t":                          false,
		"SELECT row_number() OVER w, rank() OVER w FROM t WINDOW w AS (PARTITION BY g ORDER BY x)":                                     true,
		"SELECT cume_dist() OVER (ORDER BY x) FROM t":                                                                                  true,
		"SELECT first_value(s) OVER (PARTITION BY g ORDER BY x) FROM t":                                                                true,
		"SELECT sum(x) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE TIES) FROM t":                                 true,
		"SELECT count(*) OVER (ORDER BY x ROWS UNBOUNDED PRECEDING EXCLUDE GROUP) FROM t":                                              true,
		"SELECT lag(x) OVER w, sum(x) OVER w FROM t WINDOW w AS (ORDER BY t GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW)":               true,
		"SELECT avg(x) OVER (ORDER BY t RANGE BETWEEN INTERVAL '1 hour' PRECEDING AND CURRENT ROW) FROM t":                             true,
	} {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		p, err := compile(q, diffSchema)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if len(p.groups) != 1 {
			t.Fatalf("%s: %d window groups, want 1", sql, len(p.groups))
		}
		if got := readsPeers(p.groups[0]); got != want {
			t.Errorf("%s: readsPeers = %v, want %v", sql, got, want)
		}
	}
}
