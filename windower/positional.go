package windower

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Positional calls are evaluated over a partition larger than the grant
// from each row's position in the partition rather than from the slice in
// the buffer: ntile needs the partition's row count, and first_value,
// last_value and nth_value over a ROWS frame with one UNBOUNDED end need
// a row that may have left the buffer long ago (the
// partition's first or n-th row) or not yet reached it (its last row).
// The first pass over the partition (partitionPass) counts its rows and
// picks those rows' values; every other row a frame names is in the
// buffer, because the group's halo keeps the rows the bounded end
// reaches.

// positionalCall reports whether c is evaluated positionally over a big
// partition. Value functions qualify when one frame end is UNBOUNDED and
// the other, in ROWS mode, CURRENT ROW or an offset a halo of at most
// reach rows holds (as nth_value's n must be); nothing excluded.
func positionalCall(c *call, reach int) bool {
	switch c.fn.info().family {
	case famNtile:
		return true
	case famValue:
	default:
		return false
	}
	f := &c.frame
	if f.exclude != excludeNoOthers {
		return false // pieces serve first_value and last_value (see exclude.go)
	}
	var other bound
	switch {
	case f.start.kind == boundUnboundedPreceding:
		other = f.end
	case f.end.kind == boundUnboundedFollowing:
		other = f.start
	default:
		return false
	}
	switch other.kind {
	case boundUnboundedPreceding, boundUnboundedFollowing:
		return true
	}
	// CURRENT ROW in RANGE and GROUPS mode is a peer group, which may be
	// larger than the buffer: cursor calls serve those, and the calls
	// whose bounded end (or n) reaches further than a halo holds.
	return f.mode == modeRows && positionalHalo(c, &halo{}, reach)
}

// positionalHalo adds what a positional call needs of the buffer to h,
// and reports whether a halo of at most reach rows holds it (h is left as
// it was if not).
func positionalHalo(c *call, h *halo, reach int) bool {
	if c.fn.info().family != famValue {
		return true // ntile: the partition's size
	}
	f := &c.frame
	add := func(b bound, extra int64) bool {
		off := b.off + extra
		if off > int64(reach) {
			return false
		}
		switch b.kind {
		case boundPreceding:
			h.before = max(h.before, int(b.off))
			if extra > b.off {
				h.after = max(h.after, int(extra-b.off))
			}
		case boundFollowing:
			h.after = max(h.after, int(off))
		case boundCurrentRow:
			h.after = max(h.after, int(extra))
		}
		return true
	}
	if f.start.kind == boundUnboundedPreceding {
		return add(f.end, 0)
	}
	var extra int64 // nth_value reads n-1 rows past the frame start
	if c.fn == fnNthValue && !c.argNil {
		extra = c.nth - 1
	}
	return extra <= int64(reach) && add(f.start, extra)
}

// partitionFacts is what the first pass over a big partition learns for
// its positional calls.
type partitionFacts struct {
	rows int64 // rows in the partition
	// picked[item] maps a partition position to the value of the item's
	// argument there (first row, n-th row, last row).
	picked map[int]map[int64]*vector
}

// positionalPicks returns the partition positions whose argument values
// c needs from the first pass; -1 stands for the last row.
func positionalPicks(c *call) []int64 {
	if c.fn.info().family != famValue {
		return nil
	}
	f := &c.frame
	var picks []int64
	if f.start.kind == boundUnboundedPreceding {
		switch c.fn {
		case fnFirstValue:
			picks = append(picks, 0)
		case fnNthValue:
			if !c.argNil {
				picks = append(picks, c.nth-1)
			}
		}
	}
	if f.end.kind == boundUnboundedFollowing && c.fn == fnLastValue {
		picks = append(picks, -1)
	}
	return picks
}

// positionalSlice computes the results of rows [from, to) of in, a slice
// of a big partition whose row 0 is row partPos of the partition.
func positionalSlice(c *call, in *input, from, to int, partPos int64, facts *partitionFacts, mem memory.Allocator) (arrow.Array, error) {
	out := resultVector(c, to-from)
	if c.fn.info().family == famNtile {
		ntileSlice(c, out, from, to, partPos, facts.rows)
		return out.toArrow(mem), nil
	}
	if err := valueSlice(c, out, in, from, to, partPos, facts); err != nil {
		return nil, err
	}
	return out.toArrow(mem), nil
}

// ntileSlice sets out[r-from] to the bucket of rows [from, to) of a slice
// whose row 0 is row partPos of a partition of n rows.
func ntileSlice(c *call, out *vector, from, to int, partPos, n int64) {
	for r := from; r < to; r++ {
		i := r - from
		if c.argNil {
			out.nulls[i] = true
			continue
		}
		pos := partPos + int64(r) // the row's position in the partition
		q := n / c.ntile
		rem := n % c.ntile
		big := rem * (q + 1)
		if pos < big || q == 0 {
			out.ints[i] = pos/(q+1) + 1
		} else {
			out.ints[i] = rem + (pos-big)/q + 1
		}
	}
}

// valueSlice sets out[r-from] to the first_value, last_value or nth_value
// of rows [from, to) of in, a slice whose row 0 is row partPos of the
// partition, reading the rows outside the slice from facts.
func valueSlice(c *call, out *vector, in *input, from, to int, partPos int64, facts *partitionFacts) error {
	n := facts.rows
	var arg *vector
	if len(c.args) > 0 {
		v, err := c.args[0].eval(in.cols, in.n)
		if err != nil {
			return err
		}
		arg = v
	}
	for r := from; r < to; r++ {
		i := r - from
		pos := partPos + int64(r) // the row's position in the partition
		// The frame [s, e) in partition positions.
		s, e := frameBound(&c.frame.start, pos, n), frameBound(&c.frame.end, pos, n)
		if c.frame.end.kind != boundUnboundedFollowing {
			e++ // frameBound gives the last row
		}
		s, e = max(s, 0), min(e, n)
		var at int64 = -1
		switch {
		case s >= e:
		case c.fn == fnFirstValue:
			at = s
		case c.fn == fnLastValue:
			at = e - 1
		case !c.argNil && s+c.nth-1 < e:
			at = s + c.nth - 1
		}
		if at < 0 {
			out.nulls[i] = true
			continue
		}
		var src *vector
		row := at - partPos
		if row >= 0 && row < int64(in.n) {
			src = arg
		} else {
			key := at
			if at == n-1 && facts.picked[c.item][-1] != nil {
				key = -1
			}
			src, row = facts.picked[c.item][key], 0
			if src == nil {
				return fmt.Errorf("%w: select item %q: row %d of a big partition is neither buffered nor picked", ErrInternal, c.alias, at)
			}
		}
		copyRow(out, i, src, int(row))
	}
	return nil
}

// frameBound returns the partition position of a ROWS frame bound for
// the row at position pos: the frame's first row for a start bound, its
// last row for an end bound (n for UNBOUNDED FOLLOWING).
func frameBound(b *bound, pos, n int64) int64 {
	switch b.kind {
	case boundUnboundedPreceding:
		return 0
	case boundUnboundedFollowing:
		return n
	case boundPreceding:
		return pos - b.off
	case boundFollowing:
		return pos + b.off
	}
	return pos
}

// copyRow sets out[i] to v[r], NULL included.
func copyRow(out *vector, i int, v *vector, r int) {
	if v.isNull(r) {
		out.nulls[i] = true
		return
	}
	switch v.kind {
	case kindFloat:
		out.floats[i] = v.floats[r]
	case kindString:
		out.strs[i] = v.strs[r]
	default:
		out.ints[i] = v.ints[r]
	}
}
