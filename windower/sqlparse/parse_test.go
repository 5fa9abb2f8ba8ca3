package sqlparse

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/messages"
)

var update = flag.Bool("update", false, "rewrite testdata/parse.golden")

// TestParseGolden parses every query of testdata/queries.sql (one per
// line) and compares the JSON of the result with testdata/parse.golden.
func TestParseGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "queries.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		q, err := Parse(line)
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		q.SQL = ""
		j, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(line + "\n" + string(j) + "\n\n")
	}
	golden := filepath.Join("testdata", "parse.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("parse results differ from %s (run with -update to accept):\n%s", golden, out.String())
	}
}

func TestParseSemantics(t *testing.T) {
	q, err := Parse(`SELECT depname, empno, salary,
		rank() OVER (w ORDER BY salary DESC),
		sum(salary) OVER w AS total,
		count(*) FILTER (WHERE salary > 4000) OVER (w ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE TIES)
		FROM empsalary WHERE depname <> 'sales' AND 100 < salary
		WINDOW w AS (PARTITION BY depname) ORDER BY 2 DESC LIMIT 5`)
	if err != nil {
		t.Fatal(err)
	}
	if q.Table != "empsalary" || q.Limit != 5 || len(q.Select) != 6 {
		t.Fatalf("table %q limit %d items %d", q.Table, q.Limit, len(q.Select))
	}
	rank := q.Select[3]
	if rank.Alias != "rank" || rank.Window.Func != "rank" {
		t.Fatalf("item 4: %+v", rank)
	}
	if len(rank.Window.PartitionBy) != 1 || rank.Window.PartitionBy[0].Column != "depname" {
		t.Errorf("rank does not inherit PARTITION BY: %+v", rank.Window.PartitionBy)
	}
	if o := rank.Window.OrderBy; len(o) != 1 || !o[0].Desc || !o[0].NullsFirst {
		t.Errorf("DESC must default to NULLS FIRST: %+v", o)
	}
	if q.Select[4].Alias != "total" || q.Select[4].Window.Frame != nil || len(q.Select[4].Window.OrderBy) != 0 {
		t.Errorf("OVER w: %+v", q.Select[4].Window)
	}
	cnt := q.Select[5].Window
	if !cnt.Star || len(cnt.Filter) != 1 || cnt.Frame == nil || cnt.Frame.Exclude != messages.ExcludeTies || *cnt.Frame.Start.Offset.Int != 1 {
		t.Errorf("count(*) FILTER ... : %+v frame %+v", cnt, cnt.Frame)
	}
	if len(q.Where) != 2 || q.Where[1].Op != ">" || q.Where[1].Left.Column != "salary" {
		t.Errorf("where: %+v (100 < salary must flip to salary > 100)", q.Where)
	}
	if len(q.OrderBy) != 1 || q.OrderBy[0].Expr.Column != "empno" || !q.OrderBy[0].Desc {
		t.Errorf("ORDER BY 2 DESC: %+v", q.OrderBy)
	}
}

func TestParseInterval(t *testing.T) {
	q, err := Parse(`SELECT avg(x) OVER (ORDER BY t RANGE BETWEEN INTERVAL '1 day 2 hours' PRECEDING AND '30 minutes'::interval FOLLOWING) FROM m`)
	if err != nil {
		t.Fatal(err)
	}
	f := q.Select[0].Window.Frame
	if *f.Start.Offset.IntervalMicros != 26*3600e6 || *f.End.Offset.IntervalMicros != 1800e6 {
		t.Fatalf("offsets %d %d", *f.Start.Offset.IntervalMicros, *f.End.Offset.IntervalMicros)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		sql  string
		kind error
		want string // substring of the message, with the position
	}{
		{"SELEC 1", ErrSyntax, "line 1 column 1"},
		{"SELECT a FROM t; SELECT b FROM t", ErrUnsupported, "2 statements"},
		{"SELECT a FROM t JOIN u ON true", ErrUnsupported, "joins"},
		{"SELECT sum(a) FROM t", ErrUnsupported, "column 8: aggregate sum without OVER"},
		{"SELECT median(a) OVER () FROM t", ErrUnsupported, "column 8: window function median"},
		{"SELECT a FROM t WHERE a = 1 OR b = 2", ErrUnsupported, "no OR"},
		{"SELECT rank() OVER w FROM t", ErrInvalid, `window "w" does not exist`},
		{"SELECT rank() OVER (w ORDER BY a) FROM t WINDOW w AS (ORDER BY b)", ErrInvalid, "cannot override ORDER BY"},
		{"SELECT rank() OVER (w PARTITION BY a) FROM t WINDOW w AS (ORDER BY b)", ErrInvalid, "cannot override PARTITION BY"},
		{"SELECT rank() OVER (w) FROM t WINDOW w AS (ORDER BY b ROWS 1 PRECEDING)", ErrInvalid, "because it has a frame clause"},
		{"SELECT sum(a) OVER (ORDER BY a ROWS -1 PRECEDING) FROM t", ErrInvalid, "must not be negative"},
		{"SELECT sum(a) OVER (ORDER BY a ROWS NULL PRECEDING) FROM t", ErrInvalid, "must not be null"},
		{"SELECT sum(a) OVER (ORDER BY a, b RANGE 1 PRECEDING) FROM t", ErrInvalid, "exactly one ORDER BY column"},
		{"SELECT sum(a) OVER (GROUPS 1 PRECEDING) FROM t", ErrInvalid, "GROUPS mode requires an ORDER BY"},
		{"SELECT rank() FILTER (WHERE a > 1) OVER () FROM t", ErrUnsupported, "FILTER is not implemented"},
		{"SELECT sum(DISTINCT a) OVER () FROM t", ErrUnsupported, "DISTINCT"},
		{"SELECT * FROM t", ErrUnsupported, "SELECT *"},
		{"SELECT a FROM t OFFSET 3", ErrUnsupported, "OFFSET"},
		{"SELECT avg(x) OVER (ORDER BY t RANGE INTERVAL '1 month' PRECEDING) FROM t", ErrUnsupported, "month"},
		{"SELECT lower(a) FROM t", ErrUnsupported, "function lower"},
		{"SELECT a\nFROM t\nWHERE a LIKE 'x'", ErrUnsupported, "line 3 column 9"},
	}
	for _, c := range cases {
		_, err := Parse(c.sql)
		var pe *Error
		if err == nil || !errors.Is(err, c.kind) || !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %v containing %q", c.sql, err, c.kind, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	data, _ := os.ReadFile(filepath.Join("testdata", "queries.sql"))
	for _, line := range strings.Split(string(data), "\n") {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		q, err := Parse(sql)
		if err != nil {
			return
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("Parse returned a query that does not validate: %v", err)
		}
	})
}
