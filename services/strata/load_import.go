package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/strata-db/strata/columnar"
)

// importOptions describes a CSV or Parquet import.
type importOptions struct {
	path, kind        string // kind: csv or parquet
	table, projection string
	sortKey           columnar.SortKey
	rowsPerContainer  int
	firstID           int // containers are c%04d from here
	blockRows         int
	compression       columnar.Compression
}

// parseSortKey parses "a, b DESC, c NULLS FIRST" into a sort key. NULLS
// defaults as in SQL: LAST for ASC, FIRST for DESC.
func parseSortKey(s string) (columnar.SortKey, error) {
	var key columnar.SortKey
	for _, part := range strings.Split(s, ",") {
		words := strings.Fields(part)
		if len(words) == 0 {
			return nil, fmt.Errorf("sort key %q: empty column", s)
		}
		col := columnar.SortColumn{Name: words[0]}
		rest := strings.ToUpper(strings.Join(words[1:], " "))
		if d, ok := strings.CutPrefix(rest, "DESC"); ok {
			col.Desc, col.NullsFirst, rest = true, true, strings.TrimSpace(d)
		} else if a, ok := strings.CutPrefix(rest, "ASC"); ok {
			rest = strings.TrimSpace(a)
		}
		switch rest {
		case "":
		case "NULLS FIRST":
			col.NullsFirst = true
		case "NULLS LAST":
			col.NullsFirst = false
		default:
			return nil, fmt.Errorf("sort key %q: cannot read %q after column %s", s, rest, col.Name)
		}
		key = append(key, col)
	}
	return key, nil
}

// recordSource is what the CSV and Parquet readers have in common.
type recordSource interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
	Schema() *arrow.Schema
	Release()
}

// importFile reads the file in chunks of rowsPerContainer rows, sorts each
// chunk by the sort key, and writes it as one container. Memory holds one
// chunk; containers' key ranges overlap, as loads' do, until mergeout.
func importFile(ctx context.Context, dataDir string, o importOptions, progress func(written int, rows int64)) ([]*columnar.Manifest, error) {
	f, err := os.Open(o.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var src recordSource
	switch o.kind {
	case "csv":
		src = csv.NewInferringReader(f, csv.WithHeader(true), csv.WithChunk(8192), csv.WithNullReader(true, "", "NULL"))
	case "parquet":
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return nil, fmt.Errorf("read parquet %s: %w", o.path, err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8192}, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("read parquet %s: %w", o.path, err)
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("read parquet %s: %w", o.path, err)
		}
		src = rr
	default:
		return nil, fmt.Errorf("unknown import format %q", o.kind)
	}
	defer src.Release()

	var (
		out     []*columnar.Manifest
		pending []arrow.RecordBatch
		rows    int64
		total   int64
	)
	release := func() {
		for _, r := range pending {
			r.Release()
		}
		pending, rows = nil, 0
	}
	defer release()
	flush := func() error {
		if rows == 0 {
			return nil
		}
		id := fmt.Sprintf("c%04d", o.firstID+len(out))
		m, err := writeSorted(dataDir, id, pending, o)
		if err != nil {
			return fmt.Errorf("container %s (rows %d..%d of %s): %w", id, total-rows, total, o.path, err)
		}
		out = append(out, m)
		release()
		progress(len(out), total)
		return nil
	}
	for src.Next() {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rec := src.RecordBatch()
		rec.Retain()
		// Cut the batch where containers end, so each holds exactly
		// rowsPerContainer rows (the last one fewer).
		for rec.NumRows() > 0 {
			room := int64(o.rowsPerContainer) - rows
			take := min(room, rec.NumRows())
			part := rec.NewSlice(0, take)
			rest := rec.NewSlice(take, rec.NumRows())
			rec.Release()
			rec = rest
			pending = append(pending, part)
			rows += take
			total += take
			if rows == int64(o.rowsPerContainer) {
				if err := flush(); err != nil {
					rec.Release()
					return out, err
				}
			}
		}
		rec.Release()
	}
	if err := src.Err(); err != nil && !errors.Is(err, io.EOF) {
		return out, fmt.Errorf("read %s after %d rows: %w", o.path, total, err)
	}
	if err := flush(); err != nil {
		return out, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no rows", o.path)
	}
	return out, nil
}

// writeSorted concatenates recs, sorts the rows by the sort key's
// normalized keys, and writes them as container id.
func writeSorted(dataDir, id string, recs []arrow.RecordBatch, o importOptions) (*columnar.Manifest, error) {
	schema := recs[0].Schema()
	mem := memory.DefaultAllocator
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			if !r.Schema().Equal(schema) {
				return nil, fmt.Errorf("the input's schema changed: %s, then %s", schema, r.Schema())
			}
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	n := cols[0].Len()
	keyCols := make([]arrow.Array, len(o.sortKey))
	for i, k := range o.sortKey {
		idx := schema.FieldIndices(k.Name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("sort key column %q is not in the input (columns: %s)", k.Name, fieldNames(schema))
		}
		keyCols[i] = cols[idx[0]]
	}
	enc, err := columnar.NewKeyEncoder(schema, o.sortKey)
	if err != nil {
		return nil, err
	}
	keys := make([][]byte, n)
	var buf []byte
	for r := range n {
		start := len(buf)
		buf = enc.AppendRow(buf, keyCols, r)
		keys[r] = buf[start:len(buf):len(buf)]
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })

	w, err := columnar.Create(columnar.ContainerDir(dataDir, o.table, o.projection, id), columnar.WriterOptions{
		Table: o.table, Projection: o.projection, ID: id, Schema: schema, SortKey: o.sortKey,
		BlockRows: o.blockRows, Compression: o.compression,
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	for i, c := range cols {
		sorted, err := columnar.Take(mem, c, order)
		if err != nil {
			return nil, fmt.Errorf("sort column %s: %w", schema.Field(i).Name, err)
		}
		err = w.WriteColumn(i, sorted)
		sorted.Release()
		if err != nil {
			return nil, err
		}
	}
	return w.Commit()
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
