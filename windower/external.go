package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/messages"
)

// The external path runs a query whose input does not fit the grant:
//
//  1. Unless the input is already in (partition, order) order, it is read
//     in chunks that fit the grant; each chunk is filtered, sorted and
//     written as a sorted run (a container in the temp directory, with
//     computed keys such as a % 1000 materialized as columns __key0, ...).
//     The runs are merged into one sorted container with merger.Merge.
//  2. The sorted rows stream through a buffer. Whenever the buffer is
//     full, the complete partitions in it are evaluated in memory and
//     their result rows appended to a result container in the temp
//     directory; the incomplete last partition stays in the buffer.
//  3. A partition larger than the buffer is evaluated in slices (see the
//     package documentation for how each function sees the rows outside
//     its slice: halo, first pass, carry or cursors).

// runExternal evaluates a query whose input does not fit the grant. Each
// window group is a stage: it sorts its input on the group's keys (runs
// and a merge) and streams it, writing a container that carries the input
// columns later stages need and the window results so far; the next
// stage reads that container. The last stage's container is the result.
func runExternal(ctx context.Context, p *plan, cs []*columnar.Container, rows int64, o Options) (res *Result, err error) {
	if len(p.groups) == 0 && len(p.orderBy) == 0 {
		return nil, fmt.Errorf("%w: %d rows do not fit the %d-byte grant, and a query without window functions or ORDER BY does not spill",
			ErrUnsupported, rows, o.Budget.Limit())
	}
	tmp, err := os.MkdirTemp(o.TempDir, "windower-")
	if err != nil {
		return nil, fmt.Errorf("windower: spill directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	st := &Stats{InputRows: rows, Groups: len(p.groups), SortedInput: true}
	o.Logger.Info("window query spills", "rows", rows, "grant", o.Budget.Limit(),
		"bytes_per_row", p.memoryPerRow(), "groups", len(p.groups), "dir", tmp)
	// sp is the plan the stages are made from: p, or p selecting also the
	// ORDER BY expressions the select list lacks, for the window stages
	// to carry (the result reads only p's columns).
	sp := p
	if aug := withOrderColumns(p); aug != nil && len(p.groups) > 0 {
		if sp, err = compile(aug, p.schema.schema); err != nil {
			return nil, fmt.Errorf("windower: plan carrying ORDER BY columns: %w", err)
		}
		sp.strBytes = p.strBytes
	}
	var stages []*messages.WindowQuery
	if len(p.groups) > 0 {
		if stages, err = stageQueries(sp); err != nil {
			return nil, err
		}
	}
	if len(p.orderBy) > 0 {
		sortStage, err := orderByStage(sp, len(stages) > 0)
		if err != nil {
			return nil, err
		}
		if len(stages) > 0 {
			stages[len(stages)-1].Limit = 0 // LIMIT applies after the sort
		}
		stages = append(stages, sortStage)
	}
	st.Groups = len(stages)
	inputs := cs
	var out string
	for k, q := range stages {
		sp, err := compile(q, inputs[0].Schema())
		if err != nil {
			return nil, fmt.Errorf("windower: plan of stage %d: %w", k+1, err)
		}
		sp.measureStrings(inputs)
		so := o
		so.InputSorted = len(inputs) == 1 && len(sp.groups) == 1 && sortedFor(inputs[0].SortKey(), sp.groups[0])
		dir := filepath.Join(tmp, fmt.Sprintf("stage-%d", k+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("windower: spill directory: %w", err)
		}
		parts := st.Partitions
		if out, err = runStage(ctx, sp, inputs, so, dir, st); err != nil {
			return nil, err
		}
		if len(p.orderBy) > 0 && k == len(stages)-1 {
			st.Partitions = parts // the sort stage's row_number is not a query partition
		}
		if k > 0 {
			os.RemoveAll(filepath.Join(tmp, fmt.Sprintf("stage-%d", k))) // consumed
		}
		c, err := columnar.Open(out, columnar.OpenOptions{Allocator: o.Budget, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("windower: open stage %d result: %w", k+1, err)
		}
		inputs = []*columnar.Container{c}
	}
	all := make([]int, len(p.outputs))
	for i := range all {
		all[i] = i
	}
	br, err := inputs[0].OpenColumns(all)
	if err != nil {
		return nil, fmt.Errorf("windower: read result: %w", err)
	}
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	return &Result{schema: p.outSchema, reader: br, stats: *st, release: func() { os.RemoveAll(tmp) }}, nil
}

// carriedName names window result i while later stages carry it.
func carriedName(item int) string { return fmt.Sprintf("__w%d", item) }

// stageQueries splits a query of several window groups into one query per
// group. Stage k selects the input columns the query uses, the results of
// earlier stages, and its group's calls; the last stage selects the
// query's own select list. WHERE runs in the first stage only.
func stageQueries(p *plan) ([]*messages.WindowQuery, error) {
	q := p.source
	if len(p.groups) == 1 {
		cp := *q
		cp.OrderBy = nil // a later stage sorts
		return []*messages.WindowQuery{&cp}, nil
	}
	groupOf := map[int]int{} // select item -> its group
	for gi, g := range p.groups {
		for _, c := range g.calls {
			groupOf[c.item] = gi
		}
	}
	var carry []messages.SelectItem // input columns every stage passes on
	for c, used := range p.usedCols {
		if !used {
			continue
		}
		name := p.schema.schema.Field(c).Name
		if strings.HasPrefix(name, "__w") {
			return nil, fmt.Errorf("%w: column %q: names starting with __w are reserved when a query spills", ErrUnsupported, name)
		}
		carry = append(carry, messages.SelectItem{Alias: name, Expr: &messages.Expr{Column: name}})
	}
	stages := make([]*messages.WindowQuery, len(p.groups))
	for gi := range p.groups {
		sq := &messages.WindowQuery{Table: q.Table}
		if gi == 0 {
			sq.Where = q.Where
		}
		if gi == len(p.groups)-1 {
			sq.Limit = q.Limit
			for i, it := range q.Select {
				switch {
				case it.Window == nil || groupOf[i] == gi:
					sq.Select = append(sq.Select, it)
				default:
					sq.Select = append(sq.Select, messages.SelectItem{Alias: it.Alias, Expr: &messages.Expr{Column: carriedName(i)}})
				}
			}
			stages[gi] = sq
			continue
		}
		sq.Select = append(sq.Select, carry...)
		for i, it := range q.Select {
			if it.Window == nil || groupOf[i] > gi {
				continue
			}
			if groupOf[i] == gi {
				sq.Select = append(sq.Select, messages.SelectItem{Alias: carriedName(i), Window: it.Window})
			} else {
				sq.Select = append(sq.Select, messages.SelectItem{Alias: carriedName(i), Expr: &messages.Expr{Column: carriedName(i)}})
			}
		}
		stages[gi] = sq
	}
	return stages, nil
}

// withOrderColumns returns p's query with every ORDER BY item that is not
// a select item appended to the select list as __o<i> and the ORDER BY
// naming it, or nil if every item is a select item.
func withOrderColumns(p *plan) *messages.WindowQuery {
	q := p.source
	var out *messages.WindowQuery
	for i, o := range p.orderByOut {
		if o >= 0 {
			continue
		}
		if out == nil {
			cp := *q
			cp.Select = append([]messages.SelectItem(nil), q.Select...)
			cp.OrderBy = append([]messages.SortItem(nil), q.OrderBy...)
			out = &cp
		}
		alias := fmt.Sprintf("__o%d", i)
		e := q.OrderBy[i].Expr
		out.Select = append(out.Select, messages.SelectItem{Alias: alias, Expr: &e})
		out.OrderBy[i].Expr = messages.Expr{Column: alias}
	}
	return out
}

// orderByStage makes the stage that puts the result in the query's ORDER
// BY order: a window stage whose only call, row_number() OVER (ORDER BY
// the keys), is not part of the result (the result reads the first
// columns only). afterWindows tells whether it reads the result of window
// stages (columns named by the select aliases) or the input itself.
func orderByStage(p *plan, afterWindows bool) (*messages.WindowQuery, error) {
	q := p.source
	sq := &messages.WindowQuery{Table: q.Table, Limit: q.Limit}
	if afterWindows {
		for _, it := range q.Select {
			sq.Select = append(sq.Select, messages.SelectItem{Alias: it.Alias, Expr: &messages.Expr{Column: it.Alias}})
		}
	} else {
		sq.Select = append(sq.Select, q.Select...)
		sq.Where = q.Where
	}
	w := &messages.WindowCall{Func: "row_number"}
	for i, it := range q.OrderBy {
		key := messages.SortItem{Desc: it.Desc, NullsFirst: it.NullsFirst}
		switch out := p.orderByOut[i]; {
		case out >= 0 && afterWindows:
			key.Expr = messages.Expr{Column: q.Select[out].Alias}
		case out >= 0 && q.Select[out].Expr != nil:
			key.Expr = *q.Select[out].Expr
		case out < 0 && !afterWindows:
			key.Expr = it.Expr
		default:
			// withOrderColumns makes every ORDER BY item a select item first.
			return nil, fmt.Errorf("%w: ORDER BY item %d is not carried through the window stages", ErrInternal, i+1)
		}
		w.OrderBy = append(w.OrderBy, key)
	}
	sq.Select = append(sq.Select, messages.SelectItem{Alias: "__order", Window: w})
	return sq, nil
}

// runStage evaluates a one-group plan over inputs that do not fit the
// grant and returns the directory of its result container, under dir.
func runStage(ctx context.Context, p *plan, cs []*columnar.Container, o Options, dir string, st *Stats) (string, error) {
	st.Rows = 0 // the last stage's rows are the result's
	var (
		src     *columnar.Container
		splan   *plan
		filters []predicate // applied while streaming (sorted input only)
	)
	if o.InputSorted {
		src = cs[0]
		cp := *p
		cp.where = nil
		splan, filters = &cp, p.where
	} else {
		st.SortedInput = false
		sorted, q2, err := sortToContainer(ctx, p, cs, dir, o, st)
		if err != nil {
			return "", err
		}
		if src, err = columnar.Open(sorted, columnar.OpenOptions{Allocator: o.Budget, Logger: o.Logger}); err != nil {
			return "", fmt.Errorf("windower: open sorted input: %w", err)
		}
		if splan, err = compile(q2, src.Schema()); err != nil {
			return "", fmt.Errorf("windower: plan over sorted runs: %w", err)
		}
		splan.measureStrings([]*columnar.Container{src})
	}
	return streamSorted(ctx, splan, src, filters, dir, o, st)
}

// sortToContainer writes sorted runs of the input and merges them into one
// container. It returns that container's directory and the query rewritten
// to read it (keys as columns, WHERE already applied).
func sortToContainer(ctx context.Context, p *plan, cs []*columnar.Container, tmp string, o Options, st *Stats) (string, *messages.WindowQuery, error) {
	g := p.groups[0]
	schema := p.schema.schema
	// Columns of a run: the used input columns, then the computed keys.
	var used []int
	var fields []arrow.Field
	for c, u := range p.usedCols {
		if u {
			used = append(used, c)
			fields = append(fields, schema.Field(c))
		}
	}
	keys := append(append([]sortKey(nil), g.partition...), g.order...)
	keyNames := make([]string, len(keys))
	var computed []int // indexes into keys of keys that need a column
	for i, k := range keys {
		if k.expr.col >= 0 {
			keyNames[i] = k.expr.colName
			continue
		}
		keyNames[i] = fmt.Sprintf("__key%d", i)
		computed = append(computed, i)
		fields = append(fields, arrow.Field{Name: keyNames[i], Type: k.expr.typ, Nullable: true})
	}
	runSchema := arrow.NewSchema(fields, nil)
	var runKey columnar.SortKey
	inKey := map[string]bool{}
	for i, k := range keys {
		if inKey[keyNames[i]] {
			continue // a repeated key orders nothing its first use did not
		}
		inKey[keyNames[i]] = true
		runKey = append(runKey, columnar.SortColumn{Name: keyNames[i], Desc: k.desc, NullsFirst: k.nullsFirst})
	}
	// Rows per run: what the grant holds with room for sorting and writing.
	perRow := p.memoryPerRow() + int64(len(computed))*9 + int64(len(used))*18
	// Sorting and writing a run takes about half the grant; the chunk
	// buffer (a run plus one input block) and the reader the rest.
	// The reader holds a block of every used column besides.
	block := maxBlockBytes(cs, used)
	runRows := int((o.Budget.Limit() - o.Budget.InUse() - block) / 2 / perRow)
	if runRows < 1024 {
		return "", nil, fmt.Errorf("%w: a %d-byte grant holds only %d rows per sorted run (%d bytes a row, input blocks of up to %d bytes)",
			ErrGrantTooSmall, o.Budget.Limit(), max(runRows, 0), perRow, block)
	}
	var runs []string
	var s sorter
	writeRun := func(in *input) error {
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
		sk := make([]sortedKey, len(keys))
		kv := make([]*vector, len(keys))
		for i, k := range keys {
			v, err := k.expr.eval(in.cols, n)
			if err != nil {
				return fmt.Errorf("windower: sort key: %w", err)
			}
			kv[i] = v
			sk[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
		}
		perm := s.sortPerm(sk, n, nil)
		dir := filepath.Join(tmp, fmt.Sprintf("run-%06d", len(runs)))
		w, err := columnar.Create(dir, columnar.WriterOptions{Table: "windower", Projection: "run", ID: filepath.Base(dir),
			Schema: runSchema, SortKey: runKey, Allocator: o.Budget, Compression: columnar.CompressionLZ4, BlockRows: spillBlockRows(p.rowBytes()+9*int64(len(computed)), o.Budget.Limit())})
		if err != nil {
			return fmt.Errorf("windower: spill run: %w", err)
		}
		cols := make([]*vector, 0, len(fields))
		for _, c := range used {
			cols = append(cols, in.cols[c])
		}
		for _, i := range computed {
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
		st.SpilledBytes += m.CompressedBytes()
		runs = append(runs, dir)
		return nil
	}
	if err := readChunks(ctx, p, cs, used, runRows, o.Budget, writeRun); err != nil {
		return "", nil, err
	}
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	merged := filepath.Join(tmp, "sorted")
	switch len(runs) {
	case 0:
		w, err := columnar.Create(merged, columnar.WriterOptions{Table: "windower", Projection: "run", ID: "sorted", Schema: runSchema, SortKey: runKey})
		if err != nil {
			return "", nil, err
		}
		if _, err := w.Commit(); err != nil {
			return "", nil, err
		}
	case 1:
		merged = runs[0]
	default:
		o.Logger.Debug("merging sorted runs", "runs", len(runs))
		ms, err := merger.Merge(ctx, runs, merged, merger.Options{
			Grant: o.Budget.Limit() - o.Budget.InUse(), TempDir: tmp, Logger: o.Logger, Parallelism: 1,
		})
		if err != nil {
			return "", nil, fmt.Errorf("windower: merge %d sorted runs: %w", len(runs), err)
		}
		st.PeakBytes = max(st.PeakBytes, ms.PeakBytes)
		st.SpilledBytes += ms.BytesOut + ms.SpilledBytes
		for _, r := range runs {
			os.RemoveAll(r)
		}
	}
	// The query over the sorted container: keys by column name, no WHERE.
	q2 := rewriteForRuns(p, keyNames)
	return merged, q2, nil
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

// reserveBuffer reserves and makes a buffer of capacity rows.
func reserveBuffer(p *plan, capacity int, budget *columnar.Budget) (*input, int64, error) {
	var perRow int64
	for c, u := range p.usedCols {
		if u {
			perRow += p.colBytes(c)
		}
	}
	n := perRow * int64(capacity)
	if err := budget.Reserve(n); err != nil {
		return nil, 0, fmt.Errorf("windower: buffer of %d rows: %w", capacity, err)
	}
	return newBuffer(p, capacity), n, nil
}

// newBuffer makes an input buffer for the plan's used columns with room
// for capacity rows.
func newBuffer(p *plan, capacity int) *input {
	in := &input{cols: make([]*vector, len(p.usedCols))}
	for c, u := range p.usedCols {
		if !u {
			continue
		}
		v := &vector{kind: p.schema.kinds[c], typ: p.schema.schema.Field(c).Type}
		switch v.kind {
		case kindFloat:
			v.floats = make([]float64, 0, capacity)
		case kindString:
			v.strs = make([]string, 0, capacity)
		default:
			v.ints = make([]int64, 0, capacity)
		}
		in.cols[c] = v
	}
	return in
}

// appendRecord appends a batch whose columns are the used columns, in order.
func (in *input) appendRecord(rec arrow.RecordBatch, used []int) error {
	for j, c := range used {
		if err := in.cols[c].appendArrow(rec.Column(j)); err != nil {
			return err
		}
	}
	in.n += int(rec.NumRows())
	return nil
}

// reset empties the buffer, keeping its storage.
func (in *input) reset() { in.shift(in.n) }

// shift drops the first k rows, moving the rest to the front.
func (in *input) shift(k int) {
	for _, v := range in.cols {
		if v == nil {
			continue
		}
		switch v.kind {
		case kindFloat:
			v.floats = v.floats[:copy(v.floats, v.floats[k:])]
		case kindString:
			m := copy(v.strs, v.strs[k:])
			clear(v.strs[m:])
			v.strs = v.strs[:m]
		default:
			v.ints = v.ints[:copy(v.ints, v.ints[k:])]
		}
		if v.nulls != nil {
			v.nulls = v.nulls[:copy(v.nulls, v.nulls[k:])]
		}
	}
	in.n -= k
}

// compact keeps the rows where keep is true.
func (in *input) compact(keep []bool) {
	j := 0
	for i, k := range keep {
		if !k {
			continue
		}
		for _, v := range in.cols {
			if v == nil {
				continue
			}
			switch v.kind {
			case kindFloat:
				v.floats[j] = v.floats[i]
			case kindString:
				v.strs[j] = v.strs[i]
			default:
				v.ints[j] = v.ints[i]
			}
			if v.nulls != nil {
				v.nulls[j] = v.nulls[i]
			}
		}
		j++
	}
	for _, v := range in.cols {
		if v == nil {
			continue
		}
		switch v.kind {
		case kindFloat:
			v.floats = v.floats[:j]
		case kindString:
			v.strs = v.strs[:j]
		default:
			v.ints = v.ints[:j]
		}
		if v.nulls != nil {
			v.nulls = v.nulls[:j]
		}
	}
	in.n = j
}

// compactTail keeps, of the rows from start on, those where keep is true.
func (in *input) compactTail(start int, keep []bool) {
	tail := in.view(start, in.n)
	tail.compact(keep)
	for c, v := range in.cols {
		if v == nil {
			continue
		}
		m := start + tail.n
		switch v.kind {
		case kindFloat:
			v.floats = v.floats[:m]
		case kindString:
			v.strs = v.strs[:m]
		default:
			v.ints = v.ints[:m]
		}
		if v.nulls != nil {
			v.nulls = v.nulls[:m]
		}
		_ = c
	}
	in.n = start + tail.n
}

// view returns rows [from, to) of the buffer without copying.
func (in *input) view(from, to int) *input {
	out := &input{cols: make([]*vector, len(in.cols)), n: to - from}
	for c, v := range in.cols {
		if v == nil {
			continue
		}
		w := &vector{kind: v.kind, typ: v.typ}
		switch v.kind {
		case kindFloat:
			w.floats = v.floats[from:to:to]
		case kindString:
			w.strs = v.strs[from:to:to]
		default:
			w.ints = v.ints[from:to:to]
		}
		if v.nulls != nil {
			w.nulls = v.nulls[from:to:to]
		}
		out.cols[c] = w
	}
	return out
}

// runBlockRows is the largest block size of the containers the windower
// spills (sorted runs, stage results): small blocks keep the merge's
// memory (a block per input and column) low.
const runBlockRows = 8192

// spillBlockRows is the block size of a spilled container whose rows are
// about rowBytes each, under grant: runBlockRows, fewer for wide rows
// (long strings), so that a block of every column takes at most 1/64 of
// the grant and the merge of the runs holds a block per run and column
// within it. Never below 64 rows.
func spillBlockRows(rowBytes, grant int64) int {
	rows := grant / 64 / max(1, rowBytes)
	return int(min(max(rows, 64), runBlockRows))
}

// rowBytes estimates the bytes of one row of the query's input columns
// and outputs, for sizing spilled blocks.
func (p *plan) rowBytes() int64 {
	n := 9 * int64(len(p.outputs))
	for c, u := range p.usedCols {
		if u {
			n += p.colBytes(c)
		}
	}
	return n
}
