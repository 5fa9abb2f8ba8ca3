package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// mergeTable describes the wide table of the mergeout suite, in the shape of
// the Vertica experiment: a bigint sort key k followed by width-1 columns
// cycling through the supported types, about one value in ten NULL. K inputs
// each hold rows sorted on k with keys drawn from the same range, so every
// input overlaps every other.
type mergeTable struct {
	width      int
	containers int
	rows       int // per container
	seed       uint64
}

// mergeColumnTypes is the cycle of types after the key column.
var mergeColumnTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Float64,
	arrow.BinaryTypes.String,
	arrow.PrimitiveTypes.Int32,
	&arrow.TimestampType{Unit: arrow.Microsecond},
	arrow.FixedWidthTypes.Boolean,
	arrow.FixedWidthTypes.Date32,
	arrow.PrimitiveTypes.Float32,
}

func (t mergeTable) schema() *arrow.Schema {
	fields := make([]arrow.Field, t.width)
	fields[0] = arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64}
	for c := 1; c < t.width; c++ {
		fields[c] = arrow.Field{Name: fmt.Sprintf("c%03d", c), Type: mergeColumnTypes[(c-1)%len(mergeColumnTypes)], Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

const mergeStringAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// input builds input container i as one record batch, sorted on k.
func (t mergeTable) input(mem memory.Allocator, i int) arrow.RecordBatch {
	r := rand.New(rand.NewPCG(t.seed, uint64(i)))
	keys := make([]int64, t.rows)
	keyRange := int64(t.rows * t.containers)
	for j := range keys {
		keys[j] = r.Int64N(keyRange)
	}
	slices.Sort(keys)

	b := array.NewRecordBuilder(mem, t.schema())
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(keys, nil)
	str := make([]byte, 24)
	for c := 1; c < t.width; c++ {
		fb := b.Field(c)
		fb.Reserve(t.rows)
		for j := 0; j < t.rows; j++ {
			if r.IntN(10) == 0 {
				fb.AppendNull()
				continue
			}
			switch x := fb.(type) {
			case *array.Int64Builder:
				x.UnsafeAppend(r.Int64N(1 << 40))
			case *array.Float64Builder:
				x.UnsafeAppend(r.Float64() * 1e6)
			case *array.StringBuilder:
				n := 8 + r.IntN(17)
				for k := range n {
					str[k] = mergeStringAlphabet[r.IntN(len(mergeStringAlphabet))]
				}
				x.BinaryBuilder.Append(str[:n])
			case *array.Int32Builder:
				x.UnsafeAppend(r.Int32N(1 << 30))
			case *array.TimestampBuilder:
				x.UnsafeAppend(arrow.Timestamp(1_700_000_000_000_000 + r.Int64N(1<<40)))
			case *array.BooleanBuilder:
				x.UnsafeAppend(r.IntN(2) == 0)
			case *array.Date32Builder:
				x.UnsafeAppend(arrow.Date32(18000 + r.Int32N(3000)))
			case *array.Float32Builder:
				x.UnsafeAppend(r.Float32() * 1000)
			}
		}
	}
	return b.NewRecordBatch()
}

// uncompressedBytes is the size of a record's Arrow buffers: the bytes a
// merge moves, used for MB/s.
func uncompressedBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		n += dataBytes(col.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}

// writeParquetRecord writes one record batch as a Parquet file (LZ4, like
// strata's containers), one row group.
func writeParquetRecord(path string, rec arrow.RecordBatch) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Lz4Raw), parquet.WithMaxRowGroupLength(int64(rec.NumRows())))
	fw, err := pqarrow.NewFileWriter(rec.Schema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return fmt.Errorf("parquet writer %s: %w", path, err)
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}
