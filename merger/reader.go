package merger

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// MergeReaderOptions configures NewMergeReader.
type MergeReaderOptions struct {
	// Allocator for the output batches; default memory.DefaultAllocator.
	// Pass the job's *columnar.Budget so the merged batches count against
	// its grant (its Reserve also counts the reader's key buffers).
	Allocator memory.Allocator
	// BatchRows is the rows per output batch (the last may be shorter);
	// default columnar.DefaultBlockRows.
	BatchRows int
}

// MergeReader streams the rows of several sorted containers in merged
// order, as record batches of chosen columns: the k-way merge of Merge
// without the output container, for callers that consume merged rows
// themselves (the windower merges its sorted spill runs with it).
//
// The merge is stable: rows with equal keys come in container order, then
// row order. Memory: one block of each chosen column (and of each key
// column) per container, their normalized keys, and one output batch.
// Blocks are read from the containers' allocators (columnar.OpenOptions).
//
// A MergeReader is not safe for concurrent use. Close it when done.
type MergeReader struct {
	schema    *arrow.Schema // of the output: the chosen columns
	kw        *kway
	readers   []*columnar.BatchReader
	builders  []columnBuilder
	srcCol    []int // position in the source batches of each output column
	batchRows int
	lastRec   []arrow.RecordBatch
	views     [][]blockView
	rows      int64
	err       error
}

// NewMergeReader merges containers (sorted on the same key, with the same
// schema) and yields columns cols (schema indices, in the order wanted).
func NewMergeReader(containers []*columnar.Container, cols []int, opts MergeReaderOptions) (*MergeReader, error) {
	if len(containers) == 0 {
		return nil, ErrNoInputs
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = columnar.DefaultBlockRows
	}
	first := containers[0]
	schema, key := first.Schema(), first.SortKey()
	for _, c := range containers[1:] {
		if !slices.Equal(c.Manifest().Schema, first.Manifest().Schema) {
			return nil, fmt.Errorf("%w: schema of %s differs from %s: %s", ErrMismatch, c.Dir(), first.Dir(),
				schemaDiff(first.Manifest().Schema, c.Manifest().Schema))
		}
		if !c.SortKey().Equal(key) {
			return nil, fmt.Errorf("%w: sort key of %s (%s) differs from %s (%s)", ErrMismatch, c.Dir(), c.SortKey(), first.Dir(), key)
		}
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: merge reader: no columns chosen", ErrInternal)
	}
	for _, c := range cols {
		if c < 0 || c >= schema.NumFields() {
			return nil, fmt.Errorf("%w: merge reader: column %d out of range [0, %d)", ErrInternal, c, schema.NumFields())
		}
	}
	keyIdx, err := key.Indices(schema)
	if err != nil {
		return nil, fmt.Errorf("merger: merge reader: %w", err)
	}
	enc, err := columnar.NewKeyEncoder(schema, key)
	if err != nil {
		return nil, fmt.Errorf("merger: merge reader: %w", err)
	}
	// Read the key columns first, then the chosen columns not among them.
	read := slices.Clone(keyIdx)
	for _, c := range cols {
		if !slices.Contains(read, c) {
			read = append(read, c)
		}
	}
	r := &MergeReader{batchRows: opts.BatchRows, srcCol: make([]int, len(cols))}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		r.srcCol[i] = slices.Index(read, c)
		fields[i] = schema.Field(c)
	}
	r.schema = arrow.NewSchema(fields, nil)
	srcs := make([]recordSource, len(containers))
	names := make([]string, len(containers))
	for i, c := range containers {
		br, err := c.OpenColumns(read)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("merger: merge reader: open input %d (%s): %w", i, c.Dir(), err)
		}
		r.readers = append(r.readers, br)
		srcs[i], names[i] = br, c.Dir()
	}
	keyCols := make([]int, len(keyIdx))
	for j := range keyCols {
		keyCols[j] = j
	}
	var res reserver = nopReserver{}
	if rv, ok := opts.Allocator.(reserver); ok {
		res = rv
	}
	if r.kw, err = newKway(enc, keyCols, srcs, names, res); err != nil {
		r.Close()
		return nil, fmt.Errorf("merger: merge reader: %w", err)
	}
	for _, c := range cols {
		b, err := newColumnBuilder(schema.Field(c).Type, opts.Allocator, opts.BatchRows)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.builders = append(r.builders, b)
	}
	r.lastRec = make([]arrow.RecordBatch, len(containers))
	r.views = make([][]blockView, len(containers))
	for i := range r.views {
		r.views[i] = make([]blockView, len(cols))
	}
	return r, nil
}

// Schema returns the schema of the batches: the chosen columns.
func (r *MergeReader) Schema() *arrow.Schema { return r.schema }

// Next returns the next batch of merged rows, or io.EOF after the last. The
// caller owns the batch and must Release it.
func (r *MergeReader) Next() (arrow.RecordBatch, error) {
	if r.err != nil {
		return nil, r.err
	}
	for r.builders[0].len() < r.batchRows {
		input, rec, start, n, err := r.kw.next(r.batchRows - r.builders[0].len())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.err = fmt.Errorf("merger: merge reader: %w", err)
			return nil, r.err
		}
		if rec != r.lastRec[input] {
			r.lastRec[input] = rec
			for j, c := range r.srcCol {
				r.views[input][j] = newBlockView(rec.Column(c))
			}
		}
		for j, b := range r.builders {
			if err := b.appendRun(&r.views[input][j], start, n); err != nil {
				r.err = err
				return nil, err
			}
		}
	}
	n := r.builders[0].len()
	if n == 0 {
		r.err = io.EOF
		return nil, io.EOF
	}
	arrs := make([]arrow.Array, len(r.builders))
	for j, b := range r.builders {
		arrs[j] = b.finish()
	}
	rec := array.NewRecordBatch(r.schema, arrs, int64(n))
	for _, a := range arrs {
		a.Release()
	}
	r.rows += int64(n)
	return rec, nil
}

// Comparisons returns the key comparisons made so far.
func (r *MergeReader) Comparisons() int64 {
	if r.kw == nil {
		return 0
	}
	return r.kw.comparisons()
}

// Close releases the reader's blocks and buffers and closes its files.
func (r *MergeReader) Close() error {
	if r.kw != nil {
		r.kw.close()
		r.kw = nil
	}
	for _, b := range r.builders {
		b.release()
	}
	r.builders = nil
	var errs []error
	for _, br := range r.readers {
		errs = append(errs, br.Close())
	}
	r.readers = nil
	if r.err == nil {
		r.err = fmt.Errorf("merger: merge reader: %w", columnar.ErrClosed)
	}
	return errors.Join(errs...)
}
