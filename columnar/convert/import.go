package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/strata-db/strata/columnar"
)

// ImportOptions configures ImportCSV and ImportParquet.
type ImportOptions struct {
	DataDir, Table, Projection string
	// IDPrefix names the containers: <IDPrefix>0000, <IDPrefix>0001, ...
	// Default "import-".
	IDPrefix string
	// SortKey orders each container. Required.
	SortKey columnar.SortKey
	// Schema of the input. For CSV it gives every column's type (nil:
	// inferred from the first rows, which may pick types containers do
	// not support); for Parquet it must match the file's if set.
	Schema *arrow.Schema
	// RowsPerContainer bounds each container; default 1Mi rows. Import
	// holds one container's rows in memory to sort them.
	RowsPerContainer int
	// Containers, for Parquet when RowsPerContainer is 0, splits the file
	// into this many containers of equal rows (the file says how many).
	Containers  int
	BlockRows   int                  // default columnar.DefaultBlockRows
	Compression columnar.Compression // default LZ4
	Allocator   memory.Allocator     // default Go heap
	Logger      *slog.Logger         // default: discard
	// CSV only.
	Comma       rune   // default ','
	NoHeader    bool   // the first row is data, not column names (needs Schema)
	Null        string // the spelling of NULL; default "" (empty field)
	StringsNull bool   // Null also means NULL in utf8 columns (else it is "")
}

func (o *ImportOptions) defaults() error {
	if len(o.SortKey) == 0 {
		return errors.New("import: no sort key given")
	}
	if o.DataDir == "" || o.Table == "" || o.Projection == "" {
		return errors.New("import: data dir, table and projection are required")
	}
	if o.IDPrefix == "" {
		o.IDPrefix = "import-"
	}
	if o.RowsPerContainer <= 0 {
		o.RowsPerContainer = 1 << 20
	}
	if o.BlockRows <= 0 {
		o.BlockRows = columnar.DefaultBlockRows
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Comma == 0 {
		o.Comma = ','
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ImportCSV reads CSV from r into sorted containers.
func ImportCSV(r io.Reader, opts ImportOptions) ([]*columnar.Manifest, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	chunk := min(opts.BlockRows, opts.RowsPerContainer)
	copts := []csv.Option{
		csv.WithComma(opts.Comma),
		csv.WithHeader(!opts.NoHeader),
		csv.WithChunk(chunk),
		csv.WithAllocator(opts.Allocator),
		csv.WithNullReader(opts.StringsNull, opts.Null),
	}
	var rdr *csv.Reader
	if opts.Schema != nil {
		rdr = csv.NewReader(r, opts.Schema, copts...)
	} else {
		if opts.NoHeader {
			return nil, errors.New("import csv: a file without a header needs a schema")
		}
		rdr = csv.NewInferringReader(r, copts...)
	}
	defer rdr.Release()
	return importBatches(&csvSource{rdr}, &opts)
}

// ImportParquet reads a Parquet file into sorted containers.
func ImportParquet(r parquet.ReaderAtSeeker, opts ImportOptions) ([]*columnar.Manifest, error) {
	pf, err := file.NewParquetReader(r)
	if err != nil {
		return nil, fmt.Errorf("import parquet: %w", err)
	}
	defer pf.Close()
	if opts.RowsPerContainer <= 0 && opts.Containers > 0 {
		rows := pf.NumRows()
		opts.RowsPerContainer = int(max(1, (rows+int64(opts.Containers)-1)/int64(opts.Containers)))
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(min(opts.BlockRows, opts.RowsPerContainer))}, opts.Allocator)
	if err != nil {
		return nil, fmt.Errorf("import parquet: %w", err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("import parquet: %w", err)
	}
	defer rr.Release()
	if opts.Schema != nil && !opts.Schema.Equal(rr.Schema()) {
		return nil, fmt.Errorf("import parquet: %w: file schema %s, expected %s", columnar.ErrSchemaMismatch, rr.Schema(), opts.Schema)
	}
	return importBatches(rr, &opts)
}

// batchSource is what arrow's CSV and Parquet readers have in common.
type batchSource interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}

type csvSource struct{ *csv.Reader }

func (s *csvSource) RecordBatch() arrow.RecordBatch { return s.Reader.RecordBatch() }

func importBatches(src batchSource, o *ImportOptions) ([]*columnar.Manifest, error) {
	var (
		out     []*columnar.Manifest
		pending []arrow.RecordBatch
		rows    int
	)
	defer func() {
		for _, r := range pending {
			r.Release()
		}
	}()
	flush := func() error {
		if rows == 0 {
			return nil
		}
		id := fmt.Sprintf("%s%04d", o.IDPrefix, len(out))
		m, err := writeSorted(pending, id, o)
		for _, r := range pending {
			r.Release()
		}
		pending, rows = pending[:0], 0
		if err != nil {
			return fmt.Errorf("container %s: %w", id, err)
		}
		o.Logger.Info("imported container", "id", id, "rows", m.Rows)
		out = append(out, m)
		return nil
	}
	for src.Next() {
		rec := src.RecordBatch()
		for off := 0; off < int(rec.NumRows()); {
			n := min(int(rec.NumRows())-off, o.RowsPerContainer-rows)
			part := rec.NewSlice(int64(off), int64(off+n))
			pending = append(pending, part)
			rows += n
			off += n
			if rows == o.RowsPerContainer {
				if err := flush(); err != nil {
					return out, fmt.Errorf("import: %w", err)
				}
			}
		}
	}
	if err := src.Err(); err != nil {
		return out, fmt.Errorf("import: read input: %w", err)
	}
	if err := flush(); err != nil {
		return out, fmt.Errorf("import: %w", err)
	}
	return out, nil
}

// writeSorted sorts the rows of batches on the key and writes them as one
// container, a column at a time.
func writeSorted(batches []arrow.RecordBatch, id string, o *ImportOptions) (*columnar.Manifest, error) {
	schema := batches[0].Schema()
	idx, err := o.SortKey.Indices(schema)
	if err != nil {
		return nil, err
	}
	enc, err := columnar.NewKeyEncoder(schema, o.SortKey)
	if err != nil {
		return nil, err
	}
	column := func(c int) (arrow.Array, error) {
		parts := make([]arrow.Array, len(batches))
		for i, b := range batches {
			parts[i] = b.Column(c)
		}
		return array.Concatenate(parts, o.Allocator)
	}
	keys := make([]arrow.Array, len(idx))
	defer func() {
		for _, k := range keys {
			if k != nil {
				k.Release()
			}
		}
	}()
	for i, c := range idx {
		if keys[i], err = column(c); err != nil {
			return nil, err
		}
	}
	n := keys[0].Len()
	var kb columnar.KeyBatch
	if err := enc.EncodeBatch(&kb, keys, 0, n); err != nil {
		return nil, err
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return bytes.Compare(kb.Key(a), kb.Key(b)) })
	kb = columnar.KeyBatch{}

	w, err := columnar.Create(columnar.ContainerDir(o.DataDir, o.Table, o.Projection, id), columnar.WriterOptions{
		Table: o.Table, Projection: o.Projection, ID: id, Schema: schema, SortKey: o.SortKey,
		BlockRows: o.BlockRows, Compression: o.Compression, Allocator: o.Allocator, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	for c := range schema.NumFields() {
		arr, err := column(c)
		if err != nil {
			return nil, err
		}
		for start := 0; start < n; start += o.BlockRows {
			blk, err := columnar.Take(o.Allocator, arr, perm[start:min(n, start+o.BlockRows)])
			if err != nil {
				arr.Release()
				return nil, err
			}
			err = w.WriteColumn(c, blk)
			blk.Release()
			if err != nil {
				arr.Release()
				return nil, err
			}
		}
		arr.Release()
		if err := w.FinishColumn(c); err != nil {
			return nil, err
		}
	}
	return w.Commit()
}
