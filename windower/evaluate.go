package windower

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/hugepage"
)

// In-memory evaluation of a compiled plan, in phases: WHERE, each window
// group (sorted, or numbered by partition without a sort), the final
// order, and the result's columns.

// evaluate runs the compiled plan over in-memory input.
func evaluate(ctx context.Context, p *plan, in *input, o Options) (_ *Result, err error) {
	ev := &evaluation{p: p, in: in, o: o, budget: o.Budget, results: make([]*vector, len(p.outputs)), pt: newPartitioner()}
	defer func() {
		ev.budget.Release(ev.held)
		if err != nil {
			// The input's reservation and lease are the Result's on
			// success; a failed evaluation (a cancel, a grant too small)
			// gives them back.
			ev.budget.Release(in.reserved)
			in.reserved = 0
			in.lease.End()
		}
	}()
	if err := ev.where(); err != nil {
		return nil, err
	}
	ev.stats = Stats{InputRows: int64(in.n), Groups: len(p.groups)}
	sortedInput := o.InputSorted && len(p.groups) == 1
	for gi, g := range p.groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		last := gi == len(p.groups)-1 && len(p.orderBy) == 0
		if unsortedGroup(g) && !sortedInput {
			done, err := ev.unsortedGroup(g, last)
			if err != nil {
				return nil, err
			}
			if done {
				continue
			}
		}
		if err := ev.sortedGroup(g, last, sortedInput); err != nil {
			return nil, err
		}
	}
	final, err := ev.finalOrder()
	if err != nil {
		return nil, err
	}
	cols, rows, err := ev.columns(final)
	if err != nil {
		return nil, err
	}
	return ev.result(cols, rows)
}

// evaluation is the state of evaluate.
type evaluation struct {
	p      *plan
	in     *input
	o      Options
	budget *columnar.Budget
	held   int64 // bytes reserved for the evaluation's buffers
	s      sorter
	stats  Stats
	// results are the window outputs, by output, in input row order
	// (except the last group's, see last).
	results []*vector
	// last is the query's last window group when there is no ORDER BY:
	// its outputs stay in its order (perm), which is the result's.
	last struct {
		perm   []int32
		outs   map[int]*vector
		sorted map[int]*vector // input columns in its order, by column
	}
	pt     *partitioner
	states []aggState
	// packed is what the packed sort of the group being evaluated left
	// (nil: another sort), to read its keys back in sorted order.
	packed *packedKeys
}

// reserve counts n bytes of what against the budget until evaluate returns.
func (ev *evaluation) reserve(n int64, what string) error {
	if err := ev.budget.Reserve(n); err != nil {
		return fmt.Errorf("windower: %s: %w", what, err)
	}
	ev.held += n
	return nil
}

// where keeps the rows that pass WHERE.
func (ev *evaluation) where() error {
	p, in := ev.p, ev.in
	if len(p.where) == 0 {
		return nil
	}
	keep, err := evalPredicates(p.where, in.cols, in.n)
	if err != nil {
		return fmt.Errorf("windower: where: %w", err)
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
	return nil
}

// unsortedGroup evaluates whole-partition aggregates without ORDER BY
// without a sort; the results are in input order. It reports false when
// the keys are better sorted.
func (ev *evaluation) unsortedGroup(g *windowGroup, last bool) (bool, error) {
	reserve := func(n int64, what string) error { return ev.reserve(n, what) }
	outs, parts, err := evalUnsortedGroup(g, ev.in, ev.pt, &ev.states, ev.threadsFor(ev.in.n), reserve)
	if err != nil || outs == nil {
		return false, err
	}
	ev.stats.Partitions += int64(parts)
	if last {
		ev.last.perm, ev.last.outs, ev.last.sorted = nil, outs, nil
		return true, nil
	}
	for item, v := range outs {
		ev.results[item] = v
	}
	return true, nil
}

// sortedGroup sorts the rows on g's keys (unless sortedInput: they are in
// that order) and evaluates its calls partition by partition.
func (ev *evaluation) sortedGroup(g *windowGroup, last, sortedInput bool) error {
	n := ev.in.n
	gk, err := ev.groupKeys(g)
	if err != nil {
		return err
	}
	if err := ev.reserve(int64(n)*(4+8+8+2), "sort"); err != nil {
		return err
	}
	var perm []int32
	ev.packed = nil
	threads := ev.threadsFor(n)
	done := false           // perm is sortKeys's
	var firstSorted *vector // the first key in sorted order, from the parallel sort
	var partStarts []int32  // the partitions' first rows, from the parallel or packed sort
	if sortedInput {
		ev.stats.SortedInput = true
	} else {
		ev.s.sorted = nil // no first key from the sorter
		perm, firstSorted, partStarts, done = ev.sortKeys(gk, n, threads)
	}
	if !sortedInput && !done {
		perm = ev.s.sortPerm(gk.keys, n, nil)
	}
	sc := &sortedColumns{perm: perm, cols: map[int]*vector{}, threads: threads}
	peers := len(g.order) > 0 && readsPeers(g)
	if pk := ev.packed; pk != nil && perm != nil && peers {
		// The ORDER BY columns (peers, RANGE frames) read out of the
		// packed sort's words instead of gathered.
		for j, o := range g.order {
			if e := o.expr; e.col >= 0 && sc.cols[e.col] == nil {
				sc.cols[e.col] = pk.decode(gk.keys, len(gk.part)+j, threads)
			}
		}
	}
	switch {
	case firstSorted != nil:
		useFirstKey(g, gk, sc, firstSorted)
	case perm != nil && ev.s.sorted != nil && len(gk.keys) > 0 && gk.keys[0].v.kind != kindFloat:
		ev.decodeFirstKey(g, gk, sc)
	}
	ge, rangeKey := newGroupEval(g, gk, sc, n, threads, partStarts, peers)
	ge.threads = threads
	outs := map[int]*vector{}
	made := make([]*vector, len(g.calls)) // the calls' outputs, made at once (makeConcurrently)
	makeConcurrently(len(g.calls), threads, func(i int) { made[i] = g.calls[i].newOutput(ev.in.lease, n) })
	for i, c := range g.calls {
		of, argRows := sc.of, []int32(nil)
		if perm != nil && ev.readsArgThroughPerm(g, c, sc) {
			of, argRows = func(_ *expr, v *vector) *vector { return v }, perm
		}
		cs, err := newCallState(c, ev.in, n, perm, rangeKey, g, of, made[i])
		if err != nil {
			return err
		}
		cs.argRows = argRows
		if err := ev.reserve(cs.out.bytes(), "window output"); err != nil {
			return err
		}
		if a := &cs.agg; (a.fn == fnMin || a.fn == fnMax) && a.kind == kindString && cs.arg != nil {
			if err := ev.reserve(int64(n)*8, "string prefixes"); err != nil {
				return err
			}
			a.prefixes = stringPrefixes(a.strs, threads)
		}
		ge.calls = append(ge.calls, cs)
		outs[c.item] = cs.out
	}
	if err := ge.evalPartitions(); err != nil {
		return err
	}
	ev.stats.Partitions += ge.partitions
	if last {
		ev.last.perm, ev.last.outs, ev.last.sorted = perm, outs, sc.cols
		return nil
	}
	// Put the outputs back in input row order.
	for item, v := range outs {
		ev.results[item] = scatter(ev.in.lease, v, perm, threads)
	}
	return nil
}

// readsArgThroughPerm reports whether call c of group g (sorted by perm)
// should read its argument in input order through perm rather than
// gathered into sorted order: a shift or value function (lag, lead,
// first_value, ...) reads it at one row per row it writes, or fewer, so
// a gather would read every row once and write them all to read them
// again. Not when the gathered column is or will be shared: already in
// sorted order, or also a key, another call's argument or a column of the
// result.
func (ev *evaluation) readsArgThroughPerm(g *windowGroup, c *call, sc *sortedColumns) bool {
	if len(c.args) == 0 {
		return false
	}
	if fam := functions[c.fn].family; fam != famShift && fam != famValue {
		return false
	}
	col := c.args[0].col
	if col < 0 {
		return true // an expression: computed for this call alone
	}
	if _, ok := sc.cols[col]; ok {
		return false
	}
	uses := 0
	for _, k := range g.partition {
		if k.expr.col == col {
			uses++
		}
	}
	for _, k := range g.order {
		if k.expr.col == col {
			uses++
		}
	}
	for _, other := range g.calls {
		if len(other.args) > 0 && other.args[0].col == col {
			uses++
		}
	}
	for _, o := range ev.p.outputs {
		if o.expr != nil && o.expr.col == col {
			uses++
		}
	}
	return uses == 1
}

// groupKeys are a group's PARTITION BY and ORDER BY values.
type groupKeys struct {
	keys           []sortedKey // partition keys, then order keys
	part, order    []*vector
	firstKeySorted bool // keys[0] is already in sorted order (decodeFirstKey)
}

func (ev *evaluation) groupKeys(g *windowGroup) (*groupKeys, error) {
	in, n := ev.in, ev.in.n
	gk := &groupKeys{keys: make([]sortedKey, 0, len(g.partition)+len(g.order))}
	threads := ev.threadsFor(n)
	for _, k := range g.partition {
		v, err := k.expr.evalOn(in.cols, n, threads)
		if err != nil {
			return nil, fmt.Errorf("windower: partition by: %w", err)
		}
		gk.keys = append(gk.keys, sortedKey{v: v})
		gk.part = append(gk.part, v)
	}
	for _, k := range g.order {
		v, err := k.expr.evalOn(in.cols, n, threads)
		if err != nil {
			return nil, fmt.Errorf("windower: order by: %w", err)
		}
		gk.keys = append(gk.keys, sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst})
		gk.order = append(gk.order, v)
	}
	return gk, nil
}

// sortedColumns are key and argument columns in a group's sorted order,
// each gathered once.
type sortedColumns struct {
	perm    []int32
	cols    map[int]*vector // by input column
	threads int             // goroutines a gather may use
}

// of returns v, the values of e, in sorted order.
func (sc *sortedColumns) of(e *expr, v *vector) *vector {
	if sc.perm == nil {
		return v
	}
	if e.col >= 0 {
		if sv, ok := sc.cols[e.col]; ok {
			return sv
		}
	}
	sv := gatherParallel(v, sc.perm, sc.threads)
	if e.col >= 0 {
		sc.cols[e.col] = sv
	}
	return sv
}

// key returns key k of gk, v, in sorted order.
func (sc *sortedColumns) key(gk *groupKeys, k int, e *expr, v *vector) *vector {
	if k == 0 && gk.firstKeySorted {
		return v // decoded from the sort
	}
	return sc.of(e, v)
}

// decodeFirstKey takes the first key's values in sorted order from the
// sort, which leaves them in order, instead of gathering them.
func (ev *evaluation) decodeFirstKey(g *windowGroup, gk *groupKeys, sc *sortedColumns) {
	n := ev.in.n
	first := gk.keys[0]
	flip := uint64(1) << 63
	if first.desc {
		flip = ^flip
	}
	// In place: the sorter gives up the buffer (one allocation of n
	// words less, which matters most to a fresh process).
	sorted := ev.s.takeSorted()[:n]
	sv := &vector{kind: first.v.kind, typ: first.v.typ, ints: unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(sorted))), n)}
	for i, u := range sorted {
		sv.ints[i] = int64(u ^ flip)
	}
	useFirstKey(g, gk, sc, sv)
}

// useFirstKey makes sv, the first key's values in sorted order, the
// group's first key.
func useFirstKey(g *windowGroup, gk *groupKeys, sc *sortedColumns, sv *vector) {
	var e *expr
	if len(g.partition) > 0 {
		e = g.partition[0].expr
	} else {
		e = g.order[0].expr
	}
	if e.col >= 0 {
		sc.cols[e.col] = sv
	}
	if len(g.partition) > 0 {
		gk.part[0] = sv
	} else {
		gk.order[0] = sv
	}
	gk.firstKeySorted = true
}

// newGroupEval marks the partition and, with peers, peer group starts of
// the sorted rows (the partitions' from partStarts, their first rows then
// n, when the sort found them); it returns the first ORDER BY key in
// sorted order (RANGE offsets measure it), or nil. Without peers (no call
// reads them, readsPeers) each partition is one peer group.
func newGroupEval(g *windowGroup, gk *groupKeys, sc *sortedColumns, n, threads int, partStarts []int32, peers bool) (*groupEval, *vector) {
	ge := &groupEval{n: n, hasOrder: peers}
	// The keys in sorted order first (gathers run on all the threads),
	// then the flags in ranges of rows.
	var part []*vector
	if partStarts == nil {
		part = make([]*vector, len(gk.part))
		for k, v := range gk.part {
			part[k] = sc.key(gk, k, g.partition[k].expr, v)
		}
	}
	var order []*vector
	var rangeKey *vector
	if ge.hasOrder {
		order = make([]*vector, len(gk.order))
		for k, v := range gk.order {
			order[k] = sc.key(gk, len(gk.part)+k, g.order[k].expr, v)
		}
		rangeKey = order[0]
		ge.peerChange = hugepage.Make[bool](n, n)
	}
	// Partition starts the sort found, or one partition without
	// PARTITION BY, need no flags; others are flagged where a key changes.
	switch {
	case partStarts != nil:
		ge.starts = partStarts
	case len(part) == 0: // rows [0, n), or no partition without rows
		ge.starts = []int32{0}
		if n > 0 {
			ge.starts = append(ge.starts, int32(n))
		}
	default:
		ge.partChange = hugepage.Make[bool](n, n)
	}
	if ge.hasOrder && ge.partChange == nil {
		for _, i := range ge.starts[:len(ge.starts)-1] {
			ge.peerChange[i] = true
		}
	}
	if threads < 1 || n < parallelMinRows {
		threads = 1
	}
	ranges := splitRows(n, threads)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		if ge.partChange != nil {
			for _, v := range part {
				markChanges(v, ge.partChange, lo, hi)
			}
			if lo == 0 {
				ge.partChange[0] = true
			}
		}
		if ge.hasOrder {
			if ge.partChange != nil {
				copy(ge.peerChange[lo:hi], ge.partChange[lo:hi])
			}
			for _, v := range order {
				markChanges(v, ge.peerChange, lo, hi)
			}
		}
	})
	return ge, rangeKey
}

// sortKeys sorts the rows by gk's keys on t threads the fastest way that
// applies, and returns what sortedGroup does of the sort: keys with
// PARTITION BY that pack into a word by the packed sort, on any number
// of threads (faster than sortPerm's passes over every row on one thread
// too), others on more than one thread by the parallel sorts. It reports
// false, having sorted nothing, when none applies or the grant does not
// hold its buffers: the caller sorts with the sorter (sortPerm).
func (ev *evaluation) sortKeys(gk *groupKeys, n, t int) (perm []int32, firstSorted *vector, partStarts []int32, done bool) {
	if len(gk.keys) == 0 {
		return nil, nil, nil, false
	}
	if len(gk.part) > 0 {
		if inOrder(gk.keys, n) {
			return nil, nil, nil, true
		}
		if perm, partStarts, ok := ev.sortPacked(gk, n, t); ok {
			return perm, nil, partStarts, true
		}
	}
	switch {
	case t <= 1:
		return nil, nil, nil, false
	case len(gk.part) > 0:
		return ev.parallelSortPerm(gk, n, t)
	case len(gk.keys) == 1 && oneWordKey(gk.keys[0].v):
		perm, firstSorted, done = ev.parallelSortKey(gk.keys[0], n, t)
		return perm, firstSorted, nil, done
	default:
		perm, done = ev.parallelSortRuns(gk.keys, n, t)
		return perm, nil, nil, done
	}
}

// readsPeers reports whether a call of g reads the group's peer groups:
// rank and its kin, and frames in RANGE or GROUPS mode or that EXCLUDE
// GROUP or TIES. Positional calls (row_number, ntile, lag, lead) and ROWS
// frames count rows alone, and a group of only those does not find its
// peer groups.
func readsPeers(g *windowGroup) bool {
	for _, c := range g.calls {
		switch functions[c.fn].family {
		case famNumber, famNtile, famShift:
			continue
		case famPeers:
			return true
		}
		if f := &c.frame; f.mode != modeRows || f.exclude == excludeGroup || f.exclude == excludeTies {
			return true
		}
	}
	return false
}

// finalOrder returns the result's row order: the query's ORDER BY, the
// last group's order, or nil for input order. In the last group's order
// its results move to ev.results.
func (ev *evaluation) finalOrder() ([]int32, error) {
	p, in, n := ev.p, ev.in, ev.in.n
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
					v = ev.results[out]
				}
			} else {
				var err error
				if v, err = k.expr.eval(in.cols, n); err != nil {
					return nil, err
				}
			}
			keys[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
		}
		return ev.s.sortPerm(keys, n, nil), nil
	case ev.last.outs != nil:
		for item, v := range ev.last.outs {
			ev.results[item] = v
		}
		return ev.last.perm, nil
	}
	return nil, nil
}

// columns returns the result's columns in the order final (nil: as they
// are), up to LIMIT, and their row count.
func (ev *evaluation) columns(final []int32) ([]arrow.Array, int, error) {
	p, in, n := ev.p, ev.in, ev.in.n
	rows := n
	if p.limit > 0 && int64(rows) > p.limit {
		rows = int(p.limit)
	}
	lastOuts, lastSorted := ev.last.outs, ev.last.sorted
	threads := ev.threadsFor(n)
	// Each output, and whether it is to be gathered into the order final.
	vs := make([]*vector, len(p.outputs))
	toGather := make([]bool, len(p.outputs))
	for i, o := range p.outputs {
		if o.expr != nil {
			e, err := o.expr.eval(in.cols, n)
			if err != nil {
				return nil, 0, err
			}
			vs[i] = e
			if sv, ok := lastSorted[o.expr.col]; ok && o.expr.col >= 0 && final != nil && lastOuts != nil {
				vs[i] = sv // already in the final order
				continue
			}
		} else {
			vs[i] = ev.results[i]
			if lastOuts != nil && lastOuts[i] != nil {
				continue
			}
		}
		toGather[i] = final != nil
	}
	// The gathers' outputs, made at once (makeConcurrently), then filled.
	gathered := make([]*vector, len(p.outputs))
	makeConcurrently(len(vs), threads, func(i int) {
		if v := vs[i]; toGather[i] {
			gathered[i] = leasedVector(ev.in.lease, v.kind, v.typ, len(final), v.nulls != nil)
		}
	})
	for i, out := range gathered {
		if out != nil {
			gatherInto(vs[i], final, out, threads)
			vs[i] = out
		}
	}
	// The Arrow columns, made at once too: a string column's buffers are
	// made, then filled over ranges of rows.
	mem := memory.Allocator(ev.budget)
	cols := make([]arrow.Array, len(p.outputs))
	makeConcurrently(len(vs), threads, func(i int) {
		cols[i] = truncate(vs[i], rows).toArrowParallel(mem, threads, ev.in.lease)
	})
	return cols, rows, nil
}

// result hands the columns to a Result. Their fixed-width columns are Go
// memory the Result holds until Close (string and other built columns
// came from the budget): they are counted in place of the evaluation's
// buffers and input, which they replace.
func (ev *evaluation) result(cols []arrow.Array, rows int) (*Result, error) {
	budget := ev.budget
	budget.Release(ev.in.reserved)
	ev.in.reserved = 0
	budget.Release(ev.held)
	ev.held = 0
	resultBytes := goMemoryBytes(cols)
	if err := budget.Reserve(resultBytes); err != nil {
		for _, c := range cols {
			c.Release()
		}
		return nil, fmt.Errorf("windower: hold the %d-row result: %w", rows, err)
	}
	ev.stats.Rows = int64(rows)
	ev.stats.PeakBytes = budget.Peak()
	return &Result{schema: ev.p.outSchema, cols: cols, rows: rows, batch: ev.o.BatchRows, stats: ev.stats,
		budget: budget, heldBytes: resultBytes, lease: ev.in.lease}, nil
}

// truncate returns a vector of v's first rows, leaving v as it is.
func truncate(v *vector, rows int) *vector {
	if v.len() == rows {
		return v
	}
	out := *v
	out.truncate(rows)
	return &out
}

// scatter returns v (in perm order) in input row order, on up to
// threads goroutines (perm is a permutation: their writes are disjoint),
// in values lent by l (nil: made fresh).
func scatter(l *bufpool.Lease, v *vector, perm []int32, threads int) *vector {
	if perm == nil {
		return v
	}
	n := len(perm)
	out := leasedVector(l, v.kind, v.typ, n, v.nulls != nil)
	if threads < 1 || n < parallelMinRows {
		threads = 1
	}
	ranges := splitRows(n, threads)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		switch v.kind {
		case kindFloat:
			for i, p := range perm[lo:hi] {
				out.floats[p] = v.floats[lo+i]
			}
		case kindString:
			for i, p := range perm[lo:hi] {
				out.strs[p] = v.strs[lo+i]
			}
		default:
			for i, p := range perm[lo:hi] {
				out.ints[p] = v.ints[lo+i]
			}
		}
		if v.nulls != nil {
			for i, p := range perm[lo:hi] {
				out.nulls[p] = v.nulls[lo+i]
			}
		}
	})
	return out
}
