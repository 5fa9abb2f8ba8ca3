package sqlparse

// TestIntervalsAgainstPostgres checks testdata/intervals.txt against a
// real PostgreSQL. It runs only when STRATA_TEST_POSTGRES=1; psql must be
// on PATH and the server given by the usual libpq variables (PGHOST,
// PGPORT, PGUSER, PGDATABASE). Rows marked pg17 are checked only against
// PostgreSQL 17 or later.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-db/strata/messages"
)

func psqlQuery(sql string) (out, errOut string, err error) {
	cmd := exec.Command("psql", "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1", "-c", sql)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return strings.TrimSpace(stdout.String()), stderr.String(), err
}

func TestIntervalsAgainstPostgres(t *testing.T) {
	if os.Getenv("STRATA_TEST_POSTGRES") != "1" {
		t.Skip("set STRATA_TEST_POSTGRES=1 and the PG* variables to compare with a PostgreSQL server")
	}
	v, _, err := psqlQuery("SHOW server_version_num")
	if err != nil {
		t.Fatalf("psql: %v", err)
	}
	version, _ := strconv.Atoi(v)
	for _, c := range intervalCases(t) {
		if c.pg17 && version < 170000 {
			continue
		}
		// The three fields: extract(hour) is the time in whole hours,
		// minute and microseconds the rest.
		sql := fmt.Sprintf(`SELECT extract(year from i)::bigint*12 + extract(month from i)::bigint, extract(day from i)::bigint,
			extract(hour from i)::bigint*3600000000 + extract(minute from i)::bigint*60000000 + extract(microseconds from i)::bigint
			FROM (SELECT %s AS i) s`, c.expr)
		if c.infin {
			sql = fmt.Sprintf("SELECT (%s) = '%sinfinity'::interval", c.expr, map[bool]string{true: "", false: "-"}[c.want.Months > 0])
		}
		out, errOut, err := psqlQuery(sql)
		if err != nil {
			msg, _, _ := strings.Cut(errOut, "\n")
			msg = strings.TrimPrefix(msg, "ERROR:  ")
			if c.err == "" || msg != c.err {
				t.Errorf("intervals.txt:%d: %s: postgres: %s; want %+v %q", c.line, c.expr, msg, c.want, c.err)
			}
			continue
		}
		if c.err != "" {
			t.Errorf("intervals.txt:%d: %s: postgres accepts it (%s), want error %q", c.line, c.expr, out, c.err)
			continue
		}
		if c.infin {
			if out != "t" {
				t.Errorf("intervals.txt:%d: %s: postgres does not make it %+v", c.line, c.expr, c.want)
			}
			continue
		}
		var got messages.Interval
		if _, err := fmt.Sscanf(out, "%d %d %d", &got.Months, &got.Days, &got.Micros); err != nil || got != c.want {
			t.Errorf("intervals.txt:%d: %s: postgres %q, want %+v", c.line, c.expr, out, c.want)
		}
	}
}
