package windower

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/internal/hugepage"
)

// A carry is a running aggregate's value over the rows of a partition
// larger than the buffer that have left the buffer, combined with the
// results of each slice.

// runningCall reports whether c is a running count, sum, avg, min or max
// over ROWS (frame from UNBOUNDED PRECEDING to CURRENT ROW or an offset of
// at most reach rows, which a halo holds; nothing excluded): over a big
// partition each slice's results are combined with the aggregate of the
// rows before the buffer (runningCarry).
func runningCall(c *call, reach int) bool {
	f := &c.frame
	if !c.fn.isAggregate() {
		return false
	}
	if f.exclude != excludeNoOthers || f.start.kind != boundUnboundedPreceding {
		return false
	}
	// RANGE and GROUPS frames end with a peer group, which may be larger
	// than the buffer, and far ROWS ends need more than a halo: cursor
	// calls serve them.
	return f.mode == modeRows && f.end.kind != boundUnboundedFollowing && f.end.off <= int64(reach)
}

// runningCarry is a running aggregate's value over the rows of a big
// partition that have left the buffer.
type runningCarry struct {
	c    *call
	cnt  int64
	sum  int64
	best *vector // min/max so far
	// st is the state of an avg or float sum over the rows that left,
	// added in order (see sequential).
	st aggState
}

// sequential reports whether the carry's results are recomputed from the
// slice's rows, continuing from the state of the rows before them: avg
// (whose result cannot be combined with a slice's avg) and float sums
// (which must add in row order to match the in-memory result bit for bit).
func (rc *runningCarry) sequential() bool {
	return rc.c.fn == fnAvg || (rc.c.fn == fnSum && rc.c.outKind == kindFloat)
}

// recompute returns the results of rows [from, to) of in, rows [0, n) of
// a slice of a big partition, from the carry's state and the slice's rows
// up to each row's frame end.
func (rc *runningCarry) recompute(in *input, from, to int, mem memory.Allocator) (arrow.Array, error) {
	a, err := aggInputFor(rc.c, in)
	if err != nil {
		return nil, err
	}
	f := &rc.c.frame
	out := &vector{kind: rc.c.outKind, typ: rc.c.outTyp, floats: make([]float64, to-from), nulls: make([]bool, to-from)}
	st := rc.st
	added := 0
	for r := from; r < to; r++ {
		var e int // the frame's end (a ROWS frame: runningCall)
		switch {
		case f.end.kind == boundCurrentRow:
			e = r + 1
		case f.end.kind == boundFollowing:
			e = int(min(int64(r)+1+f.end.off, int64(in.n)))
		default: // PRECEDING: the halo keeps the frame end in the buffer
			e = max(int(int64(r)+1-f.end.off), 0)
		}
		for ; added < e; added++ {
			if a.included(added) {
				a.add(&st, added)
			}
		}
		a.write(out, r-from, &st)
	}
	if a.overflow { // an integer sum past int64, a float one past its range
		return nil, overflowError(rc.c)
	}
	return out.toArrow(mem), nil
}

// add folds rows [0, n) of in into the carry.
func (rc *runningCarry) add(in *input, n int) error {
	a, err := aggInputFor(rc.c, in)
	if err != nil {
		return err
	}
	for r := 0; r < n; r++ {
		if !a.included(r) {
			continue
		}
		if rc.sequential() {
			a.add(&rc.st, r)
			if a.overflow { // a sum of real past float4 (float8 sums overflow as written)
				return overflowError(rc.c)
			}
			continue
		}
		rc.cnt++
		switch rc.c.fn {
		case fnSum:
			s, ok := addInt64(rc.sum, a.ints[r])
			if !ok {
				return fmt.Errorf("%w: sum of select item %q", ErrOverflow, rc.c.alias)
			}
			rc.sum = s
		case fnMin, fnMax:
			if rc.best == nil || beats(a, r, rc.best) {
				rc.best = oneRow(a, r)
			}
		}
	}
	return nil
}

// apply combines the carry with a slice's results (over the rows since
// the buffer's start) and returns the partition's results.
func (rc *runningCarry) apply(col arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	n := col.Len()
	out := &vector{kind: rc.c.outKind, typ: rc.c.outTyp}
	switch rc.c.fn {
	case fnCount:
		src := col.(*array.Int64).Int64Values()
		out.ints = hugepage.Make[int64](n, n)
		for i, x := range src[:n] {
			out.ints[i] = x + rc.cnt
		}
	case fnSum:
		src := col.(*array.Int64)
		out.ints, out.nulls = hugepage.Make[int64](n, n), hugepage.Make[bool](n, n)
		for i := 0; i < n; i++ {
			switch {
			case src.IsNull(i) && rc.cnt == 0:
				out.nulls[i] = true
			case src.IsNull(i):
				out.ints[i] = rc.sum
			default:
				s, ok := addInt64(src.Value(i), rc.sum)
				if !ok {
					return nil, fmt.Errorf("%w: sum of select item %q", ErrOverflow, rc.c.alias)
				}
				out.ints[i] = s
			}
		}
	default: // min, max
		v := &vector{kind: rc.c.outKind, typ: rc.c.outTyp}
		if err := v.appendArrow(col); err != nil {
			return nil, err
		}
		if rc.best == nil {
			return v.toArrow(mem), nil
		}
		a := &aggInput{fn: rc.c.fn, kind: v.kind, ints: v.ints, floats: v.floats, strs: v.strs}
		for i := 0; i < n; i++ {
			if v.isNull(i) || !beats(a, i, rc.best) {
				if v.nulls == nil {
					v.nulls = hugepage.Make[bool](n, n)
				}
				v.nulls[i] = false
				switch v.kind {
				case kindFloat:
					v.floats[i] = rc.best.floats[0]
				case kindString:
					v.strs[i] = rc.best.strs[0]
				default:
					v.ints[i] = rc.best.ints[0]
				}
			}
		}
		return v.toArrow(mem), nil
	}
	return out.toArrow(mem), nil
}

func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, !((a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0))
}
