package windower_test

import (
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
)

func benchTable(n int, shuffle bool, distinct bool) (*arrow.Schema, []arrow.RecordBatch) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rng := rand.New(rand.NewPCG(1, 1))
	a := make([]int64, n)
	for i := range a {
		if distinct {
			a[i] = int64(i)
		} else {
			a[i] = 7
		}
	}
	if shuffle {
		rng.Shuffle(n, func(i, j int) { a[i], a[j] = a[j], a[i] })
	}
	var recs []arrow.RecordBatch
	for off := 0; off < n; off += 65536 {
		end := min(off+65536, n)
		b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
		b.Field(0).(*array.Int64Builder).AppendValues(a[off:end], nil)
		for i := off; i < end; i++ {
			b.Field(1).(*array.Int64Builder).Append(rng.Int64N(1000000))
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return schema, recs
}

func benchQuery(b *testing.B, sql string, n int, shuffle, distinct bool) {
	schema, recs := benchTable(n, shuffle, distinct)
	q, err := sqlparse.Parse(sql)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cputime.Process()
	b.ResetTimer()
	var parts int64
	for i := 0; i < b.N; i++ {
		res, err := windower.RunRecords(context.Background(), q, schema, recs, windower.Options{Grant: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		for {
			rec, err := res.Next()
			if err == io.EOF {
				break
			}
			rec.Release()
		}
		parts = res.Stats().Partitions
		res.Close()
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(parts), "partitions")
}

func BenchmarkQ0Unsorted(b *testing.B) {
	benchQuery(b, "SELECT a, count(*) OVER (PARTITION BY a) FROM a", 1<<20, true, true)
}

func BenchmarkQ0Presorted(b *testing.B) {
	benchQuery(b, "SELECT a, count(*) OVER (PARTITION BY a) FROM a", 1<<20, false, true)
}

func BenchmarkQ0OnePartition(b *testing.B) {
	benchQuery(b, "SELECT a, count(*) OVER (PARTITION BY a) FROM a", 1<<20, true, false)
}

func BenchmarkSlidingMin10(b *testing.B) {
	benchQuery(b, "SELECT min(x) OVER (ORDER BY a ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM a", 1<<20, true, true)
}

func BenchmarkSlidingMin10000(b *testing.B) {
	benchQuery(b, "SELECT min(x) OVER (ORDER BY a ROWS BETWEEN 10000 PRECEDING AND CURRENT ROW) FROM a", 1<<20, true, true)
}

// BenchmarkQ0UnsortedContainer is Q0 over an unsorted container, read
// and decoded as part of the query (as strata bench window runs it).
func BenchmarkQ0UnsortedContainer(b *testing.B) {
	schema, recs := benchTable(1<<20, true, true)
	dir := filepath.Join(b.TempDir(), "a")
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "a", Projection: "p", ID: "c0", Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		b.Fatal(err)
	}
	q, err := sqlparse.Parse("SELECT a, count(*) OVER (PARTITION BY a) FROM a")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cputime.Process()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := windower.Run(context.Background(), q, []string{dir}, windower.Options{Grant: 1 << 30, TempDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		for {
			rec, err := res.Next()
			if err == io.EOF {
				break
			}
			rec.Release()
		}
		res.Close()
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
}
