package windower_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
)

var empSchema = arrow.NewSchema([]arrow.Field{
	{Name: "depname", Type: arrow.BinaryTypes.String},
	{Name: "empno", Type: arrow.PrimitiveTypes.Int32},
	{Name: "salary", Type: arrow.PrimitiveTypes.Int32},
}, nil)

func loadEmpsalary(t *testing.T) arrow.RecordBatch {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "empsalary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), empSchema)
	defer b.Release()
	for _, r := range rows[1:] {
		b.Field(0).(*array.StringBuilder).Append(r[0])
		for c := 1; c <= 2; c++ {
			v, err := strconv.Atoi(r[c])
			if err != nil {
				t.Fatal(err)
			}
			b.Field(c).(*array.Int32Builder).Append(int32(v))
		}
	}
	return b.NewRecordBatch()
}

type goldenCase struct {
	sql  string
	rows []string
	line int
}

func readGolden(t *testing.T, name string) []goldenCase {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []goldenCase
	var cur *goldenCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "":
			cur = nil
		case cur == nil:
			cases = append(cases, goldenCase{sql: line, line: n})
			cur = &cases[len(cases)-1]
		default:
			cur.rows = append(cur.rows, line)
		}
	}
	return cases
}

func formatValue(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "NULL"
	}
	switch v := a.(type) {
	case *array.Float64:
		return strconv.FormatFloat(v.Value(i), 'f', -1, 64)
	default:
		return a.ValueStr(i)
	}
}

func TestGoldenEmpsalary(t *testing.T) {
	rec := loadEmpsalary(t)
	defer rec.Release()
	for _, c := range readGolden(t, "empsalary.golden") {
		t.Run(fmt.Sprintf("line%d", c.line), func(t *testing.T) {
			q, err := sqlparse.Parse(c.sql)
			if err != nil {
				t.Fatal(err)
			}
			res, err := windower.RunRecords(context.Background(), q, empSchema, []arrow.RecordBatch{rec}, windower.Options{BatchRows: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			var got []string
			for {
				b, err := res.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for r := 0; r < int(b.NumRows()); r++ {
					var vals []string
					for c := 0; c < int(b.NumCols()); c++ {
						vals = append(vals, formatValue(b.Column(c), r))
					}
					got = append(got, strings.Join(vals, "|"))
				}
				b.Release()
			}
			if strings.Join(got, "\n") != strings.Join(c.rows, "\n") {
				t.Errorf("%s\ngot:\n%s\nwant:\n%s", c.sql, strings.Join(got, "\n"), strings.Join(c.rows, "\n"))
			}
		})
	}
}
