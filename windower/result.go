package windower

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
)

// A run's result: in memory, or a spilled container that it streams.

// Result is the output of a run: record batches in result order.
type Result struct {
	schema  *arrow.Schema
	cols    []arrow.Array // in-memory result
	rows    int
	next    int
	batch   int
	stats   Stats
	reader  batchReader // result spilled to containers, or range buckets streamed
	release func()
	// heldBytes of budget count the in-memory result's Go-allocated
	// columns until Close.
	budget    *columnar.Budget
	heldBytes int64
	// lease lent the in-memory result's columns (and its evaluation's
	// buffers); Close ends it, and each column's buffer goes back to the
	// pool once the batches read over it are released too.
	lease *bufpool.Lease
}

// Schema is the result's schema: one column per select item, named by its alias.
func (r *Result) Schema() *arrow.Schema { return r.schema }

// Stats returns the run's figures.
func (r *Result) Stats() Stats { return r.stats }

// Next returns the next batch, or io.EOF after the last. The caller
// releases each batch.
func (r *Result) Next() (arrow.RecordBatch, error) {
	if r.reader != nil {
		rec, err := r.reader.Next()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("windower: read spilled result: %w", err)
		}
		if err == nil && !rec.Schema().Equal(r.schema) {
			// The container carries its own field metadata; present the query's schema.
			out := array.NewRecordBatch(r.schema, rec.Columns(), rec.NumRows())
			rec.Release()
			rec = out
		}
		return rec, err
	}
	if r.next >= r.rows {
		return nil, io.EOF
	}
	end := min(r.next+r.batch, r.rows)
	cols := make([]arrow.Array, len(r.cols))
	for i, c := range r.cols {
		cols[i] = array.NewSlice(c, int64(r.next), int64(end))
	}
	rec := array.NewRecordBatch(r.schema, cols, int64(end-r.next))
	for _, c := range cols {
		c.Release()
	}
	r.next = end
	return rec, nil
}

// Close releases the result's memory.
func (r *Result) Close() {
	for _, c := range r.cols {
		c.Release()
	}
	r.cols = nil
	r.next = r.rows // Next after Close: io.EOF
	r.lease.End()
	r.lease = nil
	if r.budget != nil {
		r.budget.Release(r.heldBytes)
		r.budget, r.heldBytes = nil, 0
	}
	if r.reader != nil {
		r.reader.Close()
		r.reader = nil
	}
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// batchReader is a spilled result's reader.
type batchReader interface {
	Next() (arrow.RecordBatch, error)
	Close() error
}

// containersReader reads columns cols of the containers cs one after
// another, and no more than limit rows of them (0: all).
type containersReader struct {
	cs    []*columnar.Container
	cols  []int
	limit int64
	rows  int64
	cur   *columnar.BatchReader
}

func (r *containersReader) Next() (arrow.RecordBatch, error) {
	for {
		if r.limit > 0 && r.rows >= r.limit {
			return nil, io.EOF
		}
		if r.cur == nil {
			if len(r.cs) == 0 {
				return nil, io.EOF
			}
			br, err := r.cs[0].OpenColumns(r.cols)
			if err != nil {
				return nil, fmt.Errorf("open %s: %w", r.cs[0].Dir(), err)
			}
			r.cur, r.cs = br, r.cs[1:]
		}
		rec, err := r.cur.Next()
		if errors.Is(err, io.EOF) {
			err = r.cur.Close()
			r.cur = nil
			if err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.limit > 0 && r.rows+rec.NumRows() > r.limit {
			cut := rec.NewSlice(0, r.limit-r.rows)
			rec.Release()
			rec = cut
		}
		r.rows += rec.NumRows()
		return rec, nil
	}
}

func (r *containersReader) Close() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.Close()
	r.cur = nil
	return err
}

// goMemoryBytes is the size of the columns' buffers that toArrow wraps
// from Go memory instead of allocating from the budget: an integer or
// float column's values and validity, and a string column's bytes when
// they are the input's (stringArray). The budget's buffers are
// resizable, which Go memory wrapped with NewBufferBytes is not.
func goMemoryBytes(cols []arrow.Array) int64 {
	var n int64
	for _, c := range cols {
		for _, b := range c.Data().Buffers() {
			if b != nil && !b.Mutable() {
				n += int64(b.Len())
			}
		}
	}
	return n
}

// WriteContainer writes the rest of res as a container at dir (committed
// atomically) and returns its manifest. opts.Schema is set from res.
func WriteContainer(res *Result, dir string, opts columnar.WriterOptions) (*columnar.Manifest, error) {
	opts.Schema = res.Schema()
	w, err := columnar.Create(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("windower: write result: %w", err)
	}
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("windower: write result: %w", err)
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("windower: write result %s: %w", dir, err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("windower: commit result %s: %w", dir, err)
	}
	return m, nil
}
