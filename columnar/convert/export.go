package convert

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
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
	// CSV only.
	Comma    rune   // default ','
	NoHeader bool   // omit the header row
	Null     string // the spelling of NULL; default "" (empty field)
	// Parquet only: how column chunks are compressed; default zstd.
	ParquetCompression ParquetCompression
	// Arrow only: write the IPC stream format instead of the file format.
	ArrowStream bool
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

// export streams every block of the container at dir (all columns) to the
// writer mk makes for the container's schema.
func export(dir string, o *ExportOptions, what string, mk func(*arrow.Schema) (batchWriter, error)) (err error) {
	c, err := columnar.Open(dir, columnar.OpenOptions{Allocator: o.Allocator})
	if err != nil {
		return fmt.Errorf("export %s: %w", what, err)
	}
	defer c.Close()
	cols := make([]int, c.Schema().NumFields())
	for i := range cols {
		cols[i] = i
	}
	br, err := c.OpenColumns(cols)
	if err != nil {
		return fmt.Errorf("export %s: %w", what, err)
	}
	defer br.Close()
	w, err := mk(c.Schema())
	if err != nil {
		return fmt.Errorf("export %s of %s: %w", what, dir, err)
	}
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("export %s of %s: %w", what, dir, cerr)
		}
	}()
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("export %s: %w", what, err)
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("export %s of %s: %w", what, dir, err)
		}
	}
}

// ExportCSV writes the container at dir to w as CSV.
func ExportCSV(dir string, w io.Writer, opts ExportOptions) error {
	opts.defaults()
	return export(dir, &opts, "csv", func(s *arrow.Schema) (batchWriter, error) {
		return &csvWriter{csv.NewWriter(w, s, csv.WithComma(opts.Comma), csv.WithHeader(!opts.NoHeader), csv.WithNullWriter(opts.Null))}, nil
	})
}

type csvWriter struct{ *csv.Writer }

func (w *csvWriter) Close() error {
	w.Flush()
	return w.Error()
}

// ExportParquet writes the container at dir to w as a Parquet file
// (compressed as opts.ParquetCompression says, zstd by default; the Arrow
// schema stored so types round-trip).
func ExportParquet(dir string, w io.Writer, opts ExportOptions) error {
	opts.defaults()
	codec, err := opts.ParquetCompression.codec()
	if err != nil {
		return fmt.Errorf("export parquet of %s: %w", dir, err)
	}
	return export(dir, &opts, "parquet", func(s *arrow.Schema) (batchWriter, error) {
		props := parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithAllocator(opts.Allocator))
		return pqarrow.NewFileWriter(s, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	})
}

// ExportArrow writes the container at dir to w as one Arrow IPC file (or
// stream, with ArrowStream), one record batch per block, LZ4-compressed.
func ExportArrow(dir string, w io.Writer, opts ExportOptions) error {
	opts.defaults()
	return export(dir, &opts, "arrow", func(s *arrow.Schema) (batchWriter, error) {
		ipcOpts := []ipc.Option{ipc.WithSchema(s), ipc.WithAllocator(opts.Allocator), ipc.WithLZ4()}
		if opts.ArrowStream {
			return ipc.NewWriter(w, ipcOpts...), nil
		}
		return ipc.NewFileWriter(w, ipcOpts...)
	})
}
