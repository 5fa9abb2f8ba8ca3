package columnar

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/internal/cputime"
)

// BenchmarkWideWrite writes a 100-column container (the Generate cycle of
// types) of a few blocks per column, where the per-file cost of the
// writer (compressor set-up, file creation) weighs as much as the data.
func BenchmarkWideWrite(b *testing.B) {
	const cols, rows = 100, 20000
	schema, _ := GenSchema(cols, 1)
	rng := rand.New(rand.NewPCG(7, 8))
	arrs := make([]arrow.Array, cols)
	var raw int64
	for i := range arrs {
		arrs[i] = genArray(memory.DefaultAllocator, schema.Field(i).Type, rng, rows, 0.05)
		defer arrs[i].Release()
		raw += rawBytes(arrs[i])
	}
	for _, comp := range []Compression{CompressionZstd, CompressionLZ4} {
		b.Run(fmt.Sprintf("%dcols/%s", cols, comp), func(b *testing.B) {
			base := b.TempDir()
			b.SetBytes(raw)
			b.ReportAllocs()
			cpu0 := cputime.Process()
			var disk int64
			for i := range b.N {
				w, err := Create(filepath.Join(base, fmt.Sprint(i)), WriterOptions{Schema: schema, Compression: comp, BlockRows: 8192, NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Write(array.NewRecordBatch(schema, arrs, rows)); err != nil {
					b.Fatal(err)
				}
				m, err := w.Commit()
				if err != nil {
					b.Fatal(err)
				}
				disk = m.CompressedBytes()
			}
			reportCPU(b, cpu0, raw)
			b.ReportMetric(float64(raw)/float64(disk), "ratio")
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
