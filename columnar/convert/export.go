package convert

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/strata-db/strata/columnar"
)

// ExportOptions configures the exports.
type ExportOptions struct {
	Allocator memory.Allocator // default Go heap
	// Columns are the columns to export, in this order; nil: every column
	// in the containers' order.
	Columns []string
	// CSV only.
	Comma    rune   // default ','
	NoHeader bool   // omit the header row
	Null     string // the spelling of NULL; default "" (empty field)
	// Parquet only: how column chunks are compressed; default zstd.
	ParquetCompression ParquetCompression
	// Arrow only: how record batch bodies are compressed; default none,
	// which every Arrow reader reads (apache-arrow JS has no codecs).
	ArrowCompression ArrowCompression
	// Arrow only: write the IPC stream format instead of the file format.
	ArrowStream bool
}

// Format is an export file format.
type Format string

// The export formats, named as their usual file extensions.
const (
	CSV     Format = "csv"
	Parquet Format = "parquet"
	Arrow   Format = "arrow"
	JSONL   Format = "jsonl"
)

// Formats lists the export formats.
var Formats = []Format{CSV, Parquet, Arrow, JSONL}

// FormatOf returns the export format of a file name's extension: .csv,
// .parquet, .arrow (also .feather and .ipc) or .jsonl (also .ndjson).
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return CSV, nil
	case ".parquet":
		return Parquet, nil
	case ".arrow", ".feather", ".ipc":
		return Arrow, nil
	case ".jsonl", ".ndjson":
		return JSONL, nil
	}
	return "", fmt.Errorf("%q: unknown export format: want a .csv, .parquet, .arrow or .jsonl file", path)
}

// ArrowCompression is the compression codec of an Arrow export.
type ArrowCompression int

// The Arrow IPC compression codecs. None, the default, is what every
// reader reads; LZ4 and Zstd need a reader with that codec (arrow-go,
// pyarrow and arrow-rs have both; apache-arrow JS has neither).
const (
	ArrowUncompressed ArrowCompression = iota
	ArrowLZ4
	ArrowZstd
)

// String returns the codec's name: none, lz4 or zstd.
func (c ArrowCompression) String() string {
	switch c {
	case ArrowUncompressed:
		return "none"
	case ArrowLZ4:
		return "lz4"
	case ArrowZstd:
		return "zstd"
	}
	return fmt.Sprintf("ArrowCompression(%d)", int(c))
}

// ParseArrowCompression parses a codec's name (as String returns it).
func ParseArrowCompression(s string) (ArrowCompression, error) {
	for _, c := range []ArrowCompression{ArrowUncompressed, ArrowLZ4, ArrowZstd} {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown arrow compression %q: want none, lz4 or zstd", s)
}

func (c ArrowCompression) options() ([]ipc.Option, error) {
	switch c {
	case ArrowUncompressed:
		return nil, nil
	case ArrowLZ4:
		return []ipc.Option{ipc.WithLZ4()}, nil
	case ArrowZstd:
		return []ipc.Option{ipc.WithZstd()}, nil
	}
	return nil, fmt.Errorf("unknown arrow compression %d", int(c))
}

// ParquetCompression is the compression codec of a Parquet export.
type ParquetCompression int

// The Parquet compression codecs. Zstd, the default, makes files a third
// or so smaller than Snappy at a modest cost in speed.
const (
	ParquetZstd ParquetCompression = iota
	ParquetSnappy
	ParquetUncompressed
)

// String returns the codec's name: zstd, snappy or none.
func (c ParquetCompression) String() string {
	switch c {
	case ParquetZstd:
		return "zstd"
	case ParquetSnappy:
		return "snappy"
	case ParquetUncompressed:
		return "none"
	}
	return fmt.Sprintf("ParquetCompression(%d)", int(c))
}

// ParseParquetCompression parses a codec's name (as String returns it).
func ParseParquetCompression(s string) (ParquetCompression, error) {
	for _, c := range []ParquetCompression{ParquetZstd, ParquetSnappy, ParquetUncompressed} {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown parquet compression %q: want zstd, snappy or none", s)
}

func (c ParquetCompression) codec() (compress.Compression, error) {
	switch c {
	case ParquetZstd:
		return compress.Codecs.Zstd, nil
	case ParquetSnappy:
		return compress.Codecs.Snappy, nil
	case ParquetUncompressed:
		return compress.Codecs.Uncompressed, nil
	}
	return 0, fmt.Errorf("unknown parquet compression %d", int(c))
}

func (o *ExportOptions) defaults() {
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Comma == 0 {
		o.Comma = ','
	}
}

// batchWriter is what arrow's CSV, Parquet and IPC writers have in common.
type batchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// Export writes every row of the containers at dirs, one container after
// the other and each block by block, to w as format, and returns the rows
// written. The containers must have the same columns (of opts.Columns,
// when given). What it holds at once is one block of the exported
// columns, plus what the format's writer buffers (a Parquet row group is
// a block). Without containers there is no schema and it fails.
func Export(format Format, dirs []string, w io.Writer, opts ExportOptions) (int64, error) {
	opts.defaults()
	if len(dirs) == 0 {
		return 0, fmt.Errorf("export %s: no containers", format)
	}
	var mk func(*arrow.Schema) (batchWriter, error)
	switch format {
	case CSV:
		mk = func(s *arrow.Schema) (batchWriter, error) {
			return &csvWriter{Writer: csv.NewWriter(w, s, csv.WithComma(opts.Comma), csv.WithHeader(!opts.NoHeader), csv.WithNullWriter(opts.Null)),
				schema: s, header: !opts.NoHeader, mem: opts.Allocator}, nil
		}
	case Parquet:
		codec, err := opts.ParquetCompression.codec()
		if err != nil {
			return 0, fmt.Errorf("export parquet: %w", err)
		}
		mk = func(s *arrow.Schema) (batchWriter, error) {
			props := parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithAllocator(opts.Allocator))
			return pqarrow.NewFileWriter(s, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		}
	case Arrow:
		comp, err := opts.ArrowCompression.options()
		if err != nil {
			return 0, fmt.Errorf("export arrow: %w", err)
		}
		mk = func(s *arrow.Schema) (batchWriter, error) {
			ipcOpts := append([]ipc.Option{ipc.WithSchema(s), ipc.WithAllocator(opts.Allocator)}, comp...)
			if opts.ArrowStream {
				return ipc.NewWriter(w, ipcOpts...), nil
			}
			return ipc.NewFileWriter(w, ipcOpts...)
		}
	case JSONL:
		mk = func(s *arrow.Schema) (batchWriter, error) { return newJSONLWriter(w, s), nil }
	default:
		return 0, fmt.Errorf("export: unknown format %q", format)
	}
	return export(dirs, &opts, string(format), mk)
}

// export streams every block of the containers at dirs (the columns
// o.Columns names, else all) to the writer mk makes for the first
// container's schema of those columns.
func export(dirs []string, o *ExportOptions, what string, mk func(*arrow.Schema) (batchWriter, error)) (rows int64, err error) {
	var w batchWriter
	var schema *arrow.Schema
	defer func() {
		if w == nil {
			return
		}
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("export %s: %w", what, cerr)
		}
	}()
	for _, dir := range dirs {
		c, err := columnar.Open(dir, columnar.OpenOptions{Allocator: o.Allocator})
		if err != nil {
			return rows, fmt.Errorf("export %s: %w", what, err)
		}
		cols, err := columnIndexes(c.Schema(), o.Columns)
		if err != nil {
			return rows, fmt.Errorf("export %s of %s: %w", what, dir, err)
		}
		br, err := c.OpenColumns(cols)
		if err != nil {
			return rows, fmt.Errorf("export %s: %w", what, err)
		}
		if w == nil {
			schema = br.Schema()
			if w, err = mk(schema); err != nil {
				br.Close()
				return rows, fmt.Errorf("export %s of %s: %w", what, dir, err)
			}
		} else if !br.Schema().Equal(schema) {
			br.Close()
			return rows, fmt.Errorf("export %s: container %s has columns %s, the first container %s", what, dir, br.Schema(), schema)
		}
		n, err := copyBlocks(br, w)
		br.Close()
		rows += n
		if err != nil {
			return rows, fmt.Errorf("export %s of %s: %w", what, dir, err)
		}
	}
	return rows, nil
}

// copyBlocks writes every block br reads to w.
func copyBlocks(br *columnar.BatchReader, w batchWriter) (int64, error) {
	var rows int64
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows += rec.NumRows()
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return rows, err
		}
	}
}

// columnIndexes returns the indexes in schema of the columns names (all,
// when names is nil).
func columnIndexes(schema *arrow.Schema, names []string) ([]int, error) {
	if names == nil {
		cols := make([]int, schema.NumFields())
		for i := range cols {
			cols[i] = i
		}
		return cols, nil
	}
	cols := make([]int, 0, len(names))
	for _, n := range names {
		idx := schema.FieldIndices(n)
		if len(idx) == 0 {
			have := make([]string, schema.NumFields())
			for i, f := range schema.Fields() {
				have[i] = strconv.Quote(f.Name)
			}
			return nil, fmt.Errorf("no column %q (the columns: %s)", n, strings.Join(have, ", "))
		}
		cols = append(cols, idx[0])
	}
	if len(cols) == 0 {
		return nil, errors.New("no columns chosen")
	}
	return cols, nil
}

// ExportCSV writes the container at dir to w as CSV: a header row (even
// without rows, unless NoHeader), NULL as opts.Null, every line ending in
// a newline, as DuckDB's COPY ... TO writes it.
func ExportCSV(dir string, w io.Writer, opts ExportOptions) error {
	_, err := Export(CSV, []string{dir}, w, opts)
	return err
}

// csvWriter is arrow's CSV writer, which writes the header with the first
// batch, made to write it without one too.
type csvWriter struct {
	*csv.Writer
	schema *arrow.Schema
	header bool
	mem    memory.Allocator
	wrote  bool
}

func (w *csvWriter) Write(rec arrow.RecordBatch) error {
	w.wrote = true
	return w.Writer.Write(rec)
}

func (w *csvWriter) Close() error {
	if !w.wrote && w.header {
		empty := make([]arrow.Array, w.schema.NumFields())
		for i, f := range w.schema.Fields() {
			empty[i] = array.MakeArrayOfNull(w.mem, f.Type, 0)
			defer empty[i].Release()
		}
		rec := array.NewRecordBatch(w.schema, empty, 0)
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// ExportParquet writes the container at dir to w as a Parquet file
// (compressed as opts.ParquetCompression says, zstd by default; the Arrow
// schema stored so types round-trip).
func ExportParquet(dir string, w io.Writer, opts ExportOptions) error {
	_, err := Export(Parquet, []string{dir}, w, opts)
	return err
}

// ExportArrow writes the container at dir to w as one Arrow IPC file (or
// stream, with ArrowStream), one record batch per block, compressed as
// opts.ArrowCompression says (default: not at all).
func ExportArrow(dir string, w io.Writer, opts ExportOptions) error {
	_, err := Export(Arrow, []string{dir}, w, opts)
	return err
}
