package windower

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower/sqlparse"
)

// float4Table writes n rows (id, g, r real) in blocks of 64, r with two
// decimals (not exact in binary, so each float4 addition rounds) and
// some NULLs, over two containers; and the same rows as CSV for
// PostgreSQL.
func float4Table(t *testing.T, n int) ([]string, string, map[int64]float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(4, 4))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "g", Type: arrow.PrimitiveTypes.Int32},
		{Name: "r", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}, nil)
	var csv strings.Builder
	var dirs []string
	vals := map[int64]float64{} // |r| by id
	for part := range 2 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for id := part*n/2 + 1; id <= (part+1)*n/2; id++ {
			g := int32(rng.IntN(5))
			b.Field(0).(*array.Int64Builder).Append(int64(id))
			b.Field(1).(*array.Int32Builder).Append(g)
			if rng.IntN(20) == 0 {
				b.Field(2).AppendNull()
				fmt.Fprintf(&csv, "%d,%d,\n", id, g)
				continue
			}
			// Large and small magnitudes, so that rounding shows.
			r := float32(rng.IntN(2000000)-1000000) / 100
			if rng.IntN(4) == 0 {
				r *= 10000
			}
			b.Field(2).(*array.Float32Builder).Append(r)
			vals[int64(id)] = math.Abs(float64(r))
			fmt.Fprintf(&csv, "%d,%d,%s\n", id, g, strconv.FormatFloat(float64(r), 'g', -1, 32))
		}
		rec := b.NewRecordBatch()
		b.Release()
		id := fmt.Sprintf("c%04d", part)
		dir := columnar.ContainerDir(t.TempDir(), "t", "p", id)
		w, err := columnar.Create(dir, columnar.WriterOptions{Table: "t", Projection: "p", ID: id, Schema: schema,
			SortKey: columnar.SortKey{{Name: "id"}}, BlockRows: 64, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs, csv.String(), vals
}

// sum(real) is real, added in real as PostgreSQL adds it (float4pl, each
// addition rounded to float4); avg(real) is double precision. Over the
// same rows in the same order (ORDER BY id), a running sum and a whole
// partition's are PostgreSQL's bit for bit, and so is avg (added in
// float8 by both); a sliding frame's sum is added in another order (a
// segment tree; PostgreSQL adds each frame from its start), so it is as
// close as two float4 sums of the frame's values in different orders
// are: within 2 * rows * 2^-24 * the sum of their magnitudes.
func TestAgainstPostgresFloat4Sum(t *testing.T) {
	if os.Getenv("STRATA_TEST_POSTGRES") != "1" {
		t.Skip("set STRATA_TEST_POSTGRES=1 and the PG* variables to compare with a PostgreSQL server")
	}
	dirs, csv, vals := float4Table(t, 2000)
	psql(t, "DROP TABLE IF EXISTS strata_float4_test; CREATE TABLE strata_float4_test (id bigint, g int, r real)", "")
	psql(t, "\\copy strata_float4_test FROM STDIN WITH (FORMAT csv)", csv)
	defer psql(t, "DROP TABLE IF EXISTS strata_float4_test", "")
	if typ := strings.TrimSpace(psql(t, "SELECT pg_typeof(sum(r) OVER ())::text || ',' || pg_typeof(avg(r) OVER ())::text FROM strata_float4_test LIMIT 1", "")); typ != "real,double precision" {
		t.Fatalf("PostgreSQL's types: %s", typ)
	}
	for _, tc := range []struct {
		call  string
		typ   arrow.DataType
		exact bool
	}{
		{"sum(r) OVER (PARTITION BY g ORDER BY id)", arrow.PrimitiveTypes.Float32, true},
		{"sum(r) OVER (ORDER BY id)", arrow.PrimitiveTypes.Float32, true},
		{"sum(r) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)", arrow.PrimitiveTypes.Float32, true},
		{"sum(r) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 2 FOLLOWING)", arrow.PrimitiveTypes.Float32, true},
		{"sum(r) OVER (ORDER BY id ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)", arrow.PrimitiveTypes.Float32, false},
		{"sum(r) FILTER (WHERE g > 1) OVER (PARTITION BY g % 2 ORDER BY id)", arrow.PrimitiveTypes.Float32, true},
		{"avg(r) OVER (PARTITION BY g ORDER BY id)", arrow.PrimitiveTypes.Float64, true},
	} {
		for _, threads := range []int{1, 3} {
			sql := "SELECT id, " + tc.call + " AS w FROM strata_float4_test ORDER BY id"
			lines := strings.Split(strings.TrimSpace(psql(t, sql, "")), "\n")
			q, err := sqlparse.Parse(strings.Replace(sql, "strata_float4_test", "t", 1))
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			res, err := Run(context.Background(), q, dirs, Options{TempDir: t.TempDir(), Threads: threads})
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			if got := res.Schema().Field(1).Type; !arrow.TypeEqual(got, tc.typ) {
				res.Close()
				t.Fatalf("%s: result type %s, want %s (PostgreSQL's)", tc.call, got, tc.typ)
			}
			got := map[int64]float64{}
			nulls := map[int64]bool{}
			for {
				rec, err := res.Next()
				if err != nil {
					break
				}
				ids := rec.Column(0).(*array.Int64)
				for i := range int(rec.NumRows()) {
					switch col := rec.Column(1).(type) {
					case *array.Float32:
						got[ids.Value(i)], nulls[ids.Value(i)] = float64(col.Value(i)), col.IsNull(i)
					case *array.Float64:
						got[ids.Value(i)], nulls[ids.Value(i)] = col.Value(i), col.IsNull(i)
					}
				}
				rec.Release()
			}
			res.Close()
			if len(lines) != len(got) {
				t.Fatalf("%s: %d rows, PostgreSQL %d", tc.call, len(got), len(lines))
			}
			for _, line := range lines {
				idText, val, _ := strings.Cut(line, "|")
				id, _ := strconv.ParseInt(idText, 10, 64)
				if val == "NULL" || nulls[id] {
					if val != "NULL" || !nulls[id] {
						t.Fatalf("%s (%d threads): id %d: %v, PostgreSQL %s", tc.call, threads, id, got[id], val)
					}
					continue
				}
				bits := 64
				if tc.typ.ID() == arrow.FLOAT32 {
					bits = 32
				}
				want, err := strconv.ParseFloat(val, bits)
				if err != nil {
					t.Fatal(err)
				}
				ok := got[id] == want
				if !tc.exact { // the sliding frame: ids id-5..id
					var mag float64
					for k := id - 5; k <= id; k++ {
						mag += vals[k]
					}
					ok = math.Abs(got[id]-want) <= 2*6*mag/(1<<24)
				}
				if !ok {
					t.Fatalf("%s (%d threads): id %d: %v, PostgreSQL %s", tc.call, threads, id, got[id], val)
				}
			}
		}
	}
}

// sum(real) is real, each addition rounded to float4; a sum past
// float4's range is an overflow error (PostgreSQL's 22003), also on
// the paths that read a partition in pieces (few threads, many).
func TestSumFloat32(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "r", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}, nil)
	batch := func(vals ...float32) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i, v := range vals {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float32Builder).Append(v)
		}
		return b.NewRecordBatch()
	}
	run := func(sql string, rec arrow.RecordBatch, threads int) (*Result, error) {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		return RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{Threads: threads})
	}
	// 1 + 2^-24 + 2^-24 is 1 in float4 added one by one, 1.0000001 in
	// float8 rounded once.
	tiny := float32(math.Ldexp(1, -24))
	rec := batch(1, tiny, tiny)
	defer rec.Release()
	res, err := run("SELECT id, sum(r) OVER (ORDER BY id) AS s FROM t", rec, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.Next()
	if err != nil {
		t.Fatal(err)
	}
	col, ok := out.Column(1).(*array.Float32)
	if !ok {
		t.Fatalf("sum(real) is %s, want float32", out.Column(1).DataType())
	}
	if got := col.Float32Values(); !slices.Equal(got, []float32{1, 1, 1}) {
		t.Fatalf("running sum %v, want [1 1 1] (added in float4)", got)
	}
	out.Release()
	res.Close()

	big := batch(3e38, 3e38, -3e38)
	defer big.Release()
	for _, sql := range []string{
		"SELECT id, sum(r) OVER (ORDER BY id) AS s FROM t",
		"SELECT id, sum(r) OVER () AS s FROM t",
		"SELECT id, sum(r) OVER (PARTITION BY id % 1) AS s FROM t",
	} {
		for _, threads := range []int{1, 4} {
			res, err := run(sql, big, threads)
			if err == nil {
				res.Close()
				t.Fatalf("%s: no error for a sum past float4", sql)
			}
			if !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), "value out of range: overflow") {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	}
}
