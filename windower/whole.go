package windower

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-db/strata/columnar"
)

// The first pass over a partition larger than the grant: whole-partition
// aggregates and the rows positional calls pick; and the one-row helpers
// the big-partition paths share.

// wholeCalls returns the group's aggregates whose frame is the whole
// partition. Over a partition larger than the buffer their value is
// computed by a first pass over the partition (partitionPass) and
// written as a constant while the partition is evaluated in slices.
func wholeCalls(g *windowGroup) map[*call]bool {
	out := map[*call]bool{}
	for _, c := range g.calls {
		if c.fn.isAggregate() && c.frame.wholePartition(len(g.order) > 0) {
			out[c] = true
		}
	}
	return out
}

// partitionPass reads src from row start for as long as the rows that
// pass filter (superseded rows and WHERE, on input that streams sorted)
// belong to the
// partition whose keys are those of row 0 of keyRow. It returns
// the value of every call in calls over it, as one-row vectors, and the
// partition's facts: its row count and, for each positional call in
// pick, the argument values at the positions positionalPicks names.
func partitionPass(ctx context.Context, p *plan, src *columnar.Container, used, partCols []int, start int64,
	keyRow *input, calls, pick []*call, filter rowFilter, budget *columnar.Budget) ([]*vector, *partitionFacts, error) {
	facts := &partitionFacts{picked: map[int]map[int64]*vector{}}
	wanted := make([][]int64, len(pick))
	for i, c := range pick {
		wanted[i] = positionalPicks(c)
		facts.picked[c.item] = map[int64]*vector{}
	}
	blocks := src.Manifest().Blocks
	b := 0
	for b+1 < len(blocks) && blocks[b+1].FirstRow <= start {
		b++
	}
	br, err := src.OpenColumns(used)
	if err != nil {
		return nil, nil, fmt.Errorf("windower: reread partition: %w", err)
	}
	defer br.Close()
	if err := br.Seek(b); err != nil {
		return nil, nil, fmt.Errorf("windower: reread partition: %w", err)
	}
	skip := int(start - blocks[b].FirstRow)
	next := blocks[b].FirstRow // the source row of the next block's first
	states := make([]aggState, len(calls))
	bests := make([]*vector, len(calls)) // min/max so far
	for i := range states {
		states[i].reset()
	}
	batch, reserved, err := reserveBuffer(p, src.Manifest().BlockRows, budget)
	if err != nil {
		return nil, nil, err
	}
	defer budget.Release(reserved)
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("windower: reread partition: %w", err)
		}
		batch.reset()
		first := next
		next += rec.NumRows()
		err = batch.appendRecord(rec, used)
		rec.Release()
		if err != nil {
			return nil, nil, err
		}
		// The rows before the partition, then those superseded or WHERE drops.
		k := min(skip, batch.n)
		batch.shift(k)
		skip = 0
		if filter.active() {
			if _, err := filter.apply(batch, 0, first+int64(k)); err != nil {
				return nil, nil, err
			}
		}
		from, to := 0, batch.n
		for r := from; r < batch.n; r++ {
			if !sameKeys(batch, r, keyRow, 0, partCols) {
				to, done = r, true
				break
			}
		}
		if err := facts.pick(pick, wanted, batch, from, to); err != nil {
			return nil, nil, err
		}
		facts.rows += int64(to - from)
		if err := foldBatch(calls, states, bests, batch, from, to); err != nil {
			return nil, nil, err
		}
	}
	out, err := wholeResults(calls, states, bests)
	if err != nil {
		return nil, nil, err
	}
	return out, facts, nil
}

// pick keeps the argument values of the pick calls at the partition
// positions wanted names among rows [from, to) of batch, which follow
// the partition's facts.rows rows before it.
func (facts *partitionFacts) pick(pick []*call, wanted [][]int64, batch *input, from, to int) error {
	for i, c := range pick {
		if len(wanted[i]) == 0 || to <= from {
			continue
		}
		arg, err := c.args[0].eval(batch.cols, batch.n)
		if err != nil {
			return err
		}
		for _, at := range wanted[i] {
			if at == -1 {
				facts.picked[c.item][-1] = rowOf(arg, to-1)
			} else if at >= facts.rows && at < facts.rows+int64(to-from) {
				facts.picked[c.item][at] = rowOf(arg, from+int(at-facts.rows))
			}
		}
	}
	return nil
}

// foldBatch adds rows [from, to) of batch to the state of each call.
func foldBatch(calls []*call, states []aggState, bests []*vector, batch *input, from, to int) error {
	for i, c := range calls {
		a, err := aggInputFor(c, batch)
		if err != nil {
			return err
		}
		var s aggState
		s.reset()
		for r := from; r < to; r++ {
			if a.included(r) {
				a.add(&s, r)
			}
		}
		// Fold the batch into the partition's state; min/max keep
		// their value, since row numbers do not outlive the batch.
		states[i].m = -1
		a.merge(&states[i], &s)
		states[i].m = -1
		if a.overflow { // a sum of real past float4 (float8 sums overflow as written)
			return overflowError(c)
		}
		if s.m >= 0 && (bests[i] == nil || beats(a, int(s.m), bests[i])) {
			bests[i] = oneRow(a, int(s.m))
		}
	}
	return nil
}

// wholeResults returns each call's result over the partition, as a
// one-row vector, from its state and (min, max) its best row.
func wholeResults(calls []*call, states []aggState, bests []*vector) ([]*vector, error) {
	out := make([]*vector, len(calls))
	for i, c := range calls {
		v := resultVector(c, 1)
		a := &aggInput{fn: c.fn, kind: kindInt}
		if functions[c.fn].extremum {
			if bests[i] != nil {
				a.kind, a.ints, a.floats, a.strs = bests[i].kind, bests[i].ints, bests[i].floats, bests[i].strs
				states[i].m = 0
			}
		} else if len(c.args) > 0 {
			a.kind = c.args[0].kind
		}
		a.write(v, 0, &states[i])
		if a.overflow {
			return nil, overflowError(c)
		}
		out[i] = v
	}
	return out, nil
}

// rowOf copies row r of v, NULL included, into a one-row vector.
func rowOf(v *vector, r int) *vector {
	out := oneRow(&aggInput{kind: v.kind, ints: v.ints, floats: v.floats, strs: v.strs}, r)
	out.typ = v.typ
	out.nulls = []bool{v.isNull(r)}
	return out
}

// aggInputFor evaluates an aggregate's argument and FILTER over rows.
func aggInputFor(c *call, in *input) (*aggInput, error) {
	a := &aggInput{fn: c.fn, kind: kindInt, single: c.sumsFloat32()}
	var arg *vector
	if len(c.args) > 0 {
		v, err := c.args[0].eval(in.cols, in.n)
		if err != nil {
			return nil, err
		}
		arg = v
		a.kind, a.ints, a.floats, a.strs = v.kind, v.ints, v.floats, v.strs
	}
	var incl []bool
	if len(c.filter) > 0 {
		keep, err := evalPredicates(c.filter, in.cols, in.n)
		if err != nil {
			return nil, err
		}
		incl = keep
	}
	if arg != nil && arg.nulls != nil {
		if incl == nil {
			incl = make([]bool, in.n)
			for i := range incl {
				incl[i] = true
			}
		}
		for i, null := range arg.nulls[:in.n] {
			if null {
				incl[i] = false
			}
		}
	}
	a.incl = incl
	return a, nil
}

// oneRow copies row r of a's argument into a one-row vector.
func oneRow(a *aggInput, r int) *vector {
	v := &vector{kind: a.kind}
	switch a.kind {
	case kindFloat:
		v.floats = []float64{a.floats[r]}
	case kindString:
		v.strs = []string{a.strs[r]}
	default:
		v.ints = []int64{a.ints[r]}
	}
	return v
}

// sameKeys reports whether row a of x and row b of y agree on cols.
func sameKeys(x *input, a int, y *input, b int, cols []int) bool {
	for _, c := range cols {
		vx, vy := x.cols[c], y.cols[c]
		nx, ny := vx.isNull(a), vy.isNull(b)
		if nx || ny {
			if nx != ny {
				return false
			}
			continue
		}
		var d int
		switch vx.kind {
		case kindFloat:
			d = compareFloat(vx.floats[a], vy.floats[b])
		case kindString:
			if vx.strs[a] != vy.strs[b] {
				d = 1
			}
		default:
			d = cmpInt(vx.ints[a], vy.ints[b])
		}
		if d != 0 {
			return false
		}
	}
	return true
}

// beats reports whether row r of a's argument beats best[0] for min or max.
func beats(a *aggInput, r int, best *vector) bool {
	var c int
	switch a.kind {
	case kindFloat:
		c = compareFloat(a.floats[r], best.floats[0])
	case kindString:
		switch {
		case a.strs[r] < best.strs[0]:
			c = -1
		case a.strs[r] > best.strs[0]:
			c = 1
		}
	default:
		c = cmpInt(a.ints[r], best.ints[0])
	}
	if a.fn == fnMin {
		return c < 0
	}
	return c > 0
}
