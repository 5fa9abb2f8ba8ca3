package columnar

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/internal/cputime"
)

// BenchmarkBlockRead reads every block of one column of 1Mi rows and
// reports uncompressed MB/s and ns per block; "reused" reads with
// ReuseBuffers, as a reader that copies each block does.
func BenchmarkBlockRead(b *testing.B) {
	for _, tc := range []struct {
		name   string
		typ    arrow.DataType
		comp   Compression
		reused bool
	}{
		{"int64/lz4", arrow.PrimitiveTypes.Int64, CompressionLZ4, false},
		{"int64/none", arrow.PrimitiveTypes.Int64, CompressionNone, false},
		{"int64/none/reused", arrow.PrimitiveTypes.Int64, CompressionNone, true},
		{"int64/zstd", arrow.PrimitiveTypes.Int64, CompressionZstd, false},
		{"utf8/lz4", arrow.BinaryTypes.String, CompressionLZ4, false},
		{"utf8/none", arrow.BinaryTypes.String, CompressionNone, false},
		{"utf8/none/reused", arrow.BinaryTypes.String, CompressionNone, true},
		{"float64/lz4", arrow.PrimitiveTypes.Float64, CompressionLZ4, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir, m := benchColumn(b, tc.typ, tc.comp, 1<<20)
			c, err := Open(dir, OpenOptions{})
			if err != nil {
				b.Fatal(err)
			}
			raw := m.RawBytes()
			b.SetBytes(raw)
			b.ResetTimer()
			cpu0 := cputime.Process()
			for range b.N {
				r, err := c.OpenColumn(0)
				if err != nil {
					b.Fatal(err)
				}
				if tc.reused {
					r.ReuseBuffers()
				}
				for {
					a, err := r.Next()
					if err != nil {
						break
					}
					a.Release()
				}
				r.Close()
			}
			reportCPU(b, cpu0, raw)
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(raw)*float64(b.N)/sec/1e6, "raw_MB/s")
			b.ReportMetric(sec*1e9/float64(b.N*len(m.Blocks)), "ns/block")
			b.ReportMetric(float64(m.CompressedBytes())/float64(raw), "compression_ratio")
		})
	}
}

// BenchmarkBlockDecode decodes the same in-memory blocks with the block
// decoder and with arrow's IPC reader (the reference), to compare them.
func BenchmarkBlockDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		typ  arrow.DataType
		comp Compression
	}{
		{"int64/lz4", arrow.PrimitiveTypes.Int64, CompressionLZ4},
		{"int64/zstd", arrow.PrimitiveTypes.Int64, CompressionZstd},
		{"utf8/lz4", arrow.BinaryTypes.String, CompressionLZ4},
	} {
		dir, m := benchColumn(b, tc.typ, tc.comp, 1<<18)
		data, err := os.ReadFile(filepath.Join(dir, m.Files[0].Name))
		if err != nil {
			b.Fatal(err)
		}
		fb := m.Files[0].Blocks[0]
		block := data[fb.Offset : fb.Offset+fb.Length]
		rows := m.Blocks[0].Rows
		schema, header := schemaMessage(b, tc.typ)
		decoders := map[string]func() (arrow.Array, error){
			"strata": func() (arrow.Array, error) {
				return newBlockDecoder(tc.typ, memory.DefaultAllocator, newTestDecompressors()).decode(memory.NewBufferBytes(block), rows, 2*fb.RawBytes+decodeSlack, false)
			},
			"arrow": func() (arrow.Array, error) {
				d := newArrowDecoder(schema, header, memory.DefaultAllocator)
				defer d.close()
				return d.decode(memory.NewBufferBytes(block), rows, 2*fb.RawBytes+decodeSlack)
			},
		}
		for _, name := range []string{"strata", "arrow"} {
			b.Run(tc.name+"/"+name, func(b *testing.B) {
				b.SetBytes(fb.RawBytes)
				cpu0 := cputime.Process()
				for range b.N {
					a, err := decoders[name]()
					if err != nil {
						b.Fatal(err)
					}
					a.Release()
				}
				reportCPU(b, cpu0, fb.RawBytes)
			})
		}
	}
}

// BenchmarkWrite writes 1Mi rows of one column and reports MB/s.
func BenchmarkWrite(b *testing.B) {
	for _, tc := range []struct {
		name string
		typ  arrow.DataType
		comp Compression
	}{
		{"int64/lz4", arrow.PrimitiveTypes.Int64, CompressionLZ4},
		{"utf8/lz4", arrow.BinaryTypes.String, CompressionLZ4},
		{"int64/zstd", arrow.PrimitiveTypes.Int64, CompressionZstd},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const rows = 1 << 20
			arr := genArray(memory.DefaultAllocator, tc.typ, rand.New(rand.NewPCG(1, 2)), rows, 0.05)
			defer arr.Release()
			schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: tc.typ, Nullable: true}}, nil)
			raw := rawBytes(arr)
			b.SetBytes(raw)
			base := b.TempDir()
			b.ResetTimer()
			cpu0 := cputime.Process()
			for i := range b.N {
				w, err := Create(filepath.Join(base, fmt.Sprint(i)), WriterOptions{Schema: schema, Compression: tc.comp})
				if err != nil {
					b.Fatal(err)
				}
				if err := w.WriteColumn(0, arr); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0, raw)
			b.ReportMetric(float64(raw)*float64(b.N)/b.Elapsed().Seconds()/1e6, "raw_MB/s")
		})
	}
}

// BenchmarkKeyEncode encodes 64Ki-row blocks of keys and reports ns/row.
func BenchmarkKeyEncode(b *testing.B) {
	for _, nk := range []int{1, 3} {
		schema, key := GenSchema(nk, nk)
		rng := rand.New(rand.NewPCG(3, 4))
		const n = 1 << 16
		cols := make([]arrow.Array, nk)
		for k := range cols {
			cols[k] = genKeyArray(memory.DefaultAllocator, schema.Field(k).Type, rng, n, k, 1<<40)
			defer cols[k].Release()
		}
		enc, err := NewKeyEncoder(schema, key)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("batch/%dcols", nk), func(b *testing.B) {
			var kb KeyBatch
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for range b.N {
				if err := enc.EncodeBatch(&kb, cols, 0, n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*n), "ns/row")
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*n), "cpu_ns/row")
			b.ReportMetric(float64(len(kb.Data))/n, "bytes/key")
		})
		b.Run(fmt.Sprintf("row/%dcols", nk), func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for range b.N {
				for i := range n {
					buf = enc.AppendRow(buf[:0], cols, i)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*n), "ns/row")
		})
	}
}

func benchColumn(b testing.TB, typ arrow.DataType, comp Compression, rows int) (string, *Manifest) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "c")
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: typ, Nullable: true}}, nil)
	w, err := Create(dir, WriterOptions{Schema: schema, Compression: comp})
	if err != nil {
		b.Fatal(err)
	}
	var arr arrow.Array
	if typ.ID() == arrow.INT64 {
		// Sorted-ish integers, like a key column: compressible.
		bl := array.NewInt64Builder(memory.DefaultAllocator)
		rng := rand.New(rand.NewPCG(5, 6))
		var v int64
		for range rows {
			v += rng.Int64N(100)
			bl.Append(v)
		}
		arr = bl.NewArray()
		bl.Release()
	} else {
		arr = genArray(memory.DefaultAllocator, typ, rand.New(rand.NewPCG(5, 6)), rows, 0.05)
	}
	defer arr.Release()
	if err := w.WriteColumn(0, arr); err != nil {
		b.Fatal(err)
	}
	m, err := w.Commit()
	if err != nil {
		b.Fatal(err)
	}
	return dir, m
}
