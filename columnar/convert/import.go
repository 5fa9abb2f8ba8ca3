package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/strata-db/strata/columnar"
)

// DefaultNulls are the CSV spellings of NULL when ImportOptions.Nulls is
// nil: the empty field and NULL.
var DefaultNulls = []string{"", "NULL"}

// ImportOptions configures ImportCSV and ImportParquet.
type ImportOptions struct {
	DataDir, Table, Projection string
	// Name names the input in errors (a file name, say); default "input".
	Name string
	// IDPrefix and FirstID name the containers: <IDPrefix><FirstID>,
	// <IDPrefix><FirstID+1>, ..., the number four digits at least
	// (import-0000, import-0001, ...). IDPrefix "c" with FirstID past a
	// projection's highest container adds to the projection. Default
	// IDPrefix "import-".
	IDPrefix string
	FirstID  int
	// Number, if set, numbers the containers instead of FirstID: the i-th
	// container written (from 0) is <IDPrefix><Number(i)>. A load that
	// reserves its container numbers as it goes sets it; an error stops
	// the import.
	Number func(i int) (int, error)
	// SortKey orders each container. Required.
	SortKey columnar.SortKey
	// Schema of the input. For CSV it gives every column's type (see
	// ParseSchema), and with a header its names must be the header's;
	// nil: inferred from the first InferRows rows as the package doc
	// says. For Parquet it must match the file's if set.
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
	// Context stops the import when done: reads of the input fail and no
	// further container is written. Default: never.
	Context context.Context
	// Progress, if set, is called after each container is committed with
	// the containers and rows written so far.
	Progress func(containers int, rows int64)
	// PrimaryKey, if set, makes the containers a keyed table's: their
	// schema is the input's with the key columns not null, every other
	// column nullable and the change columns after them (KeyedSchema),
	// every row version 0 and not deleted, and their manifests name the
	// key. A NULL in a key column or two rows with one key anywhere in
	// the input fail the import (package doc, # Primary keys).
	PrimaryKey []string
	// TempDir holds the primary key check's temporary file (its runs of
	// sorted keys); default os.TempDir().
	TempDir string
	// KeyStats, if set, receives what the primary key check did.
	KeyStats *KeyCheckStats
	// CSV only.
	Comma rune // the delimiter; default ','
	// NoHeader: the first row is data, not column names. The columns are
	// named as Schema says, or without one column0, column1, ... (as
	// DuckDB names them).
	NoHeader bool
	// Nulls are the spellings of NULL; nil means DefaultNulls. An empty,
	// non-nil slice means no field is NULL.
	Nulls       []string
	StringsNull bool // Nulls also mean NULL in utf8 columns (else they are strings)
}

func (o *ImportOptions) defaults() error {
	if len(o.SortKey) == 0 {
		return errors.New("no sort key given")
	}
	if o.DataDir == "" || o.Table == "" || o.Projection == "" {
		return errors.New("data dir, table and projection are required")
	}
	if o.FirstID < 0 {
		return fmt.Errorf("first container number %d is negative", o.FirstID)
	}
	if o.Name == "" {
		o.Name = "input"
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
	if o.Comma == '"' || o.Comma == '\r' || o.Comma == '\n' || !utf8.ValidRune(o.Comma) || o.Comma == utf8.RuneError {
		return fmt.Errorf("delimiter %q cannot separate fields", o.Comma)
	}
	if o.Nulls == nil {
		o.Nulls = DefaultNulls
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	return nil
}

// ImportCSV reads CSV from r into sorted containers. It returns the
// manifests of the containers written, in order; on error, those written
// before it (which the caller may remove). Input without data rows
// imports as no containers and no error. An error at a place in the input
// wraps a *CSVError, which names the input, the line and the column.
func ImportCSV(r io.Reader, opts ImportOptions) ([]*columnar.Manifest, error) {
	if err := opts.defaults(); err != nil {
		return nil, fmt.Errorf("import csv %s: %w", opts.Name, err)
	}
	wrap := func(err error) error {
		if _, ok := errors.AsType[*CSVError](err); ok {
			return fmt.Errorf("import csv: %w", err) // the error names the input
		}
		return fmt.Errorf("import csv %s: %w", opts.Name, err)
	}
	var src *csvSource
	if err := guard("read the header", func() (err error) {
		src, err = newCSVSource(ctxReader{ctx: opts.Context, r: r}, &opts)
		return err
	}); err != nil {
		return nil, wrap(err)
	}
	if src == nil {
		return nil, nil
	}
	defer src.Release()
	ms, err := importBatches(src, &opts)
	if err != nil {
		return ms, wrap(err)
	}
	return ms, nil
}

// ImportParquet reads a Parquet file into sorted containers. It returns
// what ImportCSV does. It does not close r.
func ImportParquet(r parquet.ReaderAtSeeker, opts ImportOptions) (ms []*columnar.Manifest, err error) {
	name := opts.Name
	if name == "" {
		name = "input"
	}
	ms, err = importParquet(r, opts)
	if err != nil {
		return ms, fmt.Errorf("import parquet %s: %w", name, err)
	}
	return ms, nil
}

func importParquet(r parquet.ReaderAtSeeker, opts ImportOptions) (ms []*columnar.Manifest, err error) {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	r = ctxReaderAt{ctx: ctx, r: r}
	var pf *file.Reader
	if err := guard("read the footer", func() (err error) {
		pf, err = file.NewParquetReader(r)
		return err
	}); err != nil {
		return nil, err
	}
	defer pf.Close()
	if opts.RowsPerContainer <= 0 && opts.Containers > 0 {
		rows := pf.NumRows()
		opts.RowsPerContainer = int(max(1, (rows+int64(opts.Containers)-1)/int64(opts.Containers)))
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	var rr pqarrow.RecordReader
	if err := guard("read the schema", func() error {
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(min(opts.BlockRows, opts.RowsPerContainer))}, opts.Allocator)
		if err != nil {
			return err
		}
		rr, err = fr.GetRecordReader(opts.Context, nil, nil)
		return err
	}); err != nil {
		return nil, err
	}
	defer rr.Release()
	if opts.Schema != nil && !opts.Schema.Equal(rr.Schema()) {
		return nil, fmt.Errorf("%w: file schema %s, expected %s", columnar.ErrSchemaMismatch, rr.Schema(), opts.Schema)
	}
	return importBatches(rr, &opts)
}

// guard runs fn, turning a panic (arrow's readers panic on some damaged
// input) into an error saying what was being done.
func guard(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: %w: %v", what, ErrMalformed, p)
		}
	}()
	return fn()
}

// ErrMalformed is wrapped by errors for input the readers could not make
// sense of (where arrow's readers panicked).
var ErrMalformed = errors.New("convert: malformed input")

// batchSource is what arrow's CSV and Parquet readers have in common.
type batchSource interface {
	Schema() *arrow.Schema
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}

func importBatches(src batchSource, o *ImportOptions) ([]*columnar.Manifest, error) {
	var (
		out      []*columnar.Manifest
		pending  []arrow.RecordBatch
		rows     int   // rows pending
		read     int64 // rows read from the input
		last     int64 // rows of the last batch read
		imported int64 // rows written to containers
		kc       *keyCheck
	)
	defer func() {
		for _, r := range pending {
			r.Release()
		}
	}()
	if len(o.PrimaryKey) > 0 {
		var err error
		if kc, err = newKeyCheck(src.Schema(), src, o); err != nil {
			return nil, err
		}
		defer kc.close()
	}
	flush := func() error {
		if rows == 0 {
			return nil
		}
		n := o.FirstID + len(out)
		if o.Number != nil {
			var err error
			if n, err = o.Number(len(out)); err != nil {
				return fmt.Errorf("number container %d: %w", len(out), err)
			}
		}
		id := fmt.Sprintf("%s%04d", o.IDPrefix, n)
		m, err := writeSorted(pending, id, o, kc, imported)
		for _, r := range pending {
			r.Release()
		}
		pending, rows = pending[:0], 0
		if err != nil {
			if m != nil { // committed, then its key run failed: removed with the rest
				out = append(out, m)
			}
			return fmt.Errorf("container %s: %w", id, err)
		}
		o.Logger.Info("imported container", "id", id, "rows", m.Rows)
		out = append(out, m)
		imported += m.Rows
		if o.Progress != nil {
			o.Progress(len(out), imported)
		}
		return nil
	}
	for {
		if err := o.Context.Err(); err != nil {
			return out, err
		}
		var rec arrow.RecordBatch
		err := guard(fmt.Sprintf("read rows from %d on", read+1), func() error {
			if src.Next() {
				rec = src.RecordBatch()
				rec.Retain()
			}
			return nil
		})
		if err != nil {
			return out, err
		}
		if rec == nil {
			break
		}
		if kc != nil {
			if err := kc.checkNulls(rec, read); err != nil {
				rec.Release()
				return out, err
			}
		}
		last = rec.NumRows()
		read += last
		for off := 0; off < int(rec.NumRows()); {
			n := min(int(rec.NumRows())-off, o.RowsPerContainer-rows)
			part := rec.NewSlice(int64(off), int64(off+n))
			pending = append(pending, part)
			rows += n
			off += n
			if rows == o.RowsPerContainer {
				if err := flush(); err != nil {
					rec.Release()
					return out, err
				}
			}
		}
		rec.Release()
		if kc != nil && kc.dup {
			// The first duplicate is among the containers written.
			return out, kc.check(out)
		}
	}
	if err := src.Err(); err != nil {
		if cerr := o.Context.Err(); cerr != nil && errors.Is(err, cerr) {
			return out, cerr
		}
		if _, ok := errors.AsType[*CSVError](err); ok {
			return out, err // it says where
		}
		// The error is in the last batch returned (arrow's CSV reader
		// returns the batch a bad value is in, then fails) or after it.
		return out, fmt.Errorf("read rows from %d on: %w", read-last+1, err)
	}
	if err := flush(); err != nil {
		return out, err
	}
	if kc != nil {
		if err := kc.check(out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// writeSorted sorts the rows of batches on the key and writes them as one
// container, a column at a time. With a primary key (kc), it appends the
// change columns and writes the container's run of keys; first is the
// input row (0-based) of the batches' first row.
func writeSorted(batches []arrow.RecordBatch, id string, o *ImportOptions, kc *keyCheck, first int64) (*columnar.Manifest, error) {
	schema := batches[0].Schema()
	out, pk := schema, []string(nil)
	if kc != nil {
		out, pk = kc.out, o.PrimaryKey
	}
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
		Table: o.Table, Projection: o.Projection, ID: id, Schema: out, SortKey: o.SortKey, PrimaryKey: pk,
		BlockRows: o.BlockRows, Compression: o.Compression, Allocator: o.Allocator, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	for c := range schema.NumFields() {
		if err := o.Context.Err(); err != nil {
			return nil, err
		}
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
	if kc != nil {
		if err := writeChangeColumns(w, schema.NumFields(), n, o); err != nil {
			return nil, err
		}
	}
	m, err := w.Commit()
	if err != nil || kc == nil {
		return m, err
	}
	pkCols := make([]arrow.Array, len(kc.idx))
	defer func() {
		for _, a := range pkCols {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range kc.idx {
		if pkCols[i], err = column(c); err != nil {
			return m, err
		}
	}
	return m, kc.addRun(pkCols, perm, first)
}

// writeChangeColumns writes the change columns, from column col on, of a
// container of n loaded rows.
func writeChangeColumns(w *columnar.Writer, col, n int, o *ImportOptions) error {
	version, deleted := changeColumns(o.Allocator, min(n, o.BlockRows))
	defer version.Release()
	defer deleted.Release()
	for i, arr := range []arrow.Array{version, deleted} {
		for start := 0; start < n; start += o.BlockRows {
			blk := array.NewSlice(arr, 0, int64(min(o.BlockRows, n-start)))
			err := w.WriteColumn(col+i, blk)
			blk.Release()
			if err != nil {
				return err
			}
		}
		if err := w.FinishColumn(col + i); err != nil {
			return err
		}
	}
	return nil
}
