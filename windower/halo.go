package windower

import "fmt"

// A halo is the rows around a slice of a partition larger than the
// buffer that the slice's frames reach: the rows before it that stay in
// the buffer when the slice is written, and the rows after it that must
// be read before it is.

// halo is how far, in rows, the frames of a window group reach before and
// after the current row.
type halo struct {
	before, after int
}

// bigPartitionHalo returns the group's halo, every call's reaching at
// most reach rows (calls that reach further take cursors: cursorCall), or
// an internal error naming a call that no way of slicing serves.
func bigPartitionHalo(g *windowGroup, whole map[*call]bool, reach int) (halo, error) {
	var h halo
	for _, c := range g.calls {
		if whole[c] {
			continue // computed by a pass of its own
		}
		if cursorCall(c, whole, reach) {
			h.before = max(h.before, 1) // the row before tells where a peer group starts
			continue
		}
		if positionalCall(c, reach) {
			positionalHalo(c, &h, reach) // it holds: positionalCall checked
			continue
		}
		switch c.fn.info().family {
		case famNumber:
			continue
		case famShift:
			off := c.offset
			if c.fn == fnLag {
				off = -off
			}
			if off < 0 {
				h.before = max(h.before, int(-off))
			} else {
				h.after = max(h.after, int(off))
			}
			continue
		}
		f := &c.frame
		if runningCall(c, reach) {
			if b := f.end; b.kind == boundFollowing || b.kind == boundPreceding {
				if b.kind == boundFollowing {
					h.after = max(h.after, int(b.off))
				} else {
					// Keep the rows the frame end leaves out in the
					// buffer: the carry holds only rows every frame has.
					h.before = max(h.before, int(b.off))
				}
			}
			continue
		}
		// What is left: min, max and value functions with EXCLUDE CURRENT
		// ROW over bounded ROWS frames, which slices serve (cursors take
		// the other frames).
		if f.mode != modeRows || !boundedRows(f, reach) {
			return h, fmt.Errorf("%w: select item %q: no halo serves its frame over a partition larger than the grant", ErrInternal, c.alias)
		}
		for _, b := range []bound{f.start, f.end} {
			switch b.kind {
			case boundPreceding:
				h.before = max(h.before, int(b.off))
			case boundFollowing:
				h.after = max(h.after, int(b.off))
			}
		}
	}
	return h, nil
}

// minBuffer is the fewest rows a buffer must hold for slices with this
// halo to make progress.
func (h halo) minBuffer() int { return 4 * (h.before + h.after + 1) }

// sliceEnd returns where a slice of a big partition in buffer rows
// [from, end) stops: before the rows whose frames reach past end. bufRows
// is the buffer's row count, for the error.
func (h halo) sliceEnd(end, from, bufRows int) (int, error) {
	to := end - h.after
	if to <= from {
		return 0, fmt.Errorf("%w: a %d-row buffer does not hold a slice and its halo", ErrInternal, bufRows)
	}
	return to, nil
}

// sliceKeep returns how many rows of the buffer a slice that wrote rows
// up to to is done with: all but the halo before the next row.
func (h halo) sliceKeep(to, bufRows int) (int, error) {
	keep := to - h.before
	if keep <= 0 {
		return 0, fmt.Errorf("%w: a %d-row buffer does not hold a slice and its halo", ErrInternal, bufRows)
	}
	return keep, nil
}

// boundedRows reports whether a ROWS frame's bounds are CURRENT ROW or
// offsets of at most reach rows, which a halo holds.
func boundedRows(f *frame, reach int) bool {
	for _, b := range []bound{f.start, f.end} {
		switch b.kind {
		case boundUnboundedPreceding, boundUnboundedFollowing:
			return false
		case boundPreceding, boundFollowing:
			if b.off > int64(reach) {
				return false
			}
		}
	}
	return true
}

// maxHalo is the most rows a halo keeps before or after a slice; frames
// and offsets that reach further are read with cursors.
const maxHalo = 1 << 20
