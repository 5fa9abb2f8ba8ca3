package windower_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

// benchRows is the size of the benchmarks' table.
const benchRows = 1 << 20

// BenchmarkQuery runs every query of the window suite (windowbench) but
// the spilling one over the suite's table in memory, its rows in the
// query's table order, with a 1GiB grant.
func BenchmarkQuery(b *testing.B) {
	data := windowbench.Generate(benchRows, 1000, 1)
	schema := windowbench.Schema()
	recs := map[string][]arrow.RecordBatch{
		windowbench.TableByID: data.Records(memory.NewGoAllocator(), data.OrderBy(data.ID), 65536),
		windowbench.TableByA:  data.Records(memory.NewGoAllocator(), data.OrderBy(data.A), 65536),
	}
	for _, q := range windowbench.Queries() {
		if q.Spill {
			continue // BenchmarkQueryContainer runs it
		}
		b.Run(q.Name, func(b *testing.B) {
			wq, err := sqlparse.Parse(q.Text())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			b.ResetTimer()
			var parts int64
			for i := 0; i < b.N; i++ {
				res, err := windower.RunRecords(context.Background(), wq, schema, recs[q.Table], windower.Options{Grant: 1 << 30})
				if err != nil {
					b.Fatal(err)
				}
				drain(b, res)
				parts = res.Stats().Partitions
				res.Close()
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(data.N)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(parts), "partitions")
		})
	}
}

// BenchmarkQueryContainer runs the Q0 queries and the spilling query over
// containers of the suite's table, read and decoded as part of the query
// (as strata bench window runs them; Q0 presorted and over one partition
// beside the same column stream their presorted input); the spilling
// query within its grant.
func BenchmarkQueryContainer(b *testing.B) {
	data := windowbench.Generate(benchRows, 1000, 1)
	dirs := map[string]string{
		windowbench.TableByID:   filepath.Join(b.TempDir(), windowbench.TableByID),
		windowbench.TableByA:    filepath.Join(b.TempDir(), windowbench.TableByA),
		windowbench.TableSeries: filepath.Join(b.TempDir(), windowbench.TableSeries),
	}
	if _, err := data.WriteContainer(dirs[windowbench.TableByID], columnar.WriterOptions{Table: "w", Projection: "by_id", ID: "c0",
		SortKey: columnar.SortKey{{Name: "id"}}}, data.OrderBy(data.ID)); err != nil {
		b.Fatal(err)
	}
	if _, err := data.WriteContainer(dirs[windowbench.TableByA], columnar.WriterOptions{Table: "w", Projection: "by_a", ID: "c1",
		SortKey: columnar.SortKey{{Name: "a"}}}, data.OrderBy(data.A)); err != nil {
		b.Fatal(err)
	}
	if _, err := windowbench.WriteSeries(dirs[windowbench.TableSeries], columnar.WriterOptions{Table: "big", Projection: "p", ID: "c0"}, benchRows, 1); err != nil {
		b.Fatal(err)
	}
	for _, q := range windowbench.Queries() {
		if !strings.HasPrefix(q.Name, "q0_") && !q.Spill {
			continue
		}
		grant := int64(1 << 30)
		if q.Spill {
			grant = windowbench.SpillGrant
		}
		b.Run(q.Name, func(b *testing.B) {
			wq, err := sqlparse.Parse(q.Text())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := windower.Run(context.Background(), wq, []string{dirs[q.Table]}, windower.Options{Grant: grant, TempDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				drain(b, res)
				res.Close()
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkRangeOffsetThreads runs avg_range_ts (avg over RANGE 10
// seconds PRECEDING, one partition) at several thread counts: each
// thread evaluates a range of the one partition, and its RANGE cursors
// start at that range's first frame. cpu-ns/op is the work of all of
// them, which should not grow with the thread count.
func BenchmarkRangeOffsetThreads(b *testing.B) {
	data := windowbench.Generate(benchRows, 1000, 1)
	recs := data.Records(memory.NewGoAllocator(), data.OrderBy(data.ID), 65536)
	var q windowbench.Query
	for _, c := range windowbench.Queries() {
		if c.Name == "avg_range_ts" {
			q = c
		}
	}
	wq, err := sqlparse.Parse(q.Text())
	if err != nil {
		b.Fatal(err)
	}
	for _, threads := range []int{1, 2, 8, 32} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			cpu0 := cputime.Process()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := windower.RunRecords(context.Background(), wq, windowbench.Schema(), recs, windower.Options{Grant: 1 << 30, Threads: threads})
				if err != nil {
					b.Fatal(err)
				}
				drain(b, res)
				res.Close()
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkBigPartitionNthValue runs nth_value over a GROUPS frame of
// one partition of the suite's table (1Mi rows) larger than a 16MiB
// grant, in peer groups of about a thousand rows (g), with each EXCLUDE:
// its cursors read the nth row of the frame, or the one after it
// (CURRENT ROW), or with GROUP and TIES the nth row past the current
// row's peers, in the next peer group.
func BenchmarkBigPartitionNthValue(b *testing.B) {
	data := windowbench.Generate(benchRows, 1000, 1)
	dir := filepath.Join(b.TempDir(), windowbench.TableByID)
	if _, err := data.WriteContainer(dir, columnar.WriterOptions{Table: "w", Projection: "by_id", ID: "c0",
		SortKey: columnar.SortKey{{Name: "id"}}}, data.OrderBy(data.ID)); err != nil {
		b.Fatal(err)
	}
	for _, exclude := range []string{"NO OTHERS", "CURRENT ROW", "GROUP", "TIES"} {
		b.Run(strings.ReplaceAll(strings.ToLower(exclude), " ", "_"), func(b *testing.B) {
			wq, err := sqlparse.Parse("SELECT id, nth_value(x, 1500) OVER (ORDER BY g GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE " +
				exclude + ") AS v FROM w")
			if err != nil {
				b.Fatal(err)
			}
			cpu0 := cputime.Process()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := windower.Run(context.Background(), wq, []string{dir}, windower.Options{Grant: 16 << 20, TempDir: b.TempDir(), Threads: 1})
				if err != nil {
					b.Fatal(err)
				}
				drain(b, res)
				res.Close()
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func drain(b *testing.B, res *windower.Result) {
	for {
		rec, err := res.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
}
