package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// MinGrant is the smallest memory grant a query runs with.
const MinGrant = 8 << 20

// Options configure a run. The zero value is usable.
type Options struct {
	// Grant is the memory the run may hold, in bytes (default 64 MiB).
	// It must be at least MinGrant.
	Grant int64
	// Budget, if set, is the budget memory is counted against instead of a
	// new one of Grant bytes (Grant is then Budget.Limit()).
	Budget *columnar.Budget
	// BatchRows is the number of rows per result batch (default 65536).
	BatchRows int
	// TempDir is where sorted runs and large partitions are spilled
	// (default os.TempDir()).
	TempDir string
	// InputSorted declares that the input is already ordered on the
	// (partition, order) keys of the query's only window group, so it
	// streams without a sort. Run sets it from the containers' sort key.
	InputSorted bool
	Logger      *slog.Logger
}

func (o *Options) withDefaults() (Options, error) {
	out := *o
	if out.Budget != nil {
		out.Grant = out.Budget.Limit()
	}
	if out.Grant == 0 {
		out.Grant = 64 << 20
	}
	if out.Grant < MinGrant {
		return out, fmt.Errorf("%w: %d bytes, the minimum is %d", ErrGrantTooSmall, out.Grant, MinGrant)
	}
	if out.Budget == nil {
		out.Budget = columnar.NewBudget(out.Grant, nil)
	}
	if out.BatchRows <= 0 {
		out.BatchRows = 65536
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

// Stats describe a finished run.
type Stats struct {
	Rows         int64 // result rows
	InputRows    int64 // rows read
	Partitions   int64 // partitions over all window groups
	Groups       int   // window groups (distinct PARTITION BY + ORDER BY)
	SortedInput  bool  // the input streamed without a sort
	PeakBytes    int64 // peak of the budget
	SpilledBytes int64 // bytes written to spill files
}

// Result is the output of a run: record batches in result order.
type Result struct {
	schema  *arrow.Schema
	cols    []arrow.Array // in-memory result
	rows    int
	next    int
	batch   int
	stats   Stats
	reader  *columnar.BatchReader // result spilled to a container
	release func()
	// heldBytes of budget count the in-memory result's Go-allocated
	// columns until Close.
	budget    *columnar.Budget
	heldBytes int64
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

// RunRecords evaluates q over in-memory input batches (all of schema),
// in memory: it copies the columns the query uses and fails with an error
// wrapping columnar.ErrBudgetExceeded if they and the evaluation's
// buffers do not fit the grant (Run spills instead). The result's columns
// are memory owned by the Result, counted against the budget until Close.
func RunRecords(ctx context.Context, q *messages.WindowQuery, schema *arrow.Schema, recs []arrow.RecordBatch, opts Options) (*Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := compile(q, schema)
	if err != nil {
		return nil, err
	}
	in, err := loadRecords(p, recs, o.Budget)
	if err != nil {
		return nil, err
	}
	return evaluate(ctx, p, in, o)
}

// input is the query's input columns in evaluation form.
type input struct {
	cols     []*vector // by schema index; nil for unused columns
	n        int
	reserved int64
}

func loadRecords(p *plan, recs []arrow.RecordBatch, budget *columnar.Budget) (*input, error) {
	in := &input{cols: make([]*vector, len(p.usedCols))}
	for _, r := range recs {
		in.n += int(r.NumRows())
	}
	for c, used := range p.usedCols {
		if !used {
			continue
		}
		f := p.schema.schema.Field(c)
		k := p.schema.kinds[c]
		v := &vector{kind: k, typ: f.Type}
		switch k {
		case kindFloat:
			v.floats = make([]float64, 0, in.n)
		case kindString:
			v.strs = make([]string, 0, in.n)
		default:
			v.ints = make([]int64, 0, in.n)
		}
		for _, r := range recs {
			if !r.Schema().Field(c).Equal(f) && !arrow.TypeEqual(r.Schema().Field(c).Type, f.Type) {
				return nil, fmt.Errorf("windower: %w: input batch column %d is %s, schema says %s", columnar.ErrSchemaMismatch, c, r.Schema().Field(c).Type, f.Type)
			}
			if err := v.appendArrow(r.Column(c)); err != nil {
				return nil, fmt.Errorf("windower: column %q: %w", f.Name, err)
			}
		}
		in.cols[c] = v
	}
	return in, in.reserve(budget)
}

func (in *input) reserve(b *columnar.Budget) error {
	var n int64
	for _, v := range in.cols {
		if v != nil {
			n += v.bytes()
		}
	}
	if err := b.Reserve(n); err != nil {
		return fmt.Errorf("windower: load %d input rows: %w", in.n, err)
	}
	in.reserved = n
	return nil
}

// evaluate runs the compiled plan over in-memory input.
func evaluate(ctx context.Context, p *plan, in *input, o Options) (*Result, error) {
	budget := o.Budget
	var held int64
	reserve := func(n int64, what string) error {
		if err := budget.Reserve(n); err != nil {
			return fmt.Errorf("windower: %s: %w", what, err)
		}
		held += n
		return nil
	}
	defer func() { budget.Release(held) }()

	// WHERE.
	if len(p.where) > 0 {
		keep, err := evalPredicates(p.where, in.cols, in.n)
		if err != nil {
			return nil, fmt.Errorf("windower: where: %w", err)
		}
		// A gather, not compact: in may be a view of a buffer that
		// outlives this evaluation. idx is never nil (nil means all rows).
		idx := make([]int32, 0, in.n)
		for i, k := range keep {
			if k {
				idx = append(idx, int32(i))
			}
		}
		for c, v := range in.cols {
			if v != nil {
				in.cols[c] = v.gather(idx, &vector{})
			}
		}
		in.n = len(idx)
	}
	n := in.n
	stats := Stats{InputRows: int64(n), Groups: len(p.groups)}

	var s sorter
	results := make([]*vector, len(p.outputs)) // window outputs, in original row order unless final
	var lastPerm []int32
	var lastOuts map[int]*vector
	var lastSorted map[int]*vector
	pt := newPartitioner()
	var states []aggState
	for gi, g := range p.groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if unsortedGroup(g) && !(o.InputSorted && len(p.groups) == 1) {
			// Whole-partition aggregates without ORDER BY: no sort, the
			// results are in input order.
			outs, parts, err := evalUnsortedGroup(g, in, pt, &states, reserve)
			if err != nil {
				return nil, err
			}
			if outs != nil {
				stats.Partitions += int64(parts)
				if gi == len(p.groups)-1 && len(p.orderBy) == 0 {
					lastPerm, lastOuts, lastSorted = nil, outs, nil
					break
				}
				for item, v := range outs {
					results[item] = v
				}
				continue
			}
		}
		keys := make([]sortedKey, 0, len(g.partition)+len(g.order))
		var partVecs, orderVecs []*vector
		for _, k := range g.partition {
			v, err := k.expr.eval(in.cols, n)
			if err != nil {
				return nil, fmt.Errorf("windower: partition by: %w", err)
			}
			keys = append(keys, sortedKey{v: v})
			partVecs = append(partVecs, v)
		}
		for _, k := range g.order {
			v, err := k.expr.eval(in.cols, n)
			if err != nil {
				return nil, fmt.Errorf("windower: order by: %w", err)
			}
			keys = append(keys, sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst})
			orderVecs = append(orderVecs, v)
		}
		if err := reserve(int64(n)*(4+8+8+2), "sort"); err != nil {
			return nil, err
		}
		var perm []int32
		if !(o.InputSorted && len(p.groups) == 1) {
			perm = s.sortPerm(keys, n, nil)
		} else {
			stats.SortedInput = true
		}
		// Key and argument columns in sorted order, each gathered once.
		sortedCols := map[int]*vector{}
		sortedOf := func(e *expr, v *vector) *vector {
			if perm == nil {
				return v
			}
			if e.col >= 0 {
				if sv, ok := sortedCols[e.col]; ok {
					return sv
				}
			}
			sv := v.gather(perm, &vector{})
			if e.col >= 0 {
				sortedCols[e.col] = sv
			}
			return sv
		}
		if perm != nil && s.sorted != nil && len(keys) > 0 && keys[0].v.kind != kindFloat {
			// The sort leaves the first key's values in order: decode
			// them instead of gathering.
			first := keys[0]
			flip := uint64(1) << 63
			if first.desc {
				flip = ^flip
			}
			// In place: the sorter gives up the buffer (one allocation
			// of n words less, which matters most to a fresh process).
			sorted := s.takeSorted()[:n]
			sv := &vector{kind: first.v.kind, typ: first.v.typ, ints: unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(sorted))), n)}
			for i, u := range sorted {
				sv.ints[i] = int64(u ^ flip)
			}
			var e *expr
			if len(g.partition) > 0 {
				e = g.partition[0].expr
			} else {
				e = g.order[0].expr
			}
			if e.col >= 0 {
				sortedCols[e.col] = sv
			}
			if len(g.partition) > 0 {
				partVecs[0] = sv
			} else {
				orderVecs[0] = sv
			}
			keys[0].v = nil // marks the first key as already sorted
		}
		sortedKeyVec := func(k int, e *expr, v *vector) *vector {
			if keys[k].v == nil {
				return v // decoded from the sort above
			}
			return sortedOf(e, v)
		}
		ge := &groupEval{n: n, hasOrder: len(g.order) > 0, starts: make([]int32, 0, n+1)}
		ge.partChange = make([]bool, n)
		for k, v := range partVecs {
			markChanges(sortedKeyVec(k, g.partition[k].expr, v), ge.partChange)
		}
		if n > 0 {
			ge.partChange[0] = true
		}
		var rangeKey *vector
		if ge.hasOrder {
			ge.peerChange = make([]bool, n)
			copy(ge.peerChange, ge.partChange)
			for k, v := range orderVecs {
				sv := sortedKeyVec(len(partVecs)+k, g.order[k].expr, v)
				markChanges(sv, ge.peerChange)
				if k == 0 {
					rangeKey = sv
				}
			}
		}
		outs := map[int]*vector{}
		for _, c := range g.calls {
			cs, err := newCallState(c, in, n, perm, rangeKey, g, sortedOf)
			if err != nil {
				return nil, err
			}
			if err := reserve(cs.out.bytes(), "window output"); err != nil {
				return nil, err
			}
			ge.calls = append(ge.calls, cs)
			outs[c.item] = cs.out
		}
		if err := ge.evalPartitions(); err != nil {
			return nil, err
		}
		stats.Partitions += ge.partitions
		if gi == len(p.groups)-1 && len(p.orderBy) == 0 {
			lastPerm, lastOuts, lastSorted = perm, outs, sortedCols
			break
		}
		// Put the outputs back in input row order.
		for item, v := range outs {
			results[item] = scatter(v, perm)
		}
	}

	// Final order.
	var final []int32
	switch {
	case len(p.orderBy) > 0:
		keys := make([]sortedKey, len(p.orderBy))
		for i, k := range p.orderBy {
			var v *vector
			if out := p.orderByOut[i]; out >= 0 {
				if p.outputs[out].expr != nil {
					var err error
					if v, err = p.outputs[out].expr.eval(in.cols, n); err != nil {
						return nil, err
					}
				} else {
					v = results[out]
				}
			} else {
				var err error
				if v, err = k.expr.eval(in.cols, n); err != nil {
					return nil, err
				}
			}
			keys[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
		}
		final = s.sortPerm(keys, n, nil)
	case lastOuts != nil:
		final = lastPerm
		for item, v := range lastOuts {
			results[item] = v
		}
	}
	rows := n
	if p.limit > 0 && int64(rows) > p.limit {
		rows = int(p.limit)
	}
	mem := memory.Allocator(budget)
	cols := make([]arrow.Array, len(p.outputs))
	for i, o := range p.outputs {
		var v *vector
		if o.expr != nil {
			ev, err := o.expr.eval(in.cols, n)
			if err != nil {
				return nil, err
			}
			v = ev
			if sv, ok := lastSorted[o.expr.col]; ok && o.expr.col >= 0 && final != nil && lastOuts != nil {
				v = sv // already in the final order
			} else if final != nil {
				v = v.gather(final, &vector{})
			}
		} else {
			v = results[i]
			if !(lastOuts != nil && lastOuts[i] != nil) && final != nil {
				v = v.gather(final, &vector{})
			}
		}
		v = truncate(v, rows)
		cols[i] = v.toArrow(mem)
	}
	budget.Release(in.reserved)
	in.reserved = 0
	// The result's fixed-width columns are Go memory the Result holds
	// until Close (string and other built columns came from the budget):
	// count them in place of the evaluation's buffers, which they replace.
	budget.Release(held)
	held = 0
	resultBytes := goMemoryBytes(cols)
	if err := budget.Reserve(resultBytes); err != nil {
		for _, c := range cols {
			c.Release()
		}
		return nil, fmt.Errorf("windower: hold the %d-row result: %w", rows, err)
	}
	stats.Rows = int64(rows)
	stats.PeakBytes = budget.Peak()
	return &Result{schema: p.outSchema, cols: cols, rows: rows, batch: o.BatchRows, stats: stats,
		budget: budget, heldBytes: resultBytes}, nil
}

// goMemoryBytes is the size of the columns' buffers that toArrow wraps
// from Go memory instead of allocating from the budget.
func goMemoryBytes(cols []arrow.Array) int64 {
	var n int64
	for _, c := range cols {
		switch c.DataType().ID() {
		case arrow.INT64, arrow.TIMESTAMP, arrow.FLOAT64:
			for _, b := range c.Data().Buffers() {
				if b != nil {
					n += int64(b.Len())
				}
			}
		}
	}
	return n
}

func truncate(v *vector, rows int) *vector {
	if v.len() == rows {
		return v
	}
	out := *v
	switch v.kind {
	case kindFloat:
		out.floats = v.floats[:rows]
	case kindString:
		out.strs = v.strs[:rows]
	default:
		out.ints = v.ints[:rows]
	}
	if v.nulls != nil {
		out.nulls = v.nulls[:rows]
	}
	return &out
}

// scatter returns v (in perm order) in input row order.
func scatter(v *vector, perm []int32) *vector {
	if perm == nil {
		return v
	}
	out := &vector{kind: v.kind, typ: v.typ}
	n := len(perm)
	switch v.kind {
	case kindFloat:
		out.floats = make([]float64, n)
		for i, p := range perm {
			out.floats[p] = v.floats[i]
		}
	case kindString:
		out.strs = make([]string, n)
		for i, p := range perm {
			out.strs[p] = v.strs[i]
		}
	default:
		out.ints = make([]int64, n)
		for i, p := range perm {
			out.ints[p] = v.ints[i]
		}
	}
	if v.nulls != nil {
		out.nulls = make([]bool, n)
		for i, p := range perm {
			out.nulls[p] = v.nulls[i]
		}
	}
	return out
}

func newCallState(c *call, in *input, n int, perm []int32, orderKey *vector, g *windowGroup, sortedOf func(*expr, *vector) *vector) (*callState, error) {
	cs := &callState{c: c}
	out := &vector{kind: c.outKind, typ: c.outTyp}
	switch c.outKind {
	case kindFloat:
		out.floats = make([]float64, n)
	case kindString:
		out.strs = make([]string, n)
	default:
		out.ints = make([]int64, n)
	}
	if !c.neverNull() {
		out.nulls = make([]bool, n)
	}
	cs.out = out
	if len(c.args) > 0 {
		v, err := c.args[0].eval(in.cols, n)
		if err != nil {
			return nil, fmt.Errorf("windower: select item %q: %w", c.alias, err)
		}
		cs.arg = sortedOf(c.args[0], v)
	}
	cs.fr.f = &c.frame
	if orderKey != nil && len(g.order) > 0 {
		cs.fr.key = rangeKey{v: orderKey, desc: g.order[0].desc, nullsFirst: g.order[0].nullsFirst}
	}
	if c.fn.isAggregate() {
		a := &cs.agg
		a.fn = c.fn
		if c.star || c.fn == fnCount {
			a.kind = kindInt
		}
		if cs.arg != nil {
			a.kind = cs.arg.kind
			a.ints, a.floats, a.strs = cs.arg.ints, cs.arg.floats, cs.arg.strs
		}
		var incl []bool
		if len(c.filter) > 0 {
			keep, err := evalPredicates(c.filter, in.cols, n)
			if err != nil {
				return nil, fmt.Errorf("windower: %s: filter: %w", c.alias, err)
			}
			if perm != nil {
				sorted := make([]bool, n)
				for i, p := range perm {
					sorted[i] = keep[p]
				}
				keep = sorted
			}
			incl = keep
		}
		if cs.arg != nil && cs.arg.nulls != nil {
			if incl == nil {
				incl = make([]bool, n)
				for i := range incl {
					incl[i] = true
				}
			}
			for i, null := range cs.arg.nulls {
				if null {
					incl[i] = false
				}
			}
		}
		a.incl = incl
	}
	return cs, nil
}
