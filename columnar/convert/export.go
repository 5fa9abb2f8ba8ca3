package convert

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
	// ByteaHex writes binary values as PostgreSQL writes bytea (\x and
	// lowercase hex digits, what its COPY FROM reads back) instead of
	// base64 (what strata load reads): pgwire's COPY ... TO STDOUT CSV.
	ByteaHex bool
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
		mk = func(s *arrow.Schema) (batchWriter, error) { return newCSVWriter(w, s, &opts) }
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
	cs := make([]*columnar.Container, len(dirs))
	for i, dir := range dirs {
		if cs[i], err = columnar.Open(dir, columnar.OpenOptions{Allocator: o.Allocator}); err != nil {
			return rows, fmt.Errorf("export %s: %w", what, err)
		}
	}
	// A keyed table's rows are its current ones, as a query sees them:
	// the rows newer versions supersede and the delete markers are left
	// out, and so are the change columns unless named.
	res, err := columnar.Superseded(context.Background(), cs, columnar.ResolveOptions{})
	if err != nil {
		return rows, fmt.Errorf("export %s: %w", what, err)
	}
	for i, dir := range dirs {
		c := cs[i]
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
		n, err := copyBlocks(br, w, res.Dropped[i], o.Allocator)
		br.Close()
		rows += n
		if err != nil {
			return rows, fmt.Errorf("export %s of %s: %w", what, dir, err)
		}
	}
	return rows, nil
}

// copyBlocks writes every block br reads to w, without the rows in
// dropped (nil: none).
func copyBlocks(br *columnar.BatchReader, w batchWriter, dropped *roaring.Bitmap, mem memory.Allocator) (int64, error) {
	var rows, first int64
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		n := rec.NumRows()
		if dropped != nil && dropped.IntersectsWithInterval(uint64(first), uint64(first+n)) {
			kept, err := keepRows(rec, dropped, first, mem)
			rec.Release()
			if err != nil {
				return rows, err
			}
			rec = kept
		}
		first += n
		rows += rec.NumRows()
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return rows, err
		}
	}
}

// keepRows returns rec without its rows in dropped, rec's first row
// being row first of its container.
func keepRows(rec arrow.RecordBatch, dropped *roaring.Bitmap, first int64, mem memory.Allocator) (arrow.RecordBatch, error) {
	var idx []int
	for i := range int(rec.NumRows()) {
		if !dropped.Contains(uint32(first) + uint32(i)) {
			idx = append(idx, i)
		}
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for j, a := range rec.Columns() {
		var err error
		if cols[j], err = columnar.Take(mem, a, idx); err != nil {
			return nil, err
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(idx))), nil
}

// columnIndexes returns the indexes in schema of the columns names (when
// names is nil, every column but a keyed table's change columns).
func columnIndexes(schema *arrow.Schema, names []string) ([]int, error) {
	if names == nil {
		var cols []int
		for i, f := range schema.Fields() {
			if !columnar.IsChangeColumn(f.Name) {
				cols = append(cols, i)
			}
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
// without rows, unless NoHeader), NULL as opts.Null, an empty string as
// "", every line ending in a newline, as DuckDB's COPY ... TO writes it
// (see csvWriter).
func ExportCSV(dir string, w io.Writer, opts ExportOptions) error {
	_, err := Export(CSV, []string{dir}, w, opts)
	return err
}

// csvWriter writes record batches as CSV the way DuckDB's COPY ... TO
// does: the header first (even without rows), NULL as null, and a field
// quoted when it holds the delimiter, a quote, a line break or leading or
// trailing space, when it is empty but not NULL (so "" is an empty string
// and an empty field NULL), or when it spells NULL. Values are written as
// arrow's CSV writer writes them: floats in the shortest form that reads
// back, binary as base64, timestamps as 2006-01-02 15:04:05.999999 with
// Z for a zoned one.
type csvWriter struct {
	w      *bufio.Writer
	schema *arrow.Schema
	comma  byte
	null   string
	header bool
	wrote  bool
	line   []byte
	// byteaHex: binary as \x and hex digits (ExportOptions.ByteaHex).
	byteaHex bool
}

func newCSVWriter(w io.Writer, schema *arrow.Schema, o *ExportOptions) (*csvWriter, error) {
	if o.Comma >= utf8.RuneSelf || o.Comma == '"' || o.Comma == '\r' || o.Comma == '\n' {
		return nil, fmt.Errorf("CSV delimiter %q: want one ASCII character other than a quote or line break", o.Comma)
	}
	return &csvWriter{w: bufio.NewWriterSize(w, 1<<16), schema: schema, comma: byte(o.Comma), null: o.Null, header: !o.NoHeader, byteaHex: o.ByteaHex}, nil
}

func (c *csvWriter) writeHeader() error {
	c.line = c.line[:0]
	for i, f := range c.schema.Fields() {
		if i > 0 {
			c.line = append(c.line, c.comma)
		}
		c.line = c.appendField(c.line, f.Name, false)
	}
	c.line = append(c.line, '\n')
	_, err := c.w.Write(c.line)
	return err
}

func (c *csvWriter) Write(rec arrow.RecordBatch) error {
	if !c.wrote && c.header {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	c.wrote = true
	cols := rec.Columns()
	for r := 0; r < int(rec.NumRows()); r++ {
		c.line = c.line[:0]
		for i, col := range cols {
			if i > 0 {
				c.line = append(c.line, c.comma)
			}
			if col.IsNull(r) {
				c.line = append(c.line, c.null...)
				continue
			}
			if c.byteaHex {
				if v, ok := binaryValue(col, r); ok {
					// Never quoted: no delimiter, quote or space in it, and
					// it is not empty (\x for no bytes).
					c.line = append(c.line, `\x`...)
					c.line = hex.AppendEncode(c.line, v)
					continue
				}
			}
			c.line = c.appendField(c.line, csvValue(col, r), true)
		}
		c.line = append(c.line, '\n')
		if _, err := c.w.Write(c.line); err != nil {
			return err
		}
	}
	return nil
}

func (c *csvWriter) Close() error {
	if !c.wrote && c.header {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

// appendField appends v: a value (AppendCSVField) or a header name,
// quoted only where CSV needs it.
func (c *csvWriter) appendField(dst []byte, v string, value bool) []byte {
	if value {
		return AppendCSVField(dst, v, c.comma, c.null)
	}
	return appendCSV(dst, v, c.comma, false)
}

// AppendCSVField appends v, a value that is not NULL, to dst as a CSV
// field as DuckDB writes it: quoted (quotes doubled) when it holds comma,
// a quote or a line break, starts or ends with a space or tab, is empty,
// or equals null, the spelling of NULL, so that it reads back as itself.
func AppendCSVField(dst []byte, v string, comma byte, null string) []byte {
	return appendCSV(dst, v, comma, v == "" || v == null)
}

func appendCSV(dst []byte, v string, comma byte, quote bool) []byte {
	if !quote && v != "" {
		quote = v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t' ||
			strings.ContainsAny(v, "\"\r\n") || strings.IndexByte(v, comma) >= 0
	}
	if !quote {
		return append(dst, v...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, v[i])
	}
	return append(dst, '"')
}

// binaryValue is value i of arr when arr is binary.
func binaryValue(arr arrow.Array, i int) ([]byte, bool) {
	switch a := arr.(type) {
	case *array.Binary:
		return a.Value(i), true
	case *array.LargeBinary:
		return a.Value(i), true
	}
	return nil, false
}

// csvValue is value i of arr (not NULL) as CSV text.
func csvValue(arr arrow.Array, i int) string {
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Float32:
		return strconv.FormatFloat(float64(a.Value(i)), 'g', -1, 32)
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64)
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.Timestamp:
		t := a.DataType().(*arrow.TimestampType)
		layout := "2006-01-02 15:04:05.999999999"
		if t.TimeZone != "" {
			layout += "Z07:00"
		}
		return a.Value(i).ToTime(t.Unit).Format(layout)
	}
	return arr.ValueStr(i)
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
