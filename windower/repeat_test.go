package windower

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower/sqlparse"
)

// TestSpillRepeatedLongStrings runs value functions and string extremes
// that repeat one long string on every row (first_value, nth_value,
// running max) over input of short strings within a grant the results do
// not fit in at once, from a sorted container (streamed) and an unsorted
// one (sorted in runs): the results are right and the peak stays within
// the grant. The buffer's size counts each result's strings by the
// longest string its argument has in the buffer, not the input's average.
func TestSpillRepeatedLongStrings(t *testing.T) {
	const n, long = 20000, 2000
	grant := int64(8 << 20)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	longest := "z" + strings.Repeat("y", long-1)
	build := func(order func(i int) int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
		defer b.Release()
		for k := range n {
			i := order(k)
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if i <= 1 {
				b.Field(1).(*array.StringBuilder).Append(longest)
			} else {
				b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("a%d", i%97))
			}
		}
		return b.NewRecordBatch()
	}
	sorted := build(func(k int) int { return k })
	defer sorted.Release()
	shuffled := build(func(k int) int { return (k * 7919) % n })
	defer shuffled.Release()
	dirs := map[string]string{
		"sorted":   writeContainer(t, filepath.Join(t.TempDir(), "sorted"), sorted, columnar.SortKey{{Name: "id"}}),
		"unsorted": writeContainer(t, filepath.Join(t.TempDir(), "unsorted"), shuffled, nil),
	}
	for _, sql := range []string{
		"SELECT id, first_value(u) OVER (ORDER BY id) AS v FROM t",
		"SELECT id, nth_value(u, 2) OVER (ORDER BY id) AS v FROM t",
		"SELECT id, max(u) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS v FROM t",
	} {
		for name, dir := range dirs {
			q, err := sqlparse.Parse(sql)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), q, []string{dir}, Options{Grant: grant, TempDir: t.TempDir()})
			if err != nil {
				t.Fatalf("%s over the %s container: %v", sql, name, err)
			}
			got := resultValues(t, res, 0, 1)
			st := res.Stats()
			res.Close()
			if st.PeakBytes > grant {
				t.Errorf("%s over the %s container: peak %d bytes over the %d-byte grant", sql, name, st.PeakBytes, grant)
			}
			if len(got) != n {
				t.Fatalf("%s over the %s container: %d rows, want %d", sql, name, len(got), n)
			}
			for id := int64(0); id < n; id++ {
				if v := got[id]; v.null || v.s != longest {
					if strings.Contains(sql, "nth_value") && id == 0 && v.null {
						continue
					}
					t.Fatalf("%s over the %s container: row %d: %+v, want the long string", sql, name, id, v)
				}
			}
		}
	}
}
