package sqlparse

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
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
	if got, _ := f.Start.Offset.Interval(); got != (messages.Interval{Days: 1, Micros: 2 * 3600e6}) {
		t.Errorf("start offset %+v", got)
	}
	if got, _ := f.End.Offset.Interval(); got != (messages.Interval{Micros: 1800e6}) {
		t.Errorf("end offset %+v", got)
	}
	// The example of the issue: a month is a calendar month, not 30 days.
	q, err = Parse(`SELECT id, sum(x) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '1 month' PRECEDING AND CURRENT ROW) FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	if o := q.Select[1].Window.Frame.Start.Offset; o.IntervalMonths == nil || *o.IntervalMonths != 1 || o.IntervalDays != nil || o.IntervalMicros != nil {
		t.Errorf("INTERVAL '1 month' is %+v, want months 1 only", o)
	}
}

// intervalCase is a row of testdata/intervals.txt.
type intervalCase struct {
	line  int
	expr  string
	want  messages.Interval
	err   string // PostgreSQL's message, when the literal is refused
	pg17  bool   // PostgreSQL 17's result, which earlier versions do not give
	infin bool   // +/-infinity
}

func intervalCases(t *testing.T) []intervalCase {
	data, err := os.ReadFile(filepath.Join("testdata", "intervals.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []intervalCase
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			t.Fatalf("intervals.txt:%d: no tab", n+1)
		}
		c := intervalCase{line: n + 1, expr: f[0], pg17: len(f) > 2 && f[2] == "pg17"}
		if msg, ok := strings.CutPrefix(f[1], "error: "); ok {
			c.err = msg
		} else if _, err := fmt.Sscanf(f[1], "%d %d %d", &c.want.Months, &c.want.Days, &c.want.Micros); err != nil {
			t.Fatalf("intervals.txt:%d: %v", n+1, err)
		}
		c.infin = c.want == messages.Interval{Months: math.MaxInt32, Days: math.MaxInt32, Micros: math.MaxInt64} ||
			c.want == messages.Interval{Months: math.MinInt32, Days: math.MinInt32, Micros: math.MinInt64}
		out = append(out, c)
	}
	return out
}

// TestParseIntervalSpellings parses every interval of testdata/intervals.txt
// as a RANGE frame offset: units, abbreviations and plurals, @ and ago,
// signs and fractions, hh:mm:ss, years-months, ISO 8601 in both formats,
// and field qualifiers such as INTERVAL '1' HOUR.
func TestParseIntervalSpellings(t *testing.T) {
	for _, c := range intervalCases(t) {
		sql := "SELECT count(*) OVER (ORDER BY ts RANGE BETWEEN " + c.expr + " PRECEDING AND CURRENT ROW) FROM t"
		q, err := Parse(sql)
		switch {
		case c.err != "":
			var pe *Error
			if !errors.As(err, &pe) || pe.Msg != c.err || !errors.Is(err, ErrInvalid) {
				t.Errorf("intervals.txt:%d: %s: got %v, want ErrInvalid %q", c.line, c.expr, err, c.err)
			}
		case c.want.Sign() < 0:
			// A negative offset is refused after the interval is read.
			var pe *Error
			if !errors.As(err, &pe) || pe.Msg != "invalid preceding or following size in window function" {
				t.Errorf("intervals.txt:%d: %s: got %v, want the negative-offset error", c.line, c.expr, err)
			}
			got, err := offsetOf(c.expr)
			if err != nil || got != c.want {
				t.Errorf("intervals.txt:%d: %s = %+v, %v; want %+v", c.line, c.expr, got, err, c.want)
			}
		case err != nil:
			t.Errorf("intervals.txt:%d: %s: %v", c.line, c.expr, err)
		default:
			got, ok := q.Select[0].Window.Frame.Start.Offset.Interval()
			if !ok || got != c.want {
				t.Errorf("intervals.txt:%d: %s = %+v, want %+v", c.line, c.expr, got, c.want)
			}
		}
	}
}

// offsetOf reads expr as a frame offset without the frame's checks.
func offsetOf(expr string) (messages.Interval, error) {
	tree, err := pg.Parse("SELECT " + expr)
	if err != nil {
		return messages.Interval{}, err
	}
	p := &parser{sql: "SELECT " + expr}
	v, err := (&exprParser{p: p}).frameOffset(tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val)
	if err != nil {
		return messages.Interval{}, err
	}
	iv, _ := v.Interval()
	return iv, nil
}

func TestParseIntervalTypmod(t *testing.T) {
	cases := []struct {
		sql  string
		want string // error
	}{
		{`SELECT count(*) OVER (ORDER BY ts RANGE '1'::"interval"(1000) PRECEDING) FROM t`, "invalid INTERVAL type modifier"},
		{`SELECT count(*) OVER (ORDER BY ts RANGE '1'::"interval"(1, 2, 3) PRECEDING) FROM t`, "invalid INTERVAL type modifier"},
		{`SELECT count(*) OVER (ORDER BY ts RANGE '1'::"interval"(4096, -1) PRECEDING) FROM t`, "INTERVAL(-1) precision must not be negative"},
	}
	for _, c := range cases {
		_, err := Parse(c.sql)
		var pe *Error
		if !errors.As(err, &pe) || pe.Msg != c.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid %q", c.sql, err, c.want)
		}
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
		{"SELECT avg(x) OVER (ORDER BY t RANGE INTERVAL '1 fortnight' PRECEDING) FROM t", ErrInvalid, `column 47: invalid input syntax for type interval: "1 fortnight"`},
		{"SELECT avg(x) OVER (ORDER BY t RANGE INTERVAL '-1 month' PRECEDING) FROM t", ErrInvalid, "invalid preceding or following size in window function"},
		{"SELECT avg(x) OVER (ORDER BY t RANGE INTERVAL '1 month -31 days' PRECEDING) FROM t", ErrInvalid, "invalid preceding or following size in window function"},
		{"SELECT avg(x) OVER (ORDER BY t ROWS INTERVAL '1 month' PRECEDING) FROM t", ErrInvalid, "ROWS frame offset must be an integer"},
		{"SELECT avg(x) OVER (ORDER BY t RANGE INTERVAL '99999999999 years' PRECEDING) FROM t", ErrInvalid, "interval field value out of range"},
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

// FuzzParseInterval feeds interval text and field qualifiers to the
// interval parser, which must return a value or an error, never panic.
func FuzzParseInterval(f *testing.F) {
	data, _ := os.ReadFile(filepath.Join("testdata", "intervals.txt"))
	for _, line := range strings.Split(string(data), "\n") {
		if _, lit, ok := strings.Cut(line, "'"); ok {
			lit, _, _ = strings.Cut(lit, "'")
			f.Add(lit, uint8(0), int8(-1))
		}
	}
	masks := []int{IntervalFullRange, maskYear, maskMonth, maskDay, maskHour, maskMinute, maskSecond,
		maskYear | maskMonth, maskDay | maskHour, maskDay | maskHour | maskMinute, maskDay | maskHour | maskMinute | maskSecond,
		maskHour | maskMinute, maskHour | maskMinute | maskSecond, maskMinute | maskSecond}
	f.Fuzz(func(t *testing.T, s string, field uint8, precision int8) {
		p := IntervalFullPrecision
		if precision >= 0 {
			p = int(precision % 7)
		}
		iv, err := ParseIntervalTyped(s, masks[int(field)%len(masks)], p)
		if err == nil {
			_ = iv.Sign()
		}
	})
}
