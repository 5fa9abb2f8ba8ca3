package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/messages"
)

// Sorted runs: input that does not fit the grant and is not in a
// group's order is sorted in runs that fit, spilled, and merged into one
// sorted container.

// sortToContainer writes sorted runs of the input and merges them into one
// container. It returns that container's directory and the query rewritten
// to read it (keys as columns, WHERE already applied).
func sortToContainer(ctx context.Context, p *plan, cs []*columnar.Container, tmp string, o Options, st *Stats) (string, *messages.WindowQuery, error) {
	r := newSortedRuns(p, tmp, o, st)
	// Rows per run: what the grant holds with room for sorting and writing.
	perRow := p.memoryPerRow() + int64(len(r.computed))*9 + int64(len(r.used))*18
	// Sorting and writing a run takes about half the grant; the chunk
	// buffer (a run plus one input block) and the reader the rest.
	// The reader holds a block of every used column besides.
	block := maxBlockBytes(cs, r.used)
	runRows := int((o.Budget.Limit() - o.Budget.InUse() - block) / 2 / perRow)
	if runRows < 1024 {
		return "", nil, fmt.Errorf("%w: a %d-byte grant holds only %d rows per sorted run (%d bytes a row, input blocks of up to %d bytes)",
			ErrGrantTooSmall, o.Budget.Limit(), max(runRows, 0), perRow, block)
	}
	if err := readChunks(ctx, p, cs, r.used, runRows, o.Budget, r.write); err != nil {
		return "", nil, err
	}
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	merged, err := r.merge(ctx)
	if err != nil {
		return "", nil, err
	}
	// The query over the sorted container: keys by column name, no WHERE.
	return merged, rewriteForRuns(p, r.keyNames), nil
}

// sortedRuns writes the sorted runs of one window group's input under
// tmp and merges them.
type sortedRuns struct {
	p   *plan
	tmp string
	o   Options
	st  *Stats
	// A run's columns: the used input columns, then the computed keys.
	used     []int
	fields   []arrow.Field
	keys     []sortKey // PARTITION BY, then ORDER BY
	keyNames []string  // the run's column of each key
	computed []int     // indexes into keys of keys that need a column
	schema   *arrow.Schema
	sortKey  columnar.SortKey
	s        sorter
	runs     []string // the runs' directories
}

func newSortedRuns(p *plan, tmp string, o Options, st *Stats) *sortedRuns {
	g := p.groups[0]
	r := &sortedRuns{p: p, tmp: tmp, o: o, st: st, used: p.usedColumns()}
	for _, c := range r.used {
		r.fields = append(r.fields, p.schema.schema.Field(c))
	}
	r.keys = append(append([]sortKey(nil), g.partition...), g.order...)
	r.keyNames = make([]string, len(r.keys))
	for i, k := range r.keys {
		if k.expr.col >= 0 {
			r.keyNames[i] = k.expr.colName
			continue
		}
		r.keyNames[i] = fmt.Sprintf("__key%d", i)
		r.computed = append(r.computed, i)
		r.fields = append(r.fields, arrow.Field{Name: r.keyNames[i], Type: k.expr.typ, Nullable: true})
	}
	r.schema = arrow.NewSchema(r.fields, nil)
	inKey := map[string]bool{}
	for i, k := range r.keys {
		if inKey[r.keyNames[i]] {
			continue // a repeated key orders nothing its first use did not
		}
		inKey[r.keyNames[i]] = true
		r.sortKey = append(r.sortKey, columnar.SortColumn{Name: r.keyNames[i], Desc: k.desc, NullsFirst: k.nullsFirst})
	}
	return r
}

// write filters, sorts and spills the rows of in as a run.
func (r *sortedRuns) write(in *input) error {
	p, o := r.p, r.o
	if in.n == 0 {
		return nil
	}
	if len(p.where) > 0 {
		keep, err := evalPredicates(p.where, in.cols, in.n)
		if err != nil {
			return fmt.Errorf("windower: where: %w", err)
		}
		in.compact(keep)
	}
	n := in.n
	sk := make([]sortedKey, len(r.keys))
	kv := make([]*vector, len(r.keys))
	for i, k := range r.keys {
		v, err := k.expr.eval(in.cols, n)
		if err != nil {
			return fmt.Errorf("windower: sort key: %w", err)
		}
		kv[i] = v
		sk[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
	}
	perm := r.s.sortPerm(sk, n, nil)
	dir := filepath.Join(r.tmp, fmt.Sprintf("run-%06d", len(r.runs)))
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "windower", Projection: "run", ID: filepath.Base(dir),
		Schema: r.schema, SortKey: r.sortKey, Allocator: o.Budget, Compression: columnar.CompressionLZ4, BlockRows: spillBlockRows(p.rowBytes()+9*int64(len(r.computed)), o.Budget.Limit())})
	if err != nil {
		return fmt.Errorf("windower: spill run: %w", err)
	}
	cols := make([]*vector, 0, len(r.fields))
	for _, c := range r.used {
		cols = append(cols, in.cols[c])
	}
	for _, i := range r.computed {
		cols = append(cols, kv[i])
	}
	for j, v := range cols {
		arr := v.gather(perm, &vector{}).toArrow(o.Budget)
		err := w.WriteColumn(j, arr)
		arr.Release()
		if err != nil {
			w.Abort()
			return fmt.Errorf("windower: spill run %s: %w", dir, err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		w.Abort()
		return fmt.Errorf("windower: spill run %s: %w", dir, err)
	}
	r.st.SpilledBytes += m.CompressedBytes()
	r.runs = append(r.runs, dir)
	return nil
}

// merge merges the runs into one sorted container and returns its
// directory (the run itself when there is one).
func (r *sortedRuns) merge(ctx context.Context) (string, error) {
	o, st := r.o, r.st
	merged := filepath.Join(r.tmp, "sorted")
	switch len(r.runs) {
	case 0:
		w, err := columnar.Create(merged, columnar.WriterOptions{Table: "windower", Projection: "run", ID: "sorted", Schema: r.schema, SortKey: r.sortKey})
		if err != nil {
			return "", err
		}
		if _, err := w.Commit(); err != nil {
			return "", err
		}
	case 1:
		merged = r.runs[0]
	default:
		o.Logger.Debug("merging sorted runs", "runs", len(r.runs))
		ms, err := merger.Merge(ctx, r.runs, merged, merger.Options{
			Grant: o.Budget.Limit() - o.Budget.InUse(), TempDir: r.tmp, Logger: o.Logger, Parallelism: 1,
		})
		if err != nil {
			return "", fmt.Errorf("windower: merge %d sorted runs: %w", len(r.runs), err)
		}
		st.PeakBytes = max(st.PeakBytes, ms.PeakBytes)
		st.SpilledBytes += ms.BytesOut + ms.SpilledBytes
		for _, run := range r.runs {
			os.RemoveAll(run)
		}
	}
	return merged, nil
}

// rewriteForRuns rebuilds the query from the plan's source query shape:
// every window call's keys become the run's key columns.
func rewriteForRuns(p *plan, keyNames []string) *messages.WindowQuery {
	q := p.source
	out := &messages.WindowQuery{Table: q.Table, Select: make([]messages.SelectItem, len(q.Select)), Limit: q.Limit}
	g := p.groups[0]
	np := len(g.partition)
	for i, it := range q.Select {
		out.Select[i] = it
		if it.Window == nil {
			continue
		}
		w := *it.Window
		w.PartitionBy = make([]messages.Expr, np)
		for k := 0; k < np; k++ {
			w.PartitionBy[k] = messages.Expr{Column: keyNames[k]}
		}
		w.OrderBy = make([]messages.SortItem, len(g.order))
		for k, o := range g.order {
			w.OrderBy[k] = messages.SortItem{Expr: messages.Expr{Column: keyNames[np+k]}, Desc: o.desc, NullsFirst: o.nullsFirst}
		}
		out.Select[i].Window = &w
	}
	return out
}

// readChunks reads the used columns of the containers in chunks of at
// most chunkRows rows, and of no more string bytes than chunkRows rows of
// the input's average hold, and calls fn with each. A block is cut where
// a chunk fills, so the buffer holds chunkRows rows and no more.
func readChunks(ctx context.Context, p *plan, cs []*columnar.Container, used []int, chunkRows int, budget *columnar.Budget, fn func(*input) error) error {
	in, reserved, err := reserveBuffer(p, chunkRows, budget)
	if err != nil {
		return err
	}
	defer budget.Release(reserved)
	strCap := p.stringCap(chunkRows)
	var strHeld int64
	for _, c := range cs {
		br, err := c.OpenColumns(used)
		if err != nil {
			return fmt.Errorf("windower: read %s: %w", c.Dir(), err)
		}
		for {
			if err := ctx.Err(); err != nil {
				br.Close()
				return err
			}
			rec, err := br.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				br.Close()
				return fmt.Errorf("windower: read %s: %w", c.Dir(), err)
			}
			for off := int64(0); off < rec.NumRows(); {
				take := min(rec.NumRows()-off, int64(chunkRows-in.n))
				part := rec.NewSlice(off, off+take)
				start := in.n
				err = in.appendRecord(part, used)
				part.Release()
				if err != nil {
					rec.Release()
					br.Close()
					return fmt.Errorf("windower: read %s: %w", c.Dir(), err)
				}
				off += take
				strHeld += stringBytes(in, start, in.n)
				if in.n >= chunkRows || strHeld > strCap {
					if err := fn(in); err != nil {
						rec.Release()
						br.Close()
						return err
					}
					in.reset()
					strHeld = 0
				}
			}
			rec.Release()
		}
		if err := br.Close(); err != nil {
			return err
		}
	}
	return fn(in)
}
