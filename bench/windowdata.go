package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/jackc/pgx/v5"
	"github.com/strata-db/strata/columnar"
)

// windowTable is the data of the window suite, generated deterministically
// from a seed. Every system loads exactly these rows.
//
//	id  bigint     0..n-1, the stored order of table w
//	a   bigint     a permutation of 0..n-1: n distinct partitions for Q0
//	c   bigint     0 everywhere: Q0 with one partition over the same rows
//	g   bigint     uniform in [0, groups): partitions of about n/groups rows
//	x   bigint     a permutation of 0..n-1: a unique order key within g
//	t   timestamp  distinct seconds from 2024-01-01 in random order: a unique
//	               order key for ROWS frames, and a RANGE interval key
//	s   text       nullable labels of varied length (columnar.GenLabels):
//	               values read and compared as strings, a string partition key
//	k   text       fixed-width codes, never NULL (columnar.GenCodes)
//
// Order keys are unique so that ROWS frames, row_number and lag/lead have one
// right answer and the systems can be compared row by row.
type windowTable struct {
	n              int
	id, a, c, g, x []int64
	t              []int64 // microseconds since the Unix epoch
	s              []string
	sNull          []bool // s[i] is NULL
	k              []string
}

var windowColumns = []string{"id", "a", "c", "g", "x", "t", "s", "k"}

func generateWindowTable(n, groups int, seed uint64) *windowTable {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &windowTable{
		n:  n,
		id: make([]int64, n), a: make([]int64, n), c: make([]int64, n),
		g: make([]int64, n), x: make([]int64, n), t: make([]int64, n),
	}
	permA, permX, permT := r.Perm(n), r.Perm(n), r.Perm(n)
	for i := range n {
		w.id[i] = int64(i)
		w.a[i] = int64(permA[i])
		w.g[i] = int64(r.IntN(groups))
		w.x[i] = int64(permX[i])
		w.t[i] = base.UnixMicro() + int64(permT[i])*1_000_000
	}
	// Their own streams, so the other columns are what they were before s and k.
	w.s, w.sNull = columnar.GenLabels(n, rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed)))
	w.k = columnar.GenCodes(n, rand.New(rand.NewPCG(seed^0x14057b7ef767814f, seed)))
	return w
}

func windowSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(windowColumns))
	for i, name := range windowColumns {
		fields[i] = arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64}
	}
	fields[5].Type = &arrow.TimestampType{Unit: arrow.Microsecond}
	fields[6].Type, fields[6].Nullable = arrow.BinaryTypes.String, true
	fields[7].Type = arrow.BinaryTypes.String
	return arrow.NewSchema(fields, nil)
}

// orderBy returns the row indexes sorted by key (stable, so ties keep id order).
func (w *windowTable) orderBy(key []int64) []int {
	idx := make([]int, w.n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(p, q int) int {
		switch {
		case key[p] < key[q]:
			return -1
		case key[p] > key[q]:
			return 1
		}
		return 0
	})
	return idx
}

// records returns the rows in the given order as record batches of at most
// batch rows. The caller releases them.
func (w *windowTable) records(mem memory.Allocator, order []int, batch int) []arrow.RecordBatch {
	schema := windowSchema()
	var out []arrow.RecordBatch
	for lo := 0; lo < len(order); lo += batch {
		hi := min(lo+batch, len(order))
		b := array.NewRecordBuilder(mem, schema)
		for c, col := range [][]int64{w.id, w.a, w.c, w.g, w.x} {
			ib := b.Field(c).(*array.Int64Builder)
			ib.Reserve(hi - lo)
			for _, i := range order[lo:hi] {
				ib.UnsafeAppend(col[i])
			}
		}
		tb := b.Field(5).(*array.TimestampBuilder)
		tb.Reserve(hi - lo)
		for _, i := range order[lo:hi] {
			tb.UnsafeAppend(arrow.Timestamp(w.t[i]))
		}
		sb := b.Field(6).(*array.StringBuilder)
		sb.Reserve(hi - lo)
		for _, i := range order[lo:hi] {
			if w.sNull[i] {
				sb.AppendNull()
			} else {
				sb.Append(w.s[i])
			}
		}
		kb := b.Field(7).(*array.StringBuilder)
		kb.Reserve(hi - lo)
		for _, i := range order[lo:hi] {
			kb.Append(w.k[i])
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// writeParquet writes the rows in id order to a Parquet file.
func (w *windowTable) writeParquet(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(windowSchema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return fmt.Errorf("parquet writer %s: %w", path, err)
	}
	order := w.orderBy(w.id)
	for _, rec := range w.records(memory.DefaultAllocator, order, 1<<16) {
		err = fw.Write(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := fw.Close(); err != nil { // closes f too
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// copyToPostgres loads the rows in id order into an existing table with COPY.
func (w *windowTable) copyToPostgres(ctx context.Context, conn *pgx.Conn, table string) error {
	n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, windowColumns, pgx.CopyFromSlice(w.n, func(i int) ([]any, error) {
		var s any
		if !w.sNull[i] {
			s = w.s[i]
		}
		return []any{w.id[i], w.a[i], w.c[i], w.g[i], w.x[i], time.UnixMicro(w.t[i]).UTC(), s, w.k[i]}, nil
	}))
	if err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	if int(n) != w.n {
		return fmt.Errorf("copy into %s: %d rows copied, want %d", table, n, w.n)
	}
	return nil
}
