package windower

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/windower/sqlparse"
)

// TestExtremumInts checks sliding min and max of an integer column
// without NULLs (scanned over narrow frames, a deque over wide ones, and
// both in one partition when the frame's width varies) against brute
// force: ROWS frames on either side of the scan's width, frames that grow
// from UNBOUNDED PRECEDING, and RANGE frames over clustered keys whose
// width crosses it row by row.
func TestExtremumInts(t *testing.T) {
	const n = 3000
	rng := rand.New(rand.NewPCG(9, 10))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	v, k := make([]int64, n), make([]int64, n)
	key := int64(0)
	for i := range n {
		v[i] = rng.Int64N(1000) - 500
		if rng.IntN(6) == 0 {
			key += int64(rng.IntN(30)) // clusters of varied density
		}
		key++
		k[i] = key
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int64Builder).Append(v[i])
		b.Field(2).(*array.Int64Builder).Append(k[i])
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	type frame struct {
		sql    string
		bounds func(i int) (int, int) // rows [s, e) of row i's frame
	}
	rows := func(pre, fol int) frame {
		return frame{fmt.Sprintf("ROWS BETWEEN %d PRECEDING AND %d FOLLOWING", pre, fol),
			func(i int) (int, int) { return max(i-pre, 0), min(i+fol+1, n) }}
	}
	frames := []frame{rows(0, 0), rows(10, 0), rows(23, 0), rows(12, 11), rows(24, 0), rows(25, 3), rows(200, 0),
		{"ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", func(i int) (int, int) { return 0, i + 1 }},
		{"ROWS BETWEEN 5 FOLLOWING AND 40 FOLLOWING", func(i int) (int, int) { return min(i+5, n), min(i+41, n) }}}
	for _, r := range []int64{3, 20, 24, 26, 30, 40} {
		frames = append(frames, frame{fmt.Sprintf("RANGE BETWEEN %d PRECEDING AND CURRENT ROW", r), func(i int) (int, int) {
			s := i
			for s > 0 && k[s-1] >= k[i]-r {
				s--
			}
			return s, i + 1
		}})
	}
	for _, fn := range []string{"min", "max"} {
		for _, f := range frames {
			sql := fmt.Sprintf("SELECT id, %s(v) OVER (ORDER BY k %s) AS m FROM t", fn, f.sql)
			q, err := sqlparse.Parse(sql)
			if err != nil {
				t.Fatal(err)
			}
			res, err := RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{})
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			got := resultValues(t, res, 0, 1)
			res.Close()
			for i := range n {
				s, e := f.bounds(i)
				want := refVal{null: true, kind: kindInt}
				for j := s; j < e; j++ {
					if want.null || (fn == "min" && v[j] < want.i) || (fn == "max" && v[j] > want.i) {
						want = refVal{i: v[j], kind: kindInt}
					}
				}
				if g := got[int64(i)]; !sameValue(g, want) {
					t.Fatalf("%s: row %d: got %+v, want %+v", sql, i, g, want)
				}
			}
		}
	}
}
