package windower

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/windower/sqlparse"
)

// literalTable is 100 rows: i int32 0..99, f = i/4, b = i is even, d the
// day 2024-01-01 + i, ts 2024-01-01 00:00 + i hours, tz the same instant
// with a zone.
func literalTable(t *testing.T) (*arrow.Schema, arrow.RecordBatch) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int32},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "tz", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
	bld := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer bld.Release()
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		bld.Field(0).(*array.Int32Builder).Append(int32(i))
		bld.Field(1).(*array.Float64Builder).Append(float64(i) / 4)
		bld.Field(2).(*array.BooleanBuilder).Append(i%2 == 0)
		bld.Field(3).(*array.Date32Builder).Append(arrow.Date32FromTime(start.AddDate(0, 0, i)))
		ts := arrow.Timestamp(start.Add(time.Duration(i) * time.Hour).UnixMicro())
		bld.Field(4).(*array.TimestampBuilder).Append(ts)
		bld.Field(5).(*array.TimestampBuilder).Append(ts)
	}
	return schema, bld.NewRecordBatch()
}

func countRows(t *testing.T, sql string, schema *arrow.Schema, rec arrow.RecordBatch) (int, error) {
	t.Helper()
	q, err := sqlparse.Parse(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	res, err := RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{})
	if err != nil {
		return 0, err
	}
	defer res.Close()
	n := 0
	for {
		b, err := res.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		n += int(b.NumRows())
	}
}

// TestQuotedLiterals: a quoted literal compared with a column of another
// type takes the column's type, as PostgreSQL resolves a literal of
// unknown type: '41' against an integer, '2024-01-15' against a date, a
// timestamp with or without a zone; BI tools and the simple protocol send
// their parameters so. A literal that does not read as the type is an
// error naming it.
func TestQuotedLiterals(t *testing.T) {
	schema, rec := literalTable(t)
	defer rec.Release()
	for _, c := range []struct {
		where string
		want  int
	}{
		{"i > '89'", 10},
		{"i = ' 7 '", 1},
		{"f >= '24.5'", 2},
		{"f < '1e1'", 40},
		{"b = 'true'", 50},
		{"b = 'f'", 50},
		{"b = 'yes'", 50},
		{"d >= '2024-03-31'", 10},
		{"d = '2024-01-15'", 1},
		{"ts < '2024-01-01 10:00:00'", 10},
		{"ts >= '2024-01-04T03:00'", 25},
		{"ts = '2024-01-01 05:00:00.000000'", 1},
		{"ts < '2024-01-01 10:00:00+05'", 10}, // PostgreSQL ignores a zone given to a timestamp without one
		{"tz < '2024-01-01 12:00:00+02'", 10},
		{"tz < '2024-01-01T10:00:00Z'", 10},
		{"tz <= '2024-01-01'", 1},
	} {
		sql := "SELECT i FROM t WHERE " + c.where
		got, err := countRows(t, sql, schema, rec)
		if err != nil || got != c.want {
			t.Errorf("%s: %d rows, %v; want %d", sql, got, err, c.want)
		}
	}
	for _, c := range []struct{ where, want string }{
		{"i = 'seven'", `invalid input syntax for type integer: "seven"`},
		{"i = '3.5'", `invalid input syntax for type integer: "3.5"`},
		{"f > 'x'", `invalid input syntax for type double precision: "x"`},
		{"b = 'maybe'", `invalid input syntax for type boolean: "maybe"`},
		{"d = '2024-13-01'", `invalid input syntax for type date: "2024-13-01"`},
		{"ts > 'noon'", `invalid input syntax for type timestamp: "noon"`},
	} {
		sql := "SELECT i FROM t WHERE " + c.where
		_, err := countRows(t, sql, schema, rec)
		if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an invalid query saying %q", sql, err, c.want)
		}
	}
}
