package windowbench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// Table is the data of the suite, generated deterministically from a seed.
// Every system loads exactly these rows.
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
type Table struct {
	N              int
	ID, A, C, G, X []int64
	T              []int64 // microseconds since the Unix epoch
	S              []string
	SNull          []bool // S[i] is NULL
	K              []string
}

// Columns are the table's column names, in schema order.
var Columns = []string{"id", "a", "c", "g", "x", "t", "s", "k"}

// Generate makes a table of n rows whose column g has groups values.
func Generate(n, groups int, seed uint64) *Table {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &Table{
		N:  n,
		ID: make([]int64, n), A: make([]int64, n), C: make([]int64, n),
		G: make([]int64, n), X: make([]int64, n), T: make([]int64, n),
	}
	permA, permX, permT := r.Perm(n), r.Perm(n), r.Perm(n)
	for i := range n {
		w.ID[i] = int64(i)
		w.A[i] = int64(permA[i])
		w.G[i] = int64(r.IntN(groups))
		w.X[i] = int64(permX[i])
		w.T[i] = base.UnixMicro() + int64(permT[i])*1_000_000
	}
	// Their own streams, so the other columns are what they were before s and k.
	w.S, w.SNull = columnar.GenLabels(n, rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed)))
	w.K = columnar.GenCodes(n, rand.New(rand.NewPCG(seed^0x14057b7ef767814f, seed)))
	return w
}

// Schema is the table's Arrow schema: t TIMESTAMP(us), s a nullable UTF8,
// k UTF8, the rest INT64.
func Schema() *arrow.Schema {
	fields := make([]arrow.Field, len(Columns))
	for i, name := range Columns {
		fields[i] = arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64}
	}
	fields[5].Type = &arrow.TimestampType{Unit: arrow.Microsecond}
	fields[6].Type, fields[6].Nullable = arrow.BinaryTypes.String, true
	fields[7].Type = arrow.BinaryTypes.String
	return arrow.NewSchema(fields, nil)
}

// OrderBy returns the row indexes sorted by key, one of the table's
// integer columns (stable, so ties keep id order).
func (w *Table) OrderBy(key []int64) []int {
	idx := make([]int, w.N)
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

// Records returns the rows in the given order as record batches of at most
// batch rows. The caller releases them.
func (w *Table) Records(mem memory.Allocator, order []int, batch int) []arrow.RecordBatch {
	schema := Schema()
	var out []arrow.RecordBatch
	for lo := 0; lo < len(order); lo += batch {
		hi := min(lo+batch, len(order))
		b := array.NewRecordBuilder(mem, schema)
		for c, col := range [][]int64{w.ID, w.A, w.C, w.G, w.X} {
			ib := b.Field(c).(*array.Int64Builder)
			ib.Reserve(hi - lo)
			for _, i := range order[lo:hi] {
				ib.UnsafeAppend(col[i])
			}
		}
		tb := b.Field(5).(*array.TimestampBuilder)
		tb.Reserve(hi - lo)
		for _, i := range order[lo:hi] {
			tb.UnsafeAppend(arrow.Timestamp(w.T[i]))
		}
		sb := b.Field(6).(*array.StringBuilder)
		sb.Reserve(hi - lo)
		for _, i := range order[lo:hi] {
			if w.SNull[i] {
				sb.AppendNull()
			} else {
				sb.Append(w.S[i])
			}
		}
		kb := b.Field(7).(*array.StringBuilder)
		kb.Reserve(hi - lo)
		for _, i := range order[lo:hi] {
			kb.Append(w.K[i])
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// WriteContainer writes the rows in the given order as one committed
// container at dir, a block of opts.BlockRows rows (default
// columnar.DefaultBlockRows) at a time, so only one block is built at once.
// opts.Schema is the table's.
func (w *Table) WriteContainer(dir string, opts columnar.WriterOptions, order []int) (*columnar.Manifest, error) {
	opts.Schema = Schema()
	batch := opts.BlockRows
	if batch <= 0 {
		batch = columnar.DefaultBlockRows
	}
	cw, err := columnar.Create(dir, opts)
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < len(order); lo += batch {
		rec := w.Records(memory.DefaultAllocator, order[lo:min(lo+batch, len(order))], batch)[0]
		err := cw.Write(rec)
		rec.Release()
		if err != nil {
			cw.Abort()
			return nil, fmt.Errorf("windowbench: write %s: %w", dir, err)
		}
	}
	m, err := cw.Commit()
	if err != nil {
		return nil, fmt.Errorf("windowbench: commit %s: %w", dir, err)
	}
	return m, nil
}
