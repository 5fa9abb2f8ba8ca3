package merger

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// memSource replays record batches held in memory.
type memSource struct {
	recs []arrow.RecordBatch
	i    int
}

func (s *memSource) Next() (arrow.RecordBatch, error) {
	if s.i == len(s.recs) {
		return nil, io.EOF
	}
	r := s.recs[s.i]
	s.i++
	r.Retain()
	return r, nil
}

// sortedInt64Batches makes k inputs of n sorted random int64 keys each, cut
// into batches of blockRows.
func sortedInt64Batches(k, n, blockRows int) [][]arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(41, 42))
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	out := make([][]arrow.RecordBatch, k)
	for i := range out {
		vals := make([]int64, n)
		for j := range vals {
			vals[j] = rng.Int64N(1 << 40)
		}
		slices.Sort(vals)
		for s := 0; s < n; s += blockRows {
			b := array.NewInt64Builder(memory.DefaultAllocator)
			b.AppendValues(vals[s:min(n, s+blockRows)], nil)
			a := b.NewArray()
			out[i] = append(out[i], array.NewRecordBatch(schema, []arrow.Array{a}, int64(a.Len())))
			a.Release()
			b.Release()
		}
	}
	return out
}

// BenchmarkKeyMerge measures the merge inner loop: normalized keys, loser
// tree, runs into the row-source stream and the key column's output.
func BenchmarkKeyMerge(b *testing.B) {
	for _, k := range []int{2, 8, 32, 128} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			const rowsPerInput = 1 << 15
			inputs := sortedInt64Batches(k, rowsPerInput, 8192)
			schema := inputs[0][0].Schema()
			key := columnar.SortKey{{Name: "k"}}
			enc, err := columnar.NewKeyEncoder(schema, key)
			if err != nil {
				b.Fatal(err)
			}
			var rows, cmps int64
			b.ResetTimer()
			for b.Loop() {
				srcs := make([]recordSource, k)
				for i := range srcs {
					srcs[i] = &memSource{recs: inputs[i]}
				}
				kw, err := newKway(enc, []int{0}, srcs, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				out, _ := newColumnBuilder(arrow.PrimitiveTypes.Int64, memory.DefaultAllocator, 8192)
				rsw, _ := newRowSourceWriter(k, 1<<30, b.TempDir(), nil)
				var view blockView
				var last arrow.RecordBatch
				for {
					in, rec, start, n, err := kw.next(8192 - out.len())
					if err == io.EOF {
						break
					}
					if rec != last {
						last, view = rec, newBlockView(rec.Column(0))
					}
					out.appendRun(&view, start, n)
					rsw.append(in, int64(n))
					if out.len() == 8192 {
						out.finish().Release()
					}
				}
				out.finish().Release()
				rs, _ := rsw.finish()
				rs.Close()
				cmps += kw.comparisons()
				rows += int64(k * rowsPerInput)
				kw.close()
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cmps)/float64(rows), "cmps/row")
		})
	}
}

// BenchmarkMerge measures whole merges of generated containers.
func BenchmarkMerge(b *testing.B) {
	for _, tc := range []struct {
		width int
		grant int64
	}{{20, 1 << 30}, {20, 8 << 20}} {
		b.Run(fmt.Sprintf("width=%d/grant=%dMiB", tc.width, tc.grant>>20), func(b *testing.B) {
			data := b.TempDir()
			mans, err := columnar.Generate(data, columnar.GenOptions{Columns: tc.width, Containers: 16, RowsPerContainer: 8192, BlockRows: 4096, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			dirs := make([]string, len(mans))
			for i, m := range mans {
				dirs[i] = columnar.ContainerDir(data, m.Table, m.Projection, m.ID)
			}
			var st *Stats
			var bytesIn, rows int64
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				st, err = Merge(context.Background(), dirs, filepath.Join(data, fmt.Sprintf("out%d", i)), Options{Grant: tc.grant, TempDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				bytesIn += st.BytesIn
				rows += st.Rows
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(bytesIn)/1e6/b.Elapsed().Seconds(), "MB/s")
			b.ReportMetric(st.ComparisonsPerRow, "cmps/row")
			b.ReportMetric(float64(st.PeakBytes), "peak-bytes")
		})
	}
}

// BenchmarkGatherSel measures the gathers alone: one column of each type
// from 32 in-memory inputs of 8192 rows (1 in 10 NULL), in the interleaving
// of a merge of random keys, through selection vectors, with no I/O and no
// codec.
func BenchmarkGatherSel(b *testing.B) {
	const k, rows, blockRows = 32, 8192, 8192
	rng := rand.New(rand.NewPCG(61, 62))
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.BinaryTypes.String,
		arrow.PrimitiveTypes.Int32, arrow.FixedWidthTypes.Timestamp_us, arrow.FixedWidthTypes.Boolean,
		arrow.FixedWidthTypes.Date32, arrow.PrimitiveTypes.Float32,
	}
	sel := make([]uint16, 0, k*rows)
	left := make([]int, k)
	for i := range left {
		left[i] = rows
	}
	for len(sel) < k*rows {
		if in := rng.IntN(k); left[in] > 0 {
			sel = append(sel, uint16(in))
			left[in]--
		}
	}
	for _, t := range types {
		b.Run(t.String(), func(b *testing.B) {
			blocks := make([]arrow.Array, k)
			for i := range blocks {
				blocks[i] = benchArray(t, rng, rows, 0.1)
				defer blocks[i].Release()
			}
			emit := func(int, arrow.Array) error { return nil }
			b.ResetTimer()
			for b.Loop() {
				srcs := make([]blockSource, k)
				for i := range srcs {
					srcs[i] = &arraySource{blocks: blocks[i : i+1]}
				}
				g, err := newColumnGather(0, "c", t, srcs, make([]string, k), blockRows, memory.DefaultAllocator, emit)
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < len(sel); off += blockRows {
					if err := g.takeSel(sel[off : off+blockRows]); err != nil {
						b.Fatal(err)
					}
				}
				if err := g.finish(); err != nil {
					b.Fatal(err)
				}
				g.release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sel)), "ns/row")
		})
	}
}

// benchArray makes n random values of t, a share nulls of them NULL.
func benchArray(t arrow.DataType, rng *rand.Rand, n int, nulls float64) arrow.Array {
	b := array.NewBuilder(memory.DefaultAllocator, t)
	defer b.Release()
	for range n {
		if rng.Float64() < nulls {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.Int64Builder:
			bb.Append(rng.Int64())
		case *array.Float64Builder:
			bb.Append(rng.NormFloat64())
		case *array.StringBuilder:
			bb.Append(strings.Repeat("x", 8+rng.IntN(17)))
		case *array.Int32Builder:
			bb.Append(rng.Int32())
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(rng.Int64()))
		case *array.BooleanBuilder:
			bb.Append(rng.IntN(2) == 1)
		case *array.Date32Builder:
			bb.Append(arrow.Date32(rng.Int32N(100000)))
		case *array.Float32Builder:
			bb.Append(rng.Float32())
		}
	}
	return b.NewArray()
}
