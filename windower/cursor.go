package windower

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// Cursor calls are the calls over a partition larger than the grant that
// see peer groups (which may be larger than the buffer) or whose frames
// neither a halo of rows nor a carried running aggregate can serve:
// rank, dense_rank, percent_rank and cume_dist; aggregates and value
// functions over RANGE and GROUPS frames, over ROWS offsets beyond the
// largest halo and from a bounded start to UNBOUNDED FOLLOWING. rank,
// dense_rank and percent_rank need only the position where the current
// peer group started, carried across slices; cume_dist moves an end
// cursor to the end of the peer group. Each is evaluated with two cursors over the sorted
// container, one at the frame start and one at the frame end. Both only
// move forward, reading the partition block by block (a block seek puts
// them at its start), so each row is read at most twice per cursor and
// the memory is one block per cursor. The rows between the cursors are
// the frame: count and integer sums add the rows the end cursor passes
// and remove those the start cursor passes; float sums do the same with
// an exact sum (so removing a large value loses nothing); min and max keep
// a monotonic deque; first_value and nth_value read the row at the start
// cursor (nth_value with a third cursor n-1 rows on) and last_value the
// last row the end cursor passed. EXCLUDE with count, sum and avg:
// CURRENT ROW subtracts the current row; GROUP and TIES subtract the
// aggregate of the current row's peers within the frame, an interval
// that also only moves forward, kept by two more cursors (TIES adds the
// current row back). min, max, first_value and last_value with EXCLUDE
// see the frame in two pieces (exclude.go). nth_value with EXCLUDE
// CURRENT ROW reads the row n-1 rows past the frame's start, or the one
// after it (a fourth cursor) when the current row is among those n; with
// GROUP or TIES, the nth row past the peers (writeNthPastPeers).

// cursorCall reports whether c is evaluated with cursors over a big
// partition (see above). A call whose halo would reach more than reach
// rows (at most maxHalo) takes cursors: a lag or lead, a ROWS frame's
// offset, nth_value's n. Nearer ones take a halo.
func cursorCall(c *call, whole map[*call]bool, reach int) bool {
	if whole[c] || runningCall(c, reach) || positionalCall(c, reach) {
		return false
	}
	info := c.fn.info()
	switch info.family {
	case famPeers:
		return true // no frame
	case famShift:
		return !c.argNil && (c.offset > int64(reach) || c.offset < -int64(reach)) // nearer rows: a halo
	case famValue, famAggregate:
	default:
		return false
	}
	f := &c.frame
	if f.exclude != excludeNoOthers {
		if f.exclude == excludeCurrentRow && f.mode == modeRows && boundedRows(f, reach) {
			return false // a halo serves it
		}
		return true
	}
	return f.mode != modeRows || !boundedRows(f, reach) // a bounded ROWS frame: a halo serves it
}

// partCursor reads the rows of one partition of the sorted container in
// order, one at a time.
type partCursor struct {
	c                 *call
	br                *columnar.BatchReader
	used, part, order []int
	keyRow            *input    // row 0 holds the partition's keys
	blk               *input    // the current block
	prev              *input    // the last row of the block before (its order keys)
	r                 int       // current row in blk
	skip              int       // rows of the first block before the partition
	block             int       // the block of the container br reads next
	filter            rowFilter // superseded rows and WHERE, on input that streams sorted
	nextFirst         int64     // the source row of the next block's first
	pos               int64     // partition position of the current row
	group             int64     // peer group of the current row, from 0
	done              bool      // past the partition's last row
	agg               *aggInput // the block's argument and FILTER (aggregates)
	val               *vector   // the block's argument (value functions)
	reserved          int64     // bytes of budget the block holds
	budget            *columnar.Budget
	rangeCol          int     // the RANGE key column, or -1
	keyNull           bool    // the current row's RANGE key is NULL
	key               int64   // the current row's RANGE key (integer kinds)
	fkey              float64 // the current row's RANGE key (float)
}

// cursorColumns returns the input columns a cursor of c reads: the
// partition and order keys and the columns of c's argument and FILTER.
func cursorColumns(c *call, part, order []int, filters []predicate, ncols int) []int {
	use := make([]bool, ncols)
	var mark func(e *expr)
	mark = func(e *expr) {
		if e == nil {
			return
		}
		if e.col >= 0 {
			use[e.col] = true
		}
		mark(e.args[0])
		mark(e.args[1])
	}
	for _, a := range c.args {
		mark(a)
	}
	for _, f := range c.filter {
		mark(f.left)
	}
	for _, f := range filters {
		mark(f.left)
	}
	for _, k := range append(append([]int(nil), part...), order...) {
		use[k] = true
	}
	var cols []int
	for i, u := range use {
		if u {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 && ncols > 0 {
		cols = append(cols, 0) // a cursor over no keys and no argument still counts rows
	}
	return cols
}

// cursorBytes is the memory of one cursor of c over blocks of blockRows rows.
func cursorBytes(p *plan, c *call, part, order []int, filters []predicate, blockRows int) int64 {
	var n int64
	for _, col := range cursorColumns(c, part, order, filters, len(p.usedCols)) {
		n += p.colBytes(col)
	}
	return n * int64(blockRows)
}

// openCursor opens a cursor at the partition that starts at source row
// start of src; row 0 of keyRow holds the partition's keys.
func openCursor(p *plan, c *call, src *columnar.Container, part, order []int, start int64, keyRow *input, filter rowFilter, budget *columnar.Budget) (*partCursor, error) {
	blocks := src.Manifest().Blocks
	b := 0
	for b+1 < len(blocks) && blocks[b+1].FirstRow <= start {
		b++
	}
	cols := cursorColumns(c, part, order, filter.where, len(p.usedCols))
	cur := &partCursor{c: c, used: cols, part: part, order: order, filter: filter, budget: budget, r: -1, rangeCol: -1}
	cur.keyRow = newBuffer(p, part, 1)
	for _, col := range part {
		appendRow(cur.keyRow.cols[col], keyRow.cols[col], 0)
	}
	cur.keyRow.n = 1
	cur.prev = newBuffer(p, order, 1)
	cur.reserved = cursorBytes(p, c, part, order, filter.where, src.Manifest().BlockRows)
	if err := budget.Reserve(cur.reserved); err != nil {
		cur.reserved = 0
		return nil, fmt.Errorf("windower: cursor of select item %q: %w", c.alias, err)
	}
	cur.blk = newBuffer(p, cols, src.Manifest().BlockRows)
	var err error
	if cur.br, err = src.OpenColumns(cols); err != nil {
		cur.close()
		return nil, fmt.Errorf("windower: reread partition: %w", err)
	}
	if err := cur.br.Seek(b); err != nil {
		cur.close()
		return nil, fmt.Errorf("windower: reread partition: %w", err)
	}
	cur.skip = int(start - blocks[b].FirstRow)
	cur.block, cur.nextFirst = b, blocks[b].FirstRow
	if c.frame.mode == modeRange && len(order) == 1 {
		cur.rangeCol = order[0]
	}
	cur.pos = -1
	if err := cur.next(); err != nil {
		cur.close()
		return nil, err
	}
	return cur, nil
}

func (cur *partCursor) close() {
	if cur.br != nil {
		cur.br.Close()
		cur.br = nil
	}
	cur.budget.Release(cur.reserved)
	cur.reserved = 0
}

// next moves to the next row of the partition (or sets done).
func (cur *partCursor) next() error {
	if cur.done {
		return nil
	}
	cur.r++
	first := cur.pos < 0
	if cur.r >= cur.blk.n {
		if cur.blk.n > 0 {
			// Keep the last row's order keys to tell whether the next
			// block starts a peer group.
			cur.prev.reset()
			for _, col := range cur.order {
				appendRow(cur.prev.cols[col], cur.blk.cols[col], cur.blk.n-1)
			}
			cur.prev.n = 1
		}
		cur.blk.reset()
		rec, err := cur.br.Next()
		if errors.Is(err, io.EOF) {
			cur.done = true
			cur.pos++
			return nil
		}
		if err != nil {
			return fmt.Errorf("windower: reread partition: %w", err)
		}
		blockFirst := cur.nextFirst
		cur.block++
		cur.nextFirst += rec.NumRows()
		err = cur.blk.appendRecord(rec, cur.used)
		rec.Release()
		if err != nil {
			return err
		}
		// The rows before the partition, then those superseded or WHERE drops.
		skip := min(cur.skip, cur.blk.n)
		cur.blk.shift(skip)
		cur.skip = 0
		if cur.filter.active() {
			if _, err := cur.filter.apply(cur.blk, 0, blockFirst+int64(skip)); err != nil {
				return err
			}
		}
		cur.r = 0
		if cur.agg, err = aggInputFor(cur.c, cur.blk); err != nil {
			return err
		}
		if len(cur.c.args) > 0 && !cur.c.fn.isAggregate() {
			if cur.val, err = cur.c.args[0].eval(cur.blk.cols, cur.blk.n); err != nil {
				return err
			}
		}
		if cur.r >= cur.blk.n {
			return cur.next()
		}
		if !first && !sameKeys(cur.blk, cur.r, cur.prev, 0, cur.order) {
			cur.group++
		}
	} else if !first && !sameKeys(cur.blk, cur.r, cur.blk, cur.r-1, cur.order) {
		cur.group++
	}
	cur.pos++
	if !sameKeys(cur.blk, cur.r, cur.keyRow, 0, cur.part) {
		cur.done = true
		return nil
	}
	if cur.rangeCol >= 0 {
		v := cur.blk.cols[cur.rangeCol]
		cur.keyNull = v.isNull(cur.r)
		switch v.kind {
		case kindFloat:
			cur.fkey = v.floats[cur.r]
		case kindString: // no offsets on strings: only NULL-ness matters
		default:
			cur.key = v.ints[cur.r]
		}
	}
	return nil
}

// appendRow appends row r of src to dst.
func appendRow(dst, src *vector, r int) {
	null := src.isNull(r)
	if null && dst.nulls == nil {
		dst.nulls = make([]bool, dst.len())
	}
	switch src.kind {
	case kindFloat:
		dst.floats = append(dst.floats, src.floats[r])
	case kindString:
		dst.strs = append(dst.strs, src.strs[r])
	default:
		dst.ints = append(dst.ints, src.ints[r])
	}
	if dst.nulls != nil {
		dst.nulls = append(dst.nulls, null)
	}
}

// cursorEval evaluates one cursor call over a big partition, slice by slice.
type cursorEval struct {
	c               *call
	start, end, nth *partCursor
	// nthNext is nth_value's cursor one row past nth, where its value is
	// when EXCLUDE CURRENT ROW takes out a row before it.
	nthNext *partCursor
	// nthPast is nth_value's cursor at its row when EXCLUDE GROUP or
	// TIES takes the current row's peers out of the frame: n rows into
	// the frame not counting them, which moves back when a peer group
	// has fewer rows in the frame than the one before.
	nthPast *partCursor
	order   []int
	st      aggState
	fsum    exactSum
	// min and max: a monotonic deque, the extreme first (with an
	// UNBOUNDED PRECEDING start, just the extreme).
	dq               extremeDeque
	last             *vector // last_value: the last row the end cursor passed
	group            int64   // the current row's peer group
	pos              int64   // the current row's partition position
	started          bool
	budget           *columnar.Budget
	rangeDesc, nullF bool   // the first ORDER BY key's direction and NULLS FIRST
	frame            *frame // the call's frame; for cume_dist, its peers
	peerStart        int64  // partition position of the current row's peer group
	rows             int64  // rows in the partition (percent_rank, cume_dist)
	// EXCLUDE GROUP and TIES: cursors over the current row's peer group
	// within the frame, and the aggregate of those rows.
	xs, xe *partCursor
	xst    aggState
	xfsum  exactSum
	curAgg *aggInput // the slice's argument and FILTER (EXCLUDE)
	curVal *vector   // the slice's argument (EXCLUDE TIES, value functions)
	pieces *pieceEval
	shift  *partCursor // lag, lead: at the row offset rows away
}

type cursorEntry struct {
	pos int64
	v   *vector
}

// newCursorEval opens the cursors of c at the partition starting at
// source row start.
// rows is the partition's row count, needed by percent_rank and cume_dist.
func newCursorEval(p *plan, g *windowGroup, c *call, src *columnar.Container, part, order []int, start int64, keyRow *input, rows int64, filter rowFilter, budget *columnar.Budget) (*cursorEval, error) {
	e := &cursorEval{c: c, order: order, budget: budget, pos: -1, frame: &c.frame, rows: rows}
	e.dq.budget = budget
	if len(g.order) > 0 {
		e.rangeDesc, e.nullF = g.order[0].desc, g.order[0].nullsFirst
	}
	info := c.fn.info()
	switch {
	case info.cursors == 0:
		return e, nil // the peer group's start is all rank, dense_rank and percent_rank need
	case info.family == famShift:
		var err error
		e.shift, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget)
		return e, err
	case info.peerFrame:
		e.frame = &frame{mode: modeGroups, start: bound{kind: boundUnboundedPreceding}, end: bound{kind: boundCurrentRow}}
	}
	var err error
	if e.start, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
		return nil, err
	}
	if e.end, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
		e.close()
		return nil, err
	}
	if excludePieces(c) {
		e.pieces = &pieceEval{}
		pe := e.pieces
		curs := []**partCursor{&pe.leftEnd}
		if c.fn == fnFirstValue {
			curs = append(curs, &pe.rightStart)
		}
		if c.frame.exclude != excludeCurrentRow {
			curs = append(curs, &pe.peerEnd)
		}
		for _, cur := range curs {
			if *cur, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
				e.close()
				return nil, err
			}
		}
		pe.left.budget, pe.right.budget = budget, budget
		return e, nil
	}
	if x := c.frame.exclude; x == excludeGroup || x == excludeTies {
		if e.xs, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
			e.close()
			return nil, err
		}
		if e.xe, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
			e.close()
			return nil, err
		}
		e.xst.reset()
	}
	if c.fn == fnNthValue && !c.argNil {
		if e.nth, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
			e.close()
			return nil, err
		}
		extra := &e.nthNext
		if x := c.frame.exclude; x == excludeGroup || x == excludeTies {
			extra = &e.nthPast
		}
		if c.frame.exclude != excludeNoOthers {
			if *extra, err = openCursor(p, c, src, part, order, start, keyRow, filter, budget); err != nil {
				e.close()
				return nil, err
			}
		}
	}
	e.st.reset()
	return e, nil
}

func (e *cursorEval) close() {
	for _, cur := range []*partCursor{e.start, e.end, e.nth, e.nthNext, e.nthPast, e.xs, e.xe, e.shift} {
		if cur != nil {
			cur.close()
		}
	}
	e.dq.release()
	if e.pieces != nil {
		e.pieces.close()
	}
}

// slice computes the results of rows [from, to) of in, rows of a slice of
// the big partition whose row 0 is partition position partPos; in holds
// at least one row before from unless from is the partition's first row.
func (e *cursorEval) slice(in *input, from, to int, partPos int64, mem memory.Allocator) (arrow.Array, error) {
	c := e.c
	out := resultVector(c, to-from)
	if c.frame.exclude != excludeNoOthers {
		a, err := aggInputFor(c, in)
		if err != nil {
			return nil, err
		}
		e.curAgg = a
		if len(c.args) > 0 && !c.fn.isAggregate() {
			if e.curVal, err = c.args[0].eval(in.cols, in.n); err != nil {
				return nil, err
			}
		}
	}
	for r := from; r < to; r++ {
		pos := partPos + int64(r)
		if e.started && pos != e.pos+1 {
			return nil, fmt.Errorf("%w: cursor of select item %q at row %d, slice at %d", ErrInternal, c.alias, e.pos+1, pos)
		}
		if e.started && !sameKeys(in, r, in, r-1, e.order) {
			e.group++
			e.peerStart = pos
		}
		e.started, e.pos = true, pos
		if e.start != nil {
			if err := e.advance(in, r); err != nil {
				return nil, err
			}
		}
		if err := e.write(out, r-from, r); err != nil {
			return nil, err
		}
	}
	return out.toArrow(mem), nil
}

// advance moves the cursors to the frame of row r of in (the current row).
func (e *cursorEval) advance(in *input, r int) error {
	// The end first: rows it passes at or after the start enter the frame.
	for !e.end.done && e.inFrameEnd(in, r) {
		switch {
		case e.pieces != nil: // rows the end passes go to the right piece
			if err := e.pieces.enter(e.c, e.end, &e.pieces.right, &e.pieces.rightLast); err != nil {
				return err
			}
		case e.end.pos >= e.start.pos:
			if err := e.enter(e.end); err != nil {
				return err
			}
		}
		if err := e.end.next(); err != nil {
			return err
		}
	}
	for !e.start.done && e.beforeFrameStart(in, r) {
		if e.start.pos < e.end.pos && e.pieces == nil {
			e.leave(e.start)
		}
		if err := e.start.next(); err != nil {
			return err
		}
	}
	if e.pieces != nil {
		return e.advancePieces()
	}
	if e.xs != nil {
		// The excluded peers in the frame: [max(peer start, frame start),
		// min(peer end, frame end)), monotonic like the frame.
		for !e.xe.done && e.xe.group <= e.group && e.xe.pos < e.end.pos {
			if e.xe.pos >= e.xs.pos {
				addRow(e.xe.agg, e.xe.r, &e.xst, &e.xfsum, 1)
			}
			if err := e.xe.next(); err != nil {
				return err
			}
		}
		for !e.xs.done && (e.xs.group < e.group || e.xs.pos < e.start.pos) {
			if e.xs.pos < e.xe.pos {
				addRow(e.xs.agg, e.xs.r, &e.xst, &e.xfsum, -1)
			}
			if err := e.xs.next(); err != nil {
				return err
			}
		}
	}
	if e.nth != nil {
		if err := e.nth.moveTo(e.start.pos+e.c.nth-1, e.end.pos); err != nil {
			return err
		}
	}
	if e.nthNext != nil {
		if err := e.nthNext.moveTo(e.start.pos+e.c.nth, e.end.pos); err != nil {
			return err
		}
	}
	return nil
}

// moveTo moves the cursor forward to partition position target, or to
// limit if that is nearer, or to the partition's end.
func (cur *partCursor) moveTo(target, limit int64) error {
	for !cur.done && cur.pos < target && cur.pos < limit {
		if err := cur.next(); err != nil {
			return err
		}
	}
	return nil
}

// back moves the cursor back d rows within its block, and reports
// whether they all were in it. Its peer group and RANGE key are then
// stale: only a cursor that reads values by position may move back.
func (cur *partCursor) back(d int64) bool {
	if cur.blk.n == 0 || int64(cur.r) < d {
		return false
	}
	cur.r -= int(d)
	cur.pos -= d
	cur.done = false
	return true
}

// copyFrom puts cur at o's row, o's block copied into cur's and cur's
// reader where o's stands. Both are cursors of the same call over the
// same partition.
func (cur *partCursor) copyFrom(o *partCursor) error {
	if err := cur.br.Seek(o.block); err != nil {
		return fmt.Errorf("windower: reread partition: %w", err)
	}
	for _, b := range []struct{ dst, src *input }{{cur.blk, o.blk}, {cur.prev, o.prev}} {
		b.dst.reset()
		for i, v := range b.src.cols {
			if v != nil {
				b.dst.cols[i].appendVector(v)
			}
		}
		b.dst.n = b.src.n
	}
	cur.r, cur.skip, cur.block, cur.nextFirst = o.r, o.skip, o.block, o.nextFirst
	cur.pos, cur.group, cur.done = o.pos, o.group, o.done
	cur.keyNull, cur.key, cur.fkey = o.keyNull, o.key, o.fkey
	var err error
	if cur.agg, err = aggInputFor(cur.c, cur.blk); err != nil {
		return err
	}
	if len(cur.c.args) > 0 && !cur.c.fn.isAggregate() {
		cur.val, err = cur.c.args[0].eval(cur.blk.cols, cur.blk.n)
	}
	return err
}

// rangeCompare compares the RANGE key of the cursor's row with bound b's
// target for the current row (its key plus or minus the offset, or
// PostgreSQL's special case of infinities, floatTarget): <0 before it, 0
// equal, >0 after, in the ORDER BY direction. isStart says whether b is
// the frame's start. A NULL cursor key sorts where NULLs go.
func (e *cursorEval) rangeCompare(cur *partCursor, in *input, r int, b *bound, isStart bool) int {
	v := in.cols[cur.rangeCol]
	if cur.keyNull {
		if e.nullF {
			return -1
		}
		return 1
	}
	sign := boundSign(b)
	var cmp int
	if v.kind == kindFloat {
		cmp = compareFloat(cur.fkey, floatTarget(v.floats[r], b.foff, sign, e.rangeDesc, isStart))
	} else {
		t, frac, inf := b.rangeTarget(v.ints[r], directed(sign, e.rangeDesc))
		cmp = cmpTarget(cur.key, t, frac, inf)
	}
	if e.rangeDesc {
		cmp = -cmp
	}
	return cmp
}

// boundSign is -1 for PRECEDING and 1 for FOLLOWING.
func boundSign(b *bound) int64 {
	if b.kind == boundPreceding {
		return -1
	}
	return 1
}

// inFrameEnd reports whether the end cursor's row is inside the current
// row's frame end (so the cursor must move past it).
func (e *cursorEval) inFrameEnd(in *input, r int) bool {
	f := e.frame
	b := &f.end
	cur := e.end
	switch b.kind {
	case boundUnboundedFollowing:
		return true
	case boundUnboundedPreceding:
		return false
	}
	if f.mode == modeRows {
		var off int64
		switch b.kind {
		case boundPreceding:
			off = -b.off
		case boundFollowing:
			off = b.off
		}
		return cur.pos <= addClamp(e.pos, off)
	}
	rangeNull := f.mode == modeRange && cur.rangeCol >= 0 && in.cols[cur.rangeCol].isNull(r)
	if b.kind == boundCurrentRow || f.mode == modeGroups || rangeNull {
		var off int64
		if f.mode == modeGroups && b.kind != boundCurrentRow {
			off = boundSign(b) * b.off
		}
		return cur.group <= addClamp(e.group, off)
	}
	// RANGE offset, non-NULL current key: rows up to key+offset, never NULLs.
	if cur.keyNull {
		return e.nullF // leading NULLs are passed (and left again by the start)
	}
	return e.rangeCompare(cur, in, r, b, false) <= 0
}

// beforeFrameStart reports whether the start cursor's row is before the
// current row's frame start.
func (e *cursorEval) beforeFrameStart(in *input, r int) bool {
	f := e.frame
	b := &f.start
	cur := e.start
	switch b.kind {
	case boundUnboundedPreceding:
		return false
	case boundUnboundedFollowing:
		return true
	}
	if f.mode == modeRows {
		var off int64
		switch b.kind {
		case boundPreceding:
			off = -b.off
		case boundFollowing:
			off = b.off
		}
		return cur.pos < addClamp(e.pos, off)
	}
	rangeNull := f.mode == modeRange && cur.rangeCol >= 0 && in.cols[cur.rangeCol].isNull(r)
	if b.kind == boundCurrentRow || f.mode == modeGroups || rangeNull {
		var off int64
		if f.mode == modeGroups && b.kind != boundCurrentRow {
			off = boundSign(b) * b.off
		}
		return cur.group < addClamp(e.group, off)
	}
	if cur.keyNull {
		return e.nullF
	}
	return e.rangeCompare(cur, in, r, b, true) < 0
}

// enter adds the cursor's row to the frame state.
func (e *cursorEval) enter(cur *partCursor) error {
	c := e.c
	if c.fn == fnLastValue {
		e.last = rowOf(cur.val, cur.r)
		return nil
	}
	if !c.fn.isAggregate() {
		return nil
	}
	a := cur.agg
	if !a.included(cur.r) {
		return nil
	}
	switch {
	case functions[c.fn].extremum && e.frame.start.kind == boundUnboundedPreceding:
		// Rows never leave: the best so far is the extreme.
		if best := e.dq.front(); best == nil || beats(a, cur.r, best) {
			e.dq.entries = append(e.dq.entries[:0], cursorEntry{pos: cur.pos, v: oneRow(a, cur.r)})
			e.dq.head = 0
		}
	case functions[c.fn].extremum:
		return e.dq.push(c, a, cur.r, cur.pos)
	default:
		addRow(a, cur.r, &e.st, &e.fsum, 1)
	}
	return nil
}

// leave takes the cursor's row out of the frame state.
func (e *cursorEval) leave(cur *partCursor) {
	c := e.c
	if !c.fn.isAggregate() {
		return
	}
	a := cur.agg
	if !a.included(cur.r) {
		return
	}
	switch {
	case functions[c.fn].extremum:
		e.dq.expire(cur.pos + 1)
	default:
		addRow(a, cur.r, &e.st, &e.fsum, -1)
	}
}

// addRow adds (sign 1) or removes (sign -1) row r of a, if included, to
// the state of a count, sum or avg; float sums go to fsum.
func addRow(a *aggInput, r int, st *aggState, fsum *exactSum, sign int) {
	if !a.included(r) {
		return
	}
	switch {
	case a.kind == kindFloat:
		st.cnt += int64(sign)
		if a.fn != fnCount {
			fsum.add(a.floats[r], sign)
		}
	case sign > 0:
		a.add(st, r)
	default:
		a.remove(st, r)
	}
}

// excluded returns the frame's state without the rows EXCLUDE takes out
// for the current row, row r of the slice.
func (e *cursorEval) excluded(r int) (*aggState, *exactSum) {
	st := e.st
	fsum := &exactSum{}
	fsum.addSum(&e.fsum, 1)
	x := e.c.frame.exclude
	if x == excludeGroup || x == excludeTies {
		st.cnt -= e.xst.cnt
		var b uint64
		st.lo, b = bits.Sub64(st.lo, e.xst.lo, 0)
		st.hi -= e.xst.hi + int64(b)
		fsum.addSum(&e.xfsum, -1)
	}
	inFrame := e.pos >= e.start.pos && e.pos < e.end.pos
	switch {
	case x == excludeCurrentRow && inFrame:
		addRow(e.curAgg, r, &st, fsum, -1)
	case x == excludeTies && inFrame:
		addRow(e.curAgg, r, &st, fsum, 1)
	}
	return &st, fsum
}

// write stores the current row's result as out[i].
func (e *cursorEval) write(out *vector, i, r int) error {
	switch functions[e.c.fn].family {
	case famShift:
		return e.writeShift(out, i)
	case famPeers:
		e.writePeers(out, i)
		return nil
	}
	if e.pieces != nil {
		e.writePieces(out, i, r)
		return nil
	}
	empty := e.start.pos >= e.end.pos || e.start.done
	if e.nthPast != nil {
		return e.writeNthPastPeers(out, i, r, empty)
	}
	if functions[e.c.fn].family == famValue {
		e.writeValue(out, i, empty)
		return nil
	}
	return e.writeAggregate(out, i, r, empty)
}

// writeShift stores lag or lead of the current row, reading ahead with
// the shift cursor.
func (e *cursorEval) writeShift(out *vector, i int) error {
	c := e.c
	target := e.pos + c.offset
	if c.fn == fnLag {
		target = e.pos - c.offset
	}
	for target >= 0 && !e.shift.done && e.shift.pos < target {
		if err := e.shift.next(); err != nil {
			return err
		}
	}
	switch {
	case target >= 0 && !e.shift.done && e.shift.pos == target:
		copyRow(out, i, e.shift.val, e.shift.r)
	case c.deflt != nil:
		copyRow(out, i, c.deflt, 0)
	default:
		out.nulls[i] = true
	}
	return nil
}

// writePeers stores rank, dense_rank, percent_rank or cume_dist of the
// current row.
func (e *cursorEval) writePeers(out *vector, i int) {
	switch e.c.fn {
	case fnRank:
		out.ints[i] = e.peerStart + 1
	case fnDenseRank:
		out.ints[i] = e.group + 1
	case fnPercentRank:
		if e.rows > 1 {
			out.floats[i] = float64(e.peerStart) / float64(e.rows-1)
		}
	case fnCumeDist:
		out.floats[i] = float64(e.end.pos) / float64(e.rows)
	}
}

// writeValue stores first_value, last_value or nth_value of the current
// row's frame, which is empty if empty is set.
func (e *cursorEval) writeValue(out *vector, i int, empty bool) {
	c := e.c
	switch {
	case empty:
		out.nulls[i] = true
	case c.fn == fnFirstValue:
		copyRow(out, i, e.start.val, e.start.r)
	case c.fn == fnLastValue:
		if e.last == nil {
			out.nulls[i] = true
			return
		}
		copyRow(out, i, e.last, 0)
	default: // nth_value
		// The nth row of the frame, or with EXCLUDE CURRENT ROW the one
		// after it if the current row is among the first n.
		cur, at := e.nth, e.start.pos+c.nth-1
		if e.nthNext != nil && e.pos >= e.start.pos && e.pos <= at {
			cur, at = e.nthNext, at+1
		}
		if cur == nil || cur.done || cur.pos != at || cur.pos >= e.end.pos {
			out.nulls[i] = true
			return
		}
		copyRow(out, i, cur.val, cur.r)
	}
}

// writeNthPastPeers stores nth_value of the current row's frame (row r of
// the slice) with EXCLUDE GROUP or TIES. The frame is [S, E) and the
// current row's peers in it [X0, X1) (the xs and xe cursors); what is
// left of it, in order, is [S, X0), the current row itself with TIES,
// then [X1, E). So the nth row is at S+n-1 while that is before X0, else
// past the peers: at S+n-1 plus the peers taken out, never before the
// nth cursor, and at most that many rows past it.
func (e *cursorEval) writeNthPastPeers(out *vector, i, r int, empty bool) error {
	if empty {
		out.nulls[i] = true
		return nil
	}
	n, s, end := e.c.nth, e.start.pos, e.end.pos
	x0, x1 := e.xs.pos, e.xe.pos
	if x1 <= x0 || x0-s >= n { // no peer in the frame before its nth row
		e.writeValue(out, i, false)
		return nil
	}
	k := n - (x0 - s) // the kth row from X1 on
	if e.c.frame.exclude == excludeTies && e.pos >= s && e.pos < end {
		if k == 1 {
			copyRow(out, i, e.curVal, r)
			return nil
		}
		k--
	}
	at := x1 + k - 1
	if at >= end {
		out.nulls[i] = true
		return nil
	}
	cur := e.nthPast
	if cur.pos <= at || !cur.back(cur.pos-at) {
		// From the nearer of the nth and peer-end cursors, both at or
		// before at, when cur is past at or a block or more behind them.
		from := e.nth
		if e.xe.pos > from.pos {
			from = e.xe
		}
		if cur.pos > at || from.pos-cur.pos > int64(cur.blk.n) {
			if err := cur.copyFrom(from); err != nil {
				return err
			}
		}
	}
	if err := cur.moveTo(at, end); err != nil {
		return err
	}
	if cur.done || cur.pos != at {
		return fmt.Errorf("%w: nth_value cursor of select item %q at row %d, want %d", ErrInternal, e.c.alias, cur.pos, at)
	}
	copyRow(out, i, cur.val, cur.r)
	return nil
}

// writeAggregate stores the aggregate of the current row's frame (row r
// of the slice), which is empty if empty is set.
func (e *cursorEval) writeAggregate(out *vector, i, r int, empty bool) error {
	c := e.c
	if empty {
		a := &aggInput{fn: c.fn, kind: kindInt}
		var s aggState
		s.reset()
		a.write(out, i, &s)
		return nil
	}
	st, fsum := &e.st, &e.fsum
	if c.frame.exclude != excludeNoOthers {
		st, fsum = e.excluded(r)
	}
	switch {
	case functions[c.fn].extremum:
		best := e.dq.front()
		if best == nil {
			out.nulls[i] = true
			return nil
		}
		copyRow(out, i, best, 0)
	case len(c.args) > 0 && c.args[0].kind == kindFloat && c.fn != fnCount:
		if st.cnt == 0 {
			out.nulls[i] = true
			return nil
		}
		s := fsum.value()
		if fsum.overflows(s) {
			return overflowError(c)
		}
		if c.fn == fnAvg {
			s /= float64(st.cnt)
		}
		out.floats[i] = s
	default:
		a := &aggInput{fn: c.fn, kind: kindInt}
		a.write(out, i, st)
		if a.overflow {
			return fmt.Errorf("%w: sum of select item %q", ErrOverflow, c.alias)
		}
	}
	return nil
}

// valueInput presents a one-row vector as an aggregate input.
func valueInput(f fn, v *vector) *aggInput {
	return &aggInput{fn: f, kind: v.kind, ints: v.ints, floats: v.floats, strs: v.strs}
}

// exactSum is a float sum that adds and removes values without rounding
// error: the sum of the finite values is kept as non-overlapping partials
// (Shewchuk's algorithm, as in Python's math.fsum) and rounded once when
// read. Infinities and NaN are counted apart, as math.fsum keeps them: in
// the partials an infinity would turn the others into NaN, which never
// cancel and grow the partials by one a value. The sum is NaN with a NaN
// or with infinities of both signs, else the infinity there is, as a
// plain float sum of the same values.
//
// Values of 2^512 and more in magnitude are kept apart too, scaled by
// 2^-512 (exactly: the scaled value is at least 1), so that no addition
// in either set of partials can overflow, whatever the values added and
// removed before: a frame of huge values that does not overflow sums
// exactly, and one that does is infinite (overflows).
type exactSum struct {
	partials             []float64 // values under 2^512 in magnitude
	huge                 []float64 // the others, scaled by 2^-512
	posInf, negInf, nans int
	scratch              []float64 // value's, with huge partials
}

// hugeValue is where exactSum's huge values start, and their scale.
const hugeValue = 0x1p512

// add adds x (sign 1) or removes it (sign -1), having added it before.
func (s *exactSum) add(x float64, sign int) {
	switch {
	case x != x:
		s.nans += sign
		return
	case math.IsInf(x, 1):
		s.posInf += sign
		return
	case math.IsInf(x, -1):
		s.negInf += sign
		return
	}
	if sign < 0 {
		x = -x
	}
	if math.Abs(x) >= hugeValue {
		s.huge = addPartial(s.huge, x/hugeValue)
		return
	}
	s.partials = addPartial(s.partials, x)
}

// addPartial adds x to the non-overlapping partials ps, smallest first,
// without rounding error.
func addPartial(ps []float64, x float64) []float64 {
	i := 0
	for _, y := range ps {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			ps[i] = lo
			i++
		}
		x = hi
	}
	return append(ps[:i], x)
}

// addSum adds (sign 1) or removes (sign -1) the values t holds.
func (s *exactSum) addSum(t *exactSum, sign int) {
	for _, p := range t.partials {
		s.add(p, sign)
	}
	for _, p := range t.huge {
		s.huge = addPartial(s.huge, float64(sign)*p)
	}
	s.posInf += sign * t.posInf
	s.negInf += sign * t.negInf
	s.nans += sign * t.nans
}

// overflows reports whether v, the sum's value, is past float8's range
// while every value in the sum is finite (aggState.overflows).
func (s *exactSum) overflows(v float64) bool {
	return s.posInf == 0 && s.negInf == 0 && s.nans == 0 && v-v != 0
}

func (s *exactSum) value() float64 {
	switch {
	case s.nans > 0 || (s.posInf > 0 && s.negInf > 0):
		return math.NaN()
	case s.posInf > 0:
		return math.Inf(1)
	case s.negInf > 0:
		return math.Inf(-1)
	}
	ps := s.partials
	if len(s.huge) > 0 {
		// The huge values unscaled: each partial is at most about their
		// sum, so this overflows (to an infinity or NaN) only when the
		// sum is at the edge of float8's range or past it.
		ps = append(s.scratch[:0], s.partials...)
		for _, p := range s.huge {
			ps = addPartial(ps, p*hugeValue)
		}
		s.scratch = ps
	}
	return roundPartials(ps)
}

// roundPartials returns the sum of the non-overlapping partials ps,
// smallest first, rounded once.
func roundPartials(ps []float64) float64 {
	n := len(ps)
	if n == 0 {
		return 0
	}
	hi := ps[n-1]
	for j := n - 2; j >= 0; j-- {
		x, y := hi, ps[j]
		hi = x + y
		if lo := y - (hi - x); lo != 0 {
			break
		}
	}
	return hi
}
