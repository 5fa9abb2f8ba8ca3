package windower

import (
	"fmt"

	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/hugepage"
)

// Evaluation of a window group's calls over sorted rows in memory,
// partition by partition, with each function's evaluator.

// callState is one window call's inputs (in the group's sorted order), its
// output, and the state it keeps across partitions.
type callState struct {
	c   *call
	arg *vector // first argument, sorted (nil for argument-less functions)
	// argRows, when not nil, is the sorted order of the rows, and arg is
	// in input order: copyValue reads sorted row r at arg row argRows[r].
	argRows []int32
	agg     aggInput
	out     *vector
	fr      framer
	deq     deque
	tree    segTree
	state   aggState
	// carry is the state an aggregate over a frame from UNBOUNDED
	// PRECEDING starts from when it evaluates a piece of a partition
	// rather than all of it (parallel.go).
	carry rangeCarry
}

// groupEval evaluates the calls of one window group over rows that are
// already in (partition, order) order. All buffers are allocated once and
// reused for every partition.
type groupEval struct {
	n int
	// partChange flags the rows that start a partition, from which
	// evalPartitions finds starts; nil when starts are known already
	// (from the sort, or one partition).
	partChange []bool
	peerChange []bool // row i starts a new peer group (or partition); nil without hasOrder
	// hasOrder: the group has ORDER BY and a call reads its peer groups
	// (readsPeers: not positional calls and ROWS frames alone).
	hasOrder   bool
	part       partition
	calls      []*callState
	partitions int64
	starts     []int32 // first row of each partition, then n
	// threads is how many goroutines evaluate the partitions (0 or 1: the
	// caller's); see parallel.go.
	threads int
}

// evalPartitions finds the partitions and peer groups, then evaluates
// every call over every partition.
func (g *groupEval) evalPartitions() error {
	if g.partChange != nil {
		g.starts = flagStarts(g.partChange[:g.n], g.starts, nil, g.threads)
	}
	starts := g.starts
	g.partitions += int64(len(starts) - 1)
	p := &g.part
	p.hasOrder = g.hasOrder
	if g.hasOrder {
		p.groupOf, p.groupStart = loadGroups(g.peerChange[:g.n], p.groupOf, p.groupStart, g.threads)
	}
	if g.threads <= 1 {
		for _, cs := range g.calls {
			cs.evalAll(p, starts)
			if cs.agg.overflow {
				return overflowError(cs.c)
			}
		}
		return nil
	}
	// On several goroutines: the calls a range of a partition can be
	// evaluated by itself in ranges of rows (a partition may be cut), the
	// others in ranges of whole partitions.
	overflow := make([]bool, len(g.calls))
	var byRows, byPartitions []int
	for k, cs := range g.calls {
		if ok, _ := cs.splittable(g.hasOrder); ok {
			byRows = append(byRows, k)
		} else {
			byPartitions = append(byPartitions, k)
		}
	}
	if len(byRows) > 0 {
		g.evalRows(starts, byRows, overflow)
	}
	if len(byPartitions) > 0 {
		if cuts := cutPartitions(starts, g.threads); len(cuts) > 2 {
			g.evalParallel(starts, cuts, byPartitions, overflow)
		} else {
			for _, k := range byPartitions {
				cs := g.calls[k]
				cs.evalAll(p, starts)
				overflow[k] = cs.agg.overflow
			}
		}
	}
	for k, cs := range g.calls {
		if overflow[k] {
			return overflowError(cs.c)
		}
	}
	return nil
}

// evalParallel evaluates the calls of g.calls at indexes calls over the
// ranges of partitions cuts delimits (cutPartitions), one goroutine per
// range, and marks in overflow the calls whose sum overflowed.
func (g *groupEval) evalParallel(starts []int32, cuts []int, calls []int, overflow []bool) {
	flags := make([][]bool, len(cuts)-1)
	parallelFor(len(cuts)-1, func(r int) {
		p := g.part // shares the peer groups, read only
		mine := starts[cuts[r] : cuts[r+1]+1]
		flags[r] = make([]bool, len(calls))
		for j, k := range calls {
			w := g.calls[k].worker()
			w.evalAll(&p, mine)
			flags[r][j] = w.agg.overflow
		}
	})
	for r := range flags {
		for j, k := range calls {
			overflow[k] = overflow[k] || flags[r][j]
		}
	}
}

// overflowError is the error of call c whose sum overflowed its type.
func overflowError(c *call) error {
	switch {
	case c.sumsFloat32():
		// PostgreSQL's float4pl: "value out of range: overflow".
		return fmt.Errorf("%w: sum of select item %q: value out of range: overflow (real)", ErrOverflow, c.alias)
	case c.outKind == kindFloat:
		// float8pl and float8_accum.
		return fmt.Errorf("%w: %s of select item %q: value out of range: overflow (double precision)", ErrOverflow, c.fn, c.alias)
	}
	return fmt.Errorf("%w: sum of select item %q", ErrOverflow, c.alias)
}

// evalAll evaluates the call over every partition. Functions whose result
// depends only on the partition's size run as one tight loop.
func (cs *callState) evalAll(p *partition, starts []int32) {
	c := cs.c
	switch {
	case c.fn == fnCount && cs.agg.incl == nil && c.frame.wholePartition(p.hasOrder):
		o := cs.out.ints
		for k := 0; k+1 < len(starts); k++ {
			ps, pe := starts[k], starts[k+1]
			cnt := int64(pe - ps)
			for i := ps; i < pe; i++ {
				o[i] = cnt
			}
		}
	case c.fn == fnRowNumber:
		o := cs.out.ints
		for k := 0; k+1 < len(starts); k++ {
			ps, pe := starts[k], starts[k+1]
			for i := ps; i < pe; i++ {
				o[i] = int64(i - ps + 1)
			}
		}
	default:
		for k := 0; k+1 < len(starts); k++ {
			p.set(int(starts[k]), int(starts[k+1]))
			cs.eval(p)
		}
	}
}

// eval computes the call over partition p with its function's evaluator.
func (cs *callState) eval(p *partition) { functions[cs.c.fn].eval(cs, p) }

func (cs *callState) evalRowNumber(p *partition) {
	o := cs.out.ints
	for i := p.lo; i < p.hi; i++ {
		o[i] = int64(i - p.ps + 1)
	}
}

func (cs *callState) evalRank(p *partition) {
	out := cs.out
	for i := p.lo; i < p.hi; i++ {
		out.ints[i] = int64(p.peerStart(i) - p.ps + 1)
	}
}

func (cs *callState) evalDenseRank(p *partition) {
	out := cs.out
	for i := p.lo; i < p.hi; i++ {
		out.ints[i] = int64(p.group(i) + 1)
	}
}

func (cs *callState) evalPercentRank(p *partition) {
	out := cs.out
	ps, pe := p.ps, p.pe
	n := pe - ps
	for i := p.lo; i < p.hi; i++ {
		if n <= 1 {
			out.floats[i] = 0
		} else {
			out.floats[i] = float64(p.peerStart(i)-ps) / float64(n-1)
		}
	}
}

func (cs *callState) evalCumeDist(p *partition) {
	out := cs.out
	ps, pe := p.ps, p.pe
	n := pe - ps
	for i := p.lo; i < p.hi; i++ {
		out.floats[i] = float64(p.peerEnd(i)-ps) / float64(n)
	}
}

func (cs *callState) evalNtile(p *partition) {
	c := cs.c
	out := cs.out
	ps, pe := p.ps, p.pe
	if c.argNil {
		for i := p.lo; i < p.hi; i++ {
			out.nulls[i] = true
		}
		return
	}
	n := pe - ps
	buckets := c.ntile
	q := int64(n) / buckets
	rem := int64(n) % buckets
	big := rem * (q + 1) // rows in the larger buckets
	for i := p.lo; i < p.hi; i++ {
		k := int64(i - ps)
		if k < big || q == 0 {
			out.ints[i] = k/(q+1) + 1
		} else {
			out.ints[i] = rem + (k-big)/q + 1
		}
	}
}

// copyValue sets out[i] to arg[r] (NULL included).
func (cs *callState) copyValue(i, r int) {
	a, out := cs.arg, cs.out
	if cs.argRows != nil {
		r = int(cs.argRows[r])
	}
	if a.isNull(r) {
		out.nulls[i] = true
		return
	}
	out.nulls[i] = false
	switch a.kind {
	case kindFloat:
		out.floats[i] = a.floats[r]
	case kindString:
		out.strs[i] = a.strs[r]
	default:
		out.ints[i] = a.ints[r]
	}
}

// evalShift computes lag or lead over rows [lo, hi) of partition p: the
// rows whose source row (the offset away) lies in the partition copy it
// in one run, and those before and after take the default.
func (cs *callState) evalShift(p *partition) {
	c := cs.c
	if c.argNil {
		fill(cs.out.nulls[p.lo:p.hi], true)
		return
	}
	off := c.offset
	if c.fn == fnLag {
		off = -off
	}
	// Row i reads row i+off, which is in the partition for i in [from, to).
	from := clampInt(subClamp(int64(p.ps), off), p.lo, p.hi)
	to := clampInt(subClamp(int64(p.pe), off), from, p.hi)
	cs.shiftDefault(p.lo, from)
	cs.copyRows(from, to, int(off))
	cs.shiftDefault(to, p.hi)
}

// copyRows sets out[i] to arg[i+off] (NULL included) for i in [from, to).
func (cs *callState) copyRows(from, to, off int) {
	if from >= to {
		return
	}
	a, out := cs.arg, cs.out
	if rows := cs.argRows; rows != nil {
		gatherRange(a, out, rows[from+off:to+off], from)
		return
	}
	lo, hi := from+off, to+off
	switch a.kind {
	case kindFloat:
		copy(out.floats[from:to], a.floats[lo:hi])
	case kindString:
		copy(out.strs[from:to], a.strs[lo:hi])
	default:
		copy(out.ints[from:to], a.ints[lo:hi])
	}
	if a.nulls != nil {
		copy(out.nulls[from:to], a.nulls[lo:hi])
	} else {
		clear(out.nulls[from:to])
	}
}

// gatherRange sets out's rows from at on to a's rows rows (NULL included).
func gatherRange(a, out *vector, rows []int32, at int) {
	switch a.kind {
	case kindFloat:
		o := out.floats[at : at+len(rows)]
		for k, r := range rows {
			o[k] = a.floats[r]
		}
	case kindString:
		o := out.strs[at : at+len(rows)]
		for k, r := range rows {
			o[k] = a.strs[r]
		}
	default:
		o := out.ints[at : at+len(rows)]
		for k, r := range rows {
			o[k] = a.ints[r]
		}
	}
	o := out.nulls[at : at+len(rows)]
	if a.nulls == nil {
		clear(o)
		return
	}
	for k, r := range rows {
		o[k] = a.nulls[r]
	}
}

// shiftDefault sets rows [from, to) of a lag or lead to its default, or
// NULL without one.
func (cs *callState) shiftDefault(from, to int) {
	if from >= to {
		return
	}
	d, out := cs.c.deflt, cs.out
	if d == nil {
		fill(out.nulls[from:to], true)
		return
	}
	clear(out.nulls[from:to])
	switch out.kind {
	case kindFloat:
		fill(out.floats[from:to], d.floats[0])
	case kindString:
		fill(out.strs[from:to], d.strs[0])
	default:
		fill(out.ints[from:to], d.ints[0])
	}
}

func (cs *callState) evalValue(p *partition) {
	c := cs.c
	if r := cs.valueRow(p); r >= 0 {
		cs.fillValue(p.lo, p.hi, r)
		return
	}
	fr := &cs.fr
	fr.reset(p)
	for i := p.lo; i < p.hi; i++ {
		s, e := fr.bounds(i)
		pc := framePieces(&c.frame, p, i, s, e)
		r := -1
		switch c.fn {
		case fnFirstValue:
			r = pc.at(0)
		case fnLastValue:
			if k := pc.count(); k > 0 {
				r = pc.at(k - 1)
			}
		case fnNthValue:
			if !c.argNil && c.nth <= int64(pc.count()) {
				r = pc.at(int(c.nth - 1))
			}
		}
		if r < 0 {
			cs.out.nulls[i] = true
			continue
		}
		cs.copyValue(i, r)
	}
}

// fillValue sets rows [from, to) of out to arg[r] (NULL included).
func (cs *callState) fillValue(from, to, r int) {
	a, out := cs.arg, cs.out
	if cs.argRows != nil {
		r = int(cs.argRows[r])
	}
	fill(out.nulls[from:to], a.isNull(r))
	switch a.kind {
	case kindFloat:
		fill(out.floats[from:to], a.floats[r])
	case kindString:
		fill(out.strs[from:to], a.strs[r])
	default:
		fill(out.ints[from:to], a.ints[r])
	}
}

// valueRow returns the row first_value or last_value gives on every row of
// p, when the frame makes it one row, else -1: first_value's frames that
// start at the partition's first row and reach the current row always
// hold that first row first, and last_value's that end at the partition's
// last row and start at or before the current row hold that last row last.
func (cs *callState) valueRow(p *partition) int {
	f := &cs.c.frame
	if f.exclude != excludeNoOthers || p.pe <= p.ps {
		return -1
	}
	switch cs.c.fn {
	case fnFirstValue:
		if f.start.kind == boundUnboundedPreceding && f.end.kind >= boundCurrentRow {
			return p.ps
		}
	case fnLastValue:
		if f.end.kind == boundUnboundedFollowing && f.start.kind <= boundCurrentRow {
			return p.pe - 1
		}
	}
	return -1
}

// evalAggregate computes an aggregate over partition p, choosing the
// cheapest algorithm for its frame.
func (cs *callState) evalAggregate(p *partition) {
	c := cs.c
	a := &cs.agg
	if c.frame.wholePartition(p.hasOrder) {
		cs.aggregateWhole(p)
		return
	}
	cs.fr.reset(p)
	f := &c.frame
	switch {
	case f.exclude != excludeNoOthers || (!a.invertible() && (a.fn == fnSum || a.fn == fnAvg) && f.start.kind != boundUnboundedPreceding):
		cs.aggregateTree(p)
	case f.start.kind == boundUnboundedPreceding:
		cs.aggregateRunning(p)
	case functions[a.fn].extremum:
		cs.aggregateExtremum(p)
	default:
		cs.aggregateSliding(p)
	}
}

// aggregateWhole: one aggregate, written to every row.
func (cs *callState) aggregateWhole(p *partition) {
	a, out, st := &cs.agg, cs.out, &cs.state
	ps, pe := p.ps, p.pe
	if a.fn == fnCount && a.incl == nil {
		cnt := int64(pe - ps)
		o := out.ints[p.lo:p.hi]
		for k := range o {
			o[k] = cnt
		}
		return
	}
	if p.lo > ps || p.hi < pe {
		*st = cs.carry.st // a piece of the partition: its aggregate, carried (parallel.go)
	} else {
		st.reset()
		for r := ps; r < pe; r++ {
			if a.included(r) {
				a.add(st, r)
			}
		}
	}
	for i := p.lo; i < p.hi; i++ {
		a.write(out, i, st)
	}
}

// aggregateTree: a segment tree, for exclusions and float sums over
// sliding frames.
func (cs *callState) aggregateTree(p *partition) {
	a, out, st, fr := &cs.agg, cs.out, &cs.state, &cs.fr
	f := &cs.c.frame
	cs.tree.build(a, p.ps, p.pe)
	for i := p.lo; i < p.hi; i++ {
		s, e := fr.bounds(i)
		pc := framePieces(f, p, i, s, e)
		st.reset()
		for k := 0; k < pc.n; k++ {
			cs.tree.query(a, st, pc.r[k][0], pc.r[k][1])
		}
		a.write(out, i, st)
	}
}

// aggregateRunning: the frame only grows.
func (cs *callState) aggregateRunning(p *partition) {
	a, out, st, fr := &cs.agg, cs.out, &cs.state, &cs.fr
	st.reset()
	end := p.ps
	if p.lo > p.ps {
		// A range of the partition: start from the carried aggregate
		// of the rows before carry.end (parallel.go).
		*st, end = cs.carry.st, cs.carry.end
	}
	for i := p.lo; i < p.hi; i++ {
		_, e := fr.bounds(i)
		for ; end < e; end++ {
			if a.included(end) {
				a.add(st, end)
			}
		}
		a.write(out, i, st)
	}
}

// frameRows returns how many rows the frames of rows [p.lo, p.hi) span:
// the most a deque over them holds.
func (cs *callState) frameRows(p *partition) int {
	if p.lo == p.ps && p.hi == p.pe {
		return p.pe - p.ps
	}
	// A range of the partition: the frames of its first and last rows,
	// found by a copy of the framer, whose RANGE cursors only move
	// forward and must stay at the range's start for the evaluation.
	fr := cs.fr
	s, _ := fr.bounds(p.lo)
	_, e := fr.bounds(p.hi - 1)
	return max(e-s, 0)
}

// aggregateExtremum: sliding min/max with a monotonic deque.
func (cs *callState) aggregateExtremum(p *partition) {
	a, out, st, fr := &cs.agg, cs.out, &cs.state, &cs.fr
	cs.deq.reset(cs.frameRows(p))
	if a.kind == kindInt && a.incl == nil {
		cs.extremumInts(p)
		return
	}
	end := p.ps
	for i := p.lo; i < p.hi; i++ {
		s, e := fr.bounds(i)
		if end < s {
			end = s
		}
		for ; end < e; end++ {
			if a.included(end) {
				cs.deq.push(a, end)
			}
		}
		cs.deq.expire(s)
		st.reset()
		if m := cs.deq.front(); m >= 0 {
			st.cnt, st.m = 1, m
		}
		a.write(out, i, st)
	}
}

// extremumInts is aggregateExtremum over integer arguments without NULLs
// or FILTER, its comparisons inlined. A frame of at most
// scanFrameRows rows is scanned: branch-free min/max over a few rows
// beats the deque's unpredictable pops. Over wider frames the deque keeps
// rows of strictly improving values from back to front, a row pushed
// dropping the rows behind it that are no better; it is rebuilt from the
// frame's start after scanned frames.
func (cs *callState) extremumInts(p *partition) {
	xs, out, fr, buf := cs.agg.ints, cs.out, &cs.fr, cs.deq.buf
	isMin := cs.agg.fn == fnMin
	head, tail := 0, 0
	end, built := p.ps, true
	for i := p.lo; i < p.hi; i++ {
		s, e := fr.bounds(i)
		if s >= e {
			out.nulls[i] = true
			continue
		}
		out.nulls[i] = false
		if e-s <= scanFrameRows {
			m := xs[s]
			if isMin {
				for _, x := range xs[s+1 : e] {
					m = min(m, x)
				}
			} else {
				for _, x := range xs[s+1 : e] {
					m = max(m, x)
				}
			}
			out.ints[i] = m
			built = false
			continue
		}
		if !built {
			head, tail, end, built = 0, 0, s, true
		}
		end = max(end, s)
		for ; end < e; end++ {
			x := xs[end]
			if isMin {
				for tail > head && xs[buf[tail-1]] >= x {
					tail--
				}
			} else {
				for tail > head && xs[buf[tail-1]] <= x {
					tail--
				}
			}
			buf[tail] = int32(end)
			tail++
		}
		for head < tail && int(buf[head]) < s {
			head++
		}
		out.ints[i] = xs[buf[head]]
	}
}

// scanFrameRows is the widest frame extremumInts scans rather than keeps
// a deque for.
const scanFrameRows = 24

// aggregateSliding: a sliding invertible aggregate adds the rows entering
// and removes the rows leaving.
func (cs *callState) aggregateSliding(p *partition) {
	a, out, st, fr := &cs.agg, cs.out, &cs.state, &cs.fr
	st.reset()
	lo, hi := p.ps, p.ps // rows [lo, hi) are in st
	for i := p.lo; i < p.hi; i++ {
		s, e := fr.bounds(i)
		if s >= hi {
			st.reset()
			lo, hi = s, s
		}
		for ; hi < e; hi++ {
			if a.included(hi) {
				a.add(st, hi)
			}
		}
		for ; lo < s; lo++ {
			if a.included(lo) {
				a.remove(st, lo)
			}
		}
		a.write(out, i, st)
	}
}

// newCallState returns the state of call c over n rows of in (in perm
// order when perm is set), writing its results to out (c.newOutput).
func newCallState(c *call, in *input, n int, perm []int32, orderKey *vector, g *windowGroup, sortedOf func(*expr, *vector) *vector, out *vector) (*callState, error) {
	cs := &callState{c: c, out: out}
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
		a.fn, a.single = c.fn, c.sumsFloat32()
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
				sorted := hugepage.Make[bool](n, n)
				for i, p := range perm {
					sorted[i] = keep[p]
				}
				keep = sorted
			}
			incl = keep
		}
		if cs.arg != nil && cs.arg.nulls != nil {
			if incl == nil {
				incl = hugepage.Make[bool](n, n)
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

// newOutput makes the vector of c's results for n rows, its values lent
// by l (nil: made fresh).
func (c *call) newOutput(l *bufpool.Lease, n int) *vector {
	return leasedVector(l, c.outKind, c.outTyp, n, !c.neverNull())
}
