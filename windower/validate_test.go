package windower_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
)

func TestInvalidQueries(t *testing.T) {
	rec := loadEmpsalary(t)
	defer rec.Release()
	neg := int64(-3)
	cases := []struct {
		sql  string
		edit func(q *messages.WindowQuery)
		opts windower.Options
		is   error
		want string
	}{
		{sql: "SELECT nosuch FROM empsalary", is: windower.ErrInvalidQuery, want: `select item 1 (nosuch): column "nosuch" does not exist`},
		{sql: "SELECT sum(depname) OVER () FROM empsalary", is: windower.ErrInvalidQuery, want: "sum(string) does not exist"},
		{sql: "SELECT avg(salary) OVER (ORDER BY depname RANGE 2 PRECEDING) FROM empsalary", is: windower.ErrInvalidQuery, want: "RANGE with offset is not supported for an order key of type utf8"},
		{sql: "SELECT avg(salary) OVER (ORDER BY salary RANGE INTERVAL '1 month' PRECEDING) FROM empsalary", is: windower.ErrInvalidQuery, want: "RANGE offset for an integer order key must be an integer"},
		{sql: "SELECT avg(salary) OVER (ORDER BY salary RANGE INTERVAL '1 month' PRECEDING) FROM empsalary",
			edit: func(q *messages.WindowQuery) {
				q.Select[0].Window.Frame.Start.Offset = messages.IntervalValue(messages.Interval{Months: 1, Days: -31})
			},
			is: windower.ErrInvalidQuery, want: "invalid preceding or following size in window function"},
		{sql: "SELECT ntile(0) OVER () FROM empsalary", is: windower.ErrInvalidQuery, want: "ntile must be greater than zero"},
		{sql: "SELECT lag(salary, empno) OVER () FROM empsalary", is: windower.ErrInvalidQuery, want: "must be a constant"},
		{sql: "SELECT lag(salary, 1, 'x') OVER () FROM empsalary", is: windower.ErrInvalidQuery, want: "does not match"},
		{sql: "SELECT salary FROM empsalary WHERE depname > 3", is: windower.ErrInvalidQuery, want: "cannot compare string with integer"},
		{sql: "SELECT sum(salary) OVER (ORDER BY salary ROWS 1 PRECEDING) FROM empsalary",
			edit: func(q *messages.WindowQuery) { q.Select[0].Window.Frame.Start.Offset.Int = &neg },
			is:   windower.ErrInvalidQuery, want: "must not be negative"},
		{sql: "SELECT sum(salary) OVER (ORDER BY salary ROWS 1 PRECEDING) FROM empsalary",
			edit: func(q *messages.WindowQuery) { q.Select[0].Window.Frame.Start.Offset = &messages.Value{} },
			is:   windower.ErrInvalidQuery, want: "must not be null"},
		{sql: "SELECT sum(salary) OVER () FROM empsalary",
			edit: func(q *messages.WindowQuery) { q.Select[0].Window.Func = "median" },
			is:   windower.ErrInvalidQuery, want: `unknown window function "median"`},
		{sql: "SELECT salary FROM empsalary", opts: windower.Options{Grant: 1024}, is: windower.ErrGrantTooSmall, want: "1024 bytes"},
	}
	for _, c := range cases {
		q, err := sqlparse.Parse(c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if c.edit != nil {
			c.edit(q)
		}
		_, err = windower.RunRecords(context.Background(), q, empSchema, []arrow.RecordBatch{rec}, c.opts)
		if err == nil || !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %v containing %q", c.sql, err, c.is, c.want)
		}
	}
}
