package columnar

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestChangeColumnsCompressToAlmostNothing: the change columns of a
// frozen or loaded keyed container (every version 0, no marker) take next
// to nothing on disk with either codec, without an encoding of their own:
// an all-zero int64 column and an all-false bool column are mostly the
// IPC framing of their blocks (a few hundred bytes a block). A mostly-zero
// version column (1% of rows changed past a floor) stays small too. So a
// fully folded, frozen table is as large as a fresh load, and readers skip
// both columns anyway when the manifest's change statistics say one
// version and no marker (changes.go).
func TestChangeColumnsCompressToAlmostNothing(t *testing.T) {
	const rows = 1 << 20
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: VersionColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: DeletedColumn, Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	for _, comp := range []Compression{CompressionLZ4, CompressionZstd} {
		for _, changedEvery := range []int{0, 100} {
			dir := filepath.Join(t.TempDir(), "c")
			w, err := Create(dir, WriterOptions{Table: "t", Projection: "p", ID: "c", Schema: schema,
				SortKey: SortKey{{Name: "id"}}, PrimaryKey: []string{"id"}, Compression: comp})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(81, uint64(changedEvery)))
			for lo := 0; lo < rows; lo += DefaultBlockRows {
				b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
				for i := lo; i < lo+DefaultBlockRows; i++ {
					b.Field(0).(*array.Int64Builder).Append(int64(i))
					v := int64(0)
					if changedEvery > 0 && rng.IntN(changedEvery) == 0 {
						v = 1_000_000 + rng.Int64N(5_000_000)
					}
					b.Field(1).(*array.Int64Builder).Append(v)
					b.Field(2).(*array.BooleanBuilder).Append(false)
				}
				rec := b.NewRecordBatch()
				b.Release()
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
			}
			m, err := w.Commit()
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s, one row in %d changed", comp, changedEvery)
			if changedEvery == 0 {
				name = fmt.Sprintf("%s, all versions 0", comp)
			}
			ver, del := m.Files[1].Size, m.Files[2].Size
			perRow := func(n int64) float64 { return float64(n) / rows }
			t.Logf("%s: version column %d bytes (%.3f a row, raw 8), deleted column %d bytes (%.3f a row, raw 0.125); key column %d",
				name, ver, perRow(ver), del, perRow(del), m.Files[0].Size)
			// Almost nothing: at most a tenth of a byte a row for the
			// constant columns, against 8 and 1/8 raw.
			maxVer := 0.1
			if changedEvery > 0 {
				maxVer = 1.0 // 1% of rows of 8 random bytes, and their positions
			}
			if perRow(ver) > maxVer {
				t.Errorf("%s: version column %.3f bytes a row, want at most %.2f", name, perRow(ver), maxVer)
			}
			if perRow(del) > 0.05 {
				t.Errorf("%s: all-false deleted column %.3f bytes a row, want at most 0.05", name, perRow(del))
			}
		}
	}
}
