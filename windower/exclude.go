package windower

import "fmt"

// min, max, first_value and last_value with EXCLUDE over a partition
// larger than the grant: the frame without the excluded rows is a left
// piece [frame start, excluded start), the current row (EXCLUDE TIES) and
// a right piece [excluded end, frame end), each bound clamped to the
// frame. The excluded rows are the current row (CURRENT ROW) or its peer
// group (GROUP, TIES), so every piece bound only moves forward; min and
// max keep a monotonic deque per piece. A peer-end cursor finds where
// the current row's peer group ends.

// excludePieces reports whether c with EXCLUDE is evaluated with pieces.
func excludePieces(c *call) bool {
	return c.frame.exclude != excludeNoOthers && c.fn.info().excludePieces
}

// pieceEval is the state of a call evaluated with pieces. The frame
// cursors give the left piece's start (and its first row) and the right
// piece's end: the rows the frame's end cursor passes go to the right
// piece, and leave it by position. leftEnd moves to the left piece's end,
// adding the rows it passes; rightStart (first_value) to the right
// piece's start.
type pieceEval struct {
	leftEnd, rightStart *partCursor
	peerEnd             *partCursor // GROUP, TIES: at the end of the current peer group
	left, right         extremeDeque
	leftLast, rightLast *vector // last_value: the argument of each piece's last row
	x1, x2              int64   // the left piece's end and the right piece's start
}

func (pe *pieceEval) close() {
	for _, cur := range []*partCursor{pe.leftEnd, pe.rightStart, pe.peerEnd} {
		if cur != nil {
			cur.close()
		}
	}
	pe.left.release()
	pe.right.release()
}

// enter adds the row cur is at to a piece's deque or last value.
func (pe *pieceEval) enter(c *call, cur *partCursor, dq *extremeDeque, last **vector) error {
	switch {
	case c.fn.info().extremum:
		if cur.agg.included(cur.r) {
			return dq.push(c, cur.agg, cur.r, cur.pos)
		}
	case c.fn == fnLastValue:
		*last = rowOf(cur.val, cur.r)
	}
	return nil
}

// advancePieces moves the pieces to the current row's frame, whose
// bounds the frame cursors hold.
func (e *cursorEval) advancePieces() error {
	pe := e.pieces
	s, end := e.start.pos, e.end.pos
	if e.start.done || end < s {
		end = s
	}
	exStart, exEnd := e.pos, e.pos+1
	if e.c.frame.exclude != excludeCurrentRow {
		for !pe.peerEnd.done && pe.peerEnd.group <= e.group {
			if err := pe.peerEnd.next(); err != nil {
				return err
			}
		}
		exStart, exEnd = e.peerStart, pe.peerEnd.pos
	}
	pe.x1, pe.x2 = min(max(exStart, s), end), min(max(exEnd, s), end)
	for !pe.leftEnd.done && pe.leftEnd.pos < pe.x1 {
		if err := pe.enter(e.c, pe.leftEnd, &pe.left, &pe.leftLast); err != nil {
			return err
		}
		if err := pe.leftEnd.next(); err != nil {
			return err
		}
	}
	if pe.rightStart != nil {
		for !pe.rightStart.done && pe.rightStart.pos < pe.x2 {
			if err := pe.rightStart.next(); err != nil {
				return err
			}
		}
	}
	pe.left.expire(s)
	pe.right.expire(pe.x2)
	return nil
}

// writePieces stores the current row's result as out[i]; r is the
// current row in the slice, whose argument and FILTER are e.curAgg and
// its value e.curVal.
func (e *cursorEval) writePieces(out *vector, i, r int) {
	pe := e.pieces
	c := e.c
	s, end := e.start.pos, e.end.pos
	inFrame := !e.start.done && e.pos >= s && e.pos < end
	ties := c.frame.exclude == excludeTies && inFrame
	leftRows, rightRows := s < pe.x1, pe.x2 < end && !e.start.done
	switch c.fn {
	case fnMin, fnMax:
		var best *vector
		for _, v := range []*vector{pe.left.front(), pe.right.front()} {
			if v != nil && (best == nil || beats(valueInput(c.fn, v), 0, best)) {
				best = v
			}
		}
		if ties && e.curAgg.included(r) && (best == nil || beats(e.curAgg, r, best)) {
			best = oneRow(e.curAgg, r)
		}
		if best == nil {
			out.nulls[i] = true
			return
		}
		copyRow(out, i, best, 0)
	case fnFirstValue:
		switch {
		case leftRows:
			copyRow(out, i, e.start.val, e.start.r)
		case ties:
			copyRow(out, i, e.curVal, r)
		case rightRows:
			copyRow(out, i, pe.rightStart.val, pe.rightStart.r)
		default:
			out.nulls[i] = true
		}
	case fnLastValue:
		switch {
		case rightRows && pe.rightLast != nil:
			copyRow(out, i, pe.rightLast, 0)
		case ties:
			copyRow(out, i, e.curVal, r)
		case leftRows && pe.leftLast != nil:
			copyRow(out, i, pe.leftLast, 0)
		default:
			out.nulls[i] = true
		}
	}
}

// extremeDeque is a monotonic deque of one-row values for sliding min or
// max, counted against the budget as it grows.
type extremeDeque struct {
	entries  []cursorEntry
	head     int
	reserved int64
	budget   budgetReserver
}

// budgetReserver is the part of columnar.Budget a deque needs.
type budgetReserver interface {
	Reserve(n int64) error
	Release(n int64)
}

func (d *extremeDeque) push(c *call, a *aggInput, r int, pos int64) error {
	v := oneRow(a, r)
	// Rows at the back that do not beat the new one can never be the extreme again.
	for len(d.entries) > d.head && !beats(valueInput(c.fn, d.entries[len(d.entries)-1].v), 0, v) {
		d.entries = d.entries[:len(d.entries)-1]
	}
	if d.head > 0 && len(d.entries) == cap(d.entries) {
		d.entries = d.entries[:copy(d.entries, d.entries[d.head:])]
		d.head = 0
	}
	d.entries = append(d.entries, cursorEntry{pos: pos, v: v})
	if need := int64(cap(d.entries)) * 64; need > d.reserved {
		if err := d.budget.Reserve(need - d.reserved); err != nil {
			return fmt.Errorf("windower: min/max window of select item %q over a partition larger than the grant: %w", c.alias, err)
		}
		d.reserved = need
	}
	return nil
}

// expire drops the entries of rows before pos.
func (d *extremeDeque) expire(pos int64) {
	for d.head < len(d.entries) && d.entries[d.head].pos < pos {
		d.entries[d.head].v = nil
		d.head++
	}
}

func (d *extremeDeque) front() *vector {
	if d.head == len(d.entries) {
		return nil
	}
	return d.entries[d.head].v
}

func (d *extremeDeque) release() {
	if d.budget != nil {
		d.budget.Release(d.reserved)
	}
	d.reserved = 0
}
