package windower

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// Stages: the external path runs a query whose input does not fit the
// grant, one stage per window group:
//
//  1. Unless the input is already in (partition, order) order, it is read
//     in chunks that fit the grant; each chunk is filtered, sorted and
//     written as a sorted run (a container in the temp directory, with
//     computed keys such as a % 1000 materialized as columns __key0, ...).
//     The runs are merged into one sorted container with merger.Merge
//     (concatenated, for a group without PARTITION BY or ORDER BY).
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
// The first stage reads cs without the rows drop names; later stages read
// what it wrote.
func runExternal(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, rows int64, o Options) (res *Result, err error) {
	tmp, err := os.MkdirTemp(o.TempDir, "windower-")
	if err != nil {
		return nil, fmt.Errorf("windower: spill directory: %w", err)
	}
	rm := &remover{}
	o.removals = rm
	removeAll := func() {
		rm.wait()
		os.RemoveAll(tmp)
	}
	defer func() {
		if err != nil {
			removeAll()
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
	// The query's ORDER BY is a stage of its own, and so is a query with
	// neither window functions nor ORDER BY: its rows pass through one
	// stage that numbers them (in no order) and streams them.
	sortStage := len(p.orderBy) > 0 || len(p.groups) == 0
	if sortStage {
		last, err := orderByStage(sp, len(stages) > 0)
		if err != nil {
			return nil, err
		}
		if len(stages) > 0 {
			stages[len(stages)-1].Limit = 0 // LIMIT applies after the sort
		}
		stages = append(stages, last)
	}
	st.Groups = len(stages)
	inputs := cs
	for k, q := range stages {
		sp, err := compile(q, inputs[0].Schema())
		if err != nil {
			return nil, fmt.Errorf("windower: plan of stage %d: %w", k+1, err)
		}
		sp.measureStrings(inputs)
		so := o
		if k > 0 {
			so.inputRead = nil // the first stage read the input
		}
		so.InputSorted = len(inputs) == 1 && len(sp.groups) == 1 && sortedFor(inputs[0].SortKey(), sp.groups[0])
		dir := filepath.Join(tmp, fmt.Sprintf("stage-%d", k+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("windower: spill directory: %w", err)
		}
		parts := st.Partitions
		last := k == len(stages)-1
		outs, stream, err := runStage(ctx, sp, inputs, drop, so, dir, st, last)
		if err != nil {
			return nil, err
		}
		if stream != nil {
			// The last stage's buckets: Result reads them as they are
			// evaluated, and completes the figures.
			st.Rows = 0
			res := &Result{schema: p.outSchema, release: removeAll}
			res.stats = *st
			res.reader = stream.stream(ctx, &res.stats, p.limit)
			return res, nil
		}
		drop = nil
		if sortStage && k == len(stages)-1 {
			st.Partitions = parts // the sort stage's row_number is not a query partition
		}
		if k > 0 {
			rm.remove(filepath.Join(tmp, fmt.Sprintf("stage-%d", k))) // consumed
		}
		inputs = inputs[:0:0]
		for _, out := range outs {
			c, err := columnar.Open(out, columnar.OpenOptions{Allocator: o.Budget, Logger: o.Logger})
			if err != nil {
				return nil, fmt.Errorf("windower: open stage %d result: %w", k+1, err)
			}
			inputs = append(inputs, c)
		}
		if len(inputs) == 0 {
			break // no rows: the result is empty
		}
	}
	all := make([]int, len(p.outputs))
	for i := range all {
		all[i] = i
	}
	if p.limit > 0 {
		st.Rows = min(st.Rows, p.limit) // range buckets leave LIMIT to the result
	}
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	return &Result{schema: p.outSchema, reader: &containersReader{cs: inputs, cols: all, limit: p.limit}, stats: *st,
		release: removeAll}, nil
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
// grant, without their rows drop names, and returns the directories of
// its result containers, under dir, in result order: one, or one per
// range bucket (buckets.go), none when no row passed. The query's last
// stage (last), when dealt to range buckets, returns them unevaluated
// instead, for the result to stream (bucketstream.go).
func runStage(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, o Options, dir string, st *Stats, last bool) ([]string, *buckets, error) {
	st.Rows = 0 // the last stage's rows are the result's
	if o.InputSorted {
		cp := *p
		cp.where = nil
		out, err := streamSorted(ctx, &cp, cs[0], rowFilter{where: p.where, dropped: drop.of(0)}, dir, o, st)
		return []string{out}, nil, err
	}
	st.SortedInput = false
	r := newSortedRuns(p, dir, o, st)
	write := r.write
	var bk *buckets
	if len(p.groups[0].partition) > 0 && o.bucketDepth < maxBucketDepth {
		// Chunks of as many rows as one thread's runs hold, whatever the
		// threads, so that the ranges (from the first chunk) are too.
		r.singleThread()
		bk = newBuckets(p, r, cs, dir, o, st)
		write = bk.write
	}
	runRows, err := r.runRows(cs)
	if err != nil {
		return nil, nil, err
	}
	if bk != nil {
		bk.chunkRows = runRows
	}
	var overlap func() bool // chunks dealt to buckets overlap their reading
	if bk != nil {
		overlap = func() bool { return bk.active }
	}
	err = readChunks(ctx, p, cs, drop, r.used, runRows, o.Budget, o.Threads, write, overlap)
	if werr := r.wait(); err == nil {
		err = werr
	}
	if bk != nil {
		if ferr := bk.finish(err); err == nil {
			err = ferr
		}
	}
	if o.inputRead != nil {
		o.inputRead()
	}
	if err != nil {
		return nil, nil, err
	}
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	if bk != nil && bk.active {
		if last {
			return nil, bk, nil
		}
		outs, err := bk.evaluate(ctx)
		return outs, nil, err
	}
	sorted, err := r.merge(ctx)
	if err != nil {
		return nil, nil, err
	}
	src, err := columnar.Open(sorted, columnar.OpenOptions{Allocator: o.Budget, Logger: o.Logger})
	if err != nil {
		return nil, nil, fmt.Errorf("windower: open sorted input: %w", err)
	}
	// The query over the sorted container: keys by column name, no WHERE.
	splan, err := compile(rewriteForRuns(p, r.keyNames), src.Schema())
	if err != nil {
		return nil, nil, fmt.Errorf("windower: plan over sorted runs: %w", err)
	}
	splan.measureStrings([]*columnar.Container{src})
	out, err := streamSorted(ctx, splan, src, rowFilter{}, dir, o, st)
	return []string{out}, nil, err
}
