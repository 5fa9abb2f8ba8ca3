package windower

import (
	"context"
	"errors"
	"fmt"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"io"
	"path/filepath"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
)

// streamSorted evaluates p (one window group whose keys are plain
// columns) over src, whose rows are in (partition, order) order, and
// writes the result as a container under tmp. filters are applied to the
// rows as they are read.
func streamSorted(ctx context.Context, p *plan, src *columnar.Container, filters []predicate, tmp string, o Options, st *Stats) (string, error) {
	g := p.groups[0]
	var used []int
	for c, u := range p.usedCols {
		if u {
			used = append(used, c)
		}
	}
	var partCols []int
	for _, k := range g.partition {
		partCols = append(partCols, k.expr.col)
	}
	whole := wholeCalls(g)
	halo, haloErr := bigPartitionHalo(g, whole)
	// Evaluating the buffer's rows takes about half the grant; the buffer
	// itself (plus one input block), the reader and the writer the rest.
	perRow := p.memoryPerRow() + 9*int64(len(used))
	if len(filters) > 0 {
		perRow += 8 // the row's source row
	}
	blockRows := src.Manifest().BlockRows
	var orderCols []int
	for _, k := range g.order {
		orderCols = append(orderCols, k.expr.col)
	}
	// Cursor calls over a big partition hold a block per cursor: leave room.
	var cursorMem int64
	for _, out := range p.outputs {
		if c := out.call; c != nil && cursorCall(c, whole) {
			n := int64(c.fn.info().cursors)
			switch {
			case excludePieces(c):
				n += 3 // the left piece's end, the right piece's start, the peer end
			case c.frame.exclude == excludeGroup || c.frame.exclude == excludeTies:
				n += 2
			}
			cursorMem += n * cursorBytes(p, c, partCols, orderCols, filters, blockRows)
		}
	}
	block := maxBlockBytes([]*columnar.Container{src}, used) // the reader's
	bufRows := int((o.Budget.Limit() - o.Budget.InUse() - cursorMem - block) / 2 / perRow)
	if bufRows < 1024 || bufRows < 4*(halo.before+halo.after+1) {
		return "", fmt.Errorf("%w: a %d-byte grant buffers only %d rows (%d bytes a row, input blocks of up to %d bytes)",
			ErrGrantTooSmall, o.Budget.Limit(), max(bufRows, 0), perRow, block)
	}
	buf, reserved, err := reserveBuffer(p, bufRows+blockRows, o.Budget)
	if err != nil {
		return "", err
	}
	defer o.Budget.Release(reserved)

	outDir := filepath.Join(tmp, "result")
	w, err := columnar.Create(outDir, columnar.WriterOptions{Table: "windower", Projection: "result", ID: "result",
		Schema: p.outSchema, Allocator: o.Budget, Compression: columnar.CompressionLZ4, BlockRows: spillBlockRows(p.rowBytes(), o.Budget.Limit())})
	if err != nil {
		return "", fmt.Errorf("windower: result container: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()

	eo := o
	eo.InputSorted = true
	rowNumberCols := make([]bool, len(p.outputs))
	for i, out := range p.outputs {
		rowNumberCols[i] = out.call != nil && out.call.fn == fnRowNumber
	}
	// emit evaluates rows [0, n) of the buffer as complete partitions (or,
	// with big, as a slice of one big partition whose rows before the
	// buffer number partPos) and writes result rows [from, to).
	limit := p.limit
	stop := false
	positional := map[int]*call{} // calls evaluated from row positions over a big partition, by output
	for i, out := range p.outputs {
		if out.call != nil && !whole[out.call] && positionalCall(out.call) {
			positional[i] = out.call
		}
	}
	cursored := map[int]*call{} // calls evaluated with cursors over a big partition, by output
	for i, out := range p.outputs {
		if out.call != nil && cursorCall(out.call, whole) {
			cursored[i] = out.call
		}
	}
	var cursors map[int]*cursorEval // the big partition's cursor calls, by output
	closeCursors := func() {
		for _, e := range cursors {
			e.close()
		}
		cursors = nil
	}
	defer closeCursors()
	var bigFacts *partitionFacts      // the big partition's row count and picked rows
	var bigConsts map[int]*vector     // whole-partition results of the big partition, by output
	var carries map[int]*runningCarry // running aggregates of the big partition, by output
	// sliceEnd returns where a slice of a big partition in buffer rows
	// [from, end) stops: before the rows whose frames reach past end.
	sliceEnd := func(end, from int) (int, error) {
		to := end - halo.after
		if to <= from {
			return 0, fmt.Errorf("%w: a %d-row buffer does not hold a slice and its halo", ErrInternal, buf.n)
		}
		return to, nil
	}
	// sliceKeep returns how many rows of the buffer a slice that wrote
	// rows up to to is done with: all but the halo before the next row.
	sliceKeep := func(to int) (int, error) {
		keep := to - halo.before
		if keep <= 0 {
			return 0, fmt.Errorf("%w: a %d-row buffer does not hold a slice and its halo", ErrInternal, buf.n)
		}
		return keep, nil
	}
	written := 0 // rows at the buffer's start a big partition's slices have written
	// leave folds the first k rows of the buffer, which a big partition's
	// slices are done with, into the running aggregates.
	leave := func(k int) error {
		for _, rc := range carries {
			if err := rc.add(buf.view(0, k), k); err != nil {
				return err
			}
		}
		return nil
	}
	// Source rows of the buffer's rows, for a first pass or cursors over a
	// big partition to start where it does: without filters, row 0's is
	// bufSrc and the rest follow; with filters each row's is in srcRows.
	var bufSrc, srcNext int64
	var srcRows []int64
	// The buffer is full at bufRows rows, or earlier when its strings
	// (and their copies in the results) pass what bufRows rows of the
	// input's average take: sorted input clusters long strings together.
	var strHeld int64
	strCap := p.stringCap(bufRows)
	minRows := 4 * (halo.before + halo.after + 1)
	shift := func(k int) {
		strHeld -= stringBytes(buf, 0, k)
		buf.shift(k)
		bufSrc += int64(k)
		if len(filters) > 0 {
			srcRows = srcRows[:copy(srcRows, srcRows[k:])]
		}
	}
	srcOf0 := func() int64 {
		if len(filters) > 0 {
			return srcRows[0]
		}
		return bufSrc
	}
	emit := func(n, from, to int, partPos int64, big bool) error {
		if stop {
			return nil
		}
		res, err := evaluate(ctx, p, buf.view(0, n), eo)
		if err != nil {
			return err
		}
		defer res.Close()
		if !big {
			st.Partitions += res.stats.Partitions
		}
		if limit > 0 && st.Rows+int64(to-from) >= limit {
			to = from + int(limit-st.Rows)
			stop = true
		}
		cols := make([]arrow.Array, len(res.cols))
		for i, c := range res.cols {
			// Copy: result columns may alias the buffer, which is
			// overwritten next, and the writer keeps partial blocks.
			sl := array.NewSlice(c, int64(from), int64(to))
			cp, err := array.Concatenate([]arrow.Array{sl}, o.Budget)
			sl.Release()
			if err != nil {
				for _, d := range cols[:i] {
					d.Release()
				}
				return fmt.Errorf("windower: copy result: %w", err)
			}
			cols[i] = cp
			if rowNumberCols[i] && partPos != 0 {
				v := cols[i].(*array.Int64).Int64Values()
				shifted := make([]int64, len(v))
				for k, x := range v {
					shifted[k] = x + partPos
				}
				cols[i].Release()
				cols[i] = wrapFixed(c.DataType(), int64Bytes(shifted), nil, len(shifted))
			}
		}
		if big {
			for i, v := range bigConsts {
				cols[i].Release()
				cols[i] = broadcast(v, to-from).toArrow(o.Budget)
			}
			for i, e := range cursors {
				v, err := e.slice(buf.view(0, n), from, to, partPos, o.Budget)
				if err != nil {
					for _, c := range cols {
						c.Release()
					}
					return err
				}
				cols[i].Release()
				cols[i] = v
			}
			for i, c := range positional {
				v, err := positionalSlice(c, buf.view(0, n), from, to, partPos, bigFacts, o.Budget)
				if err != nil {
					for _, c := range cols {
						c.Release()
					}
					return err
				}
				cols[i].Release()
				cols[i] = v
			}
			for i, rc := range carries {
				var combined arrow.Array
				var err error
				if rc.sequential() {
					combined, err = rc.recompute(buf.view(0, n), from, to, o.Budget)
				} else {
					combined, err = rc.apply(cols[i], o.Budget)
				}
				if err != nil {
					for _, c := range cols {
						c.Release()
					}
					return err
				}
				cols[i].Release()
				cols[i] = combined
			}
		}
		rec := array.NewRecordBatch(p.outSchema, cols, int64(to-from))
		for _, c := range cols {
			c.Release()
		}
		err = w.Write(rec)
		rec.Release()
		st.Rows += int64(to - from)
		return err
	}

	br, err := src.OpenColumns(used)
	if err != nil {
		return "", fmt.Errorf("windower: read sorted input: %w", err)
	}
	defer br.Close()
	lastStart := 0        // first row of the last (possibly incomplete) partition in the buffer
	var bigPos int64 = -1 // >= 0 while in a big partition: its rows before the buffer
	scanned := 0          // rows of the buffer already checked for partition starts
	partEnd := -1         // in a big partition: where it ends in the buffer, once seen
	eof := false
	for (!eof || buf.n > 0) && !stop {
		if !eof {
			rec, err := br.Next()
			switch {
			case errors.Is(err, io.EOF):
				eof = true
			case err != nil:
				return "", fmt.Errorf("windower: read sorted input: %w", err)
			default:
				start := buf.n
				err = buf.appendRecord(rec, used)
				rec.Release()
				if err != nil {
					return "", fmt.Errorf("windower: read sorted input: %w", err)
				}
				if len(filters) > 0 {
					keep, err := evalPredicates(filters, buf.view(start, buf.n).cols, buf.n-start)
					if err != nil {
						return "", fmt.Errorf("windower: where: %w", err)
					}
					buf.compactTail(start, keep)
					for _, k := range keep {
						if k {
							srcRows = append(srcRows, srcNext)
						}
						srcNext++
					}
				}
				strHeld += stringBytes(buf, start, buf.n)
			}
		}
		// Find partition starts among the new rows.
		for i := max(scanned, 1); i < buf.n; i++ {
			if !equalRowsCols(buf, partCols, i-1, i) {
				if bigPos >= 0 {
					if partEnd < 0 {
						partEnd = i
					}
				} else {
					lastStart = i
				}
			}
		}
		scanned = buf.n
		full := buf.n >= bufRows || (strHeld > strCap && buf.n >= minRows)
		if !full && !eof {
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		switch {
		case bigPos >= 0:
			// A slice of a big partition.
			end := buf.n
			if partEnd >= 0 {
				end = partEnd
			}
			from := written
			if partEnd >= 0 || eof {
				if err := emit(end, from, end, bigPos, true); err != nil {
					return "", err
				}
				shift(end)
				bigPos, partEnd, lastStart, scanned, written = -1, -1, 0, 0, 0
				bigConsts, carries, bigFacts = nil, nil, nil
				closeCursors()
				continue
			}
			to, err := sliceEnd(end, from)
			if err != nil {
				return "", err
			}
			if err := emit(end, from, to, bigPos, true); err != nil {
				return "", err
			}
			keep, err := sliceKeep(to)
			if err != nil {
				return "", err
			}
			if err := leave(keep); err != nil {
				return "", err
			}
			shift(keep)
			bigPos += int64(keep)
			written = to - keep
			scanned = buf.n
		case eof:
			if buf.n > 0 {
				if err := emit(buf.n, 0, buf.n, 0, false); err != nil {
					return "", err
				}
			}
			buf.reset()
			strHeld = 0
		case lastStart > 0:
			if err := emit(lastStart, 0, lastStart, 0, false); err != nil {
				return "", err
			}
			shift(lastStart)
			lastStart, scanned = 0, buf.n
		default:
			// One partition fills the buffer.
			if haloErr != nil {
				return "", fmt.Errorf("%w: a partition of more than %d rows does not fit the %d-byte grant: %v",
					ErrUnsupported, buf.n, o.Budget.Limit(), haloErr)
			}
			st.Partitions++
			partEnd = -1
			needRows := false // percent_rank and cume_dist divide by the partition's rows
			for _, c := range cursored {
				needRows = needRows || c.fn.info().partitionRows
			}
			if len(whole) > 0 || len(positional) > 0 || needRows {
				var calls, pick []*call
				var outs []int
				for i, out := range p.outputs {
					if out.call != nil && whole[out.call] {
						calls = append(calls, out.call)
						outs = append(outs, i)
					}
					if positional[i] != nil {
						pick = append(pick, out.call)
					}
				}
				vals, facts, err := partitionPass(ctx, p, src, used, partCols, srcOf0(), buf, calls, pick, filters, o.Budget)
				if err != nil {
					return "", err
				}
				bigFacts = facts
				bigConsts = map[int]*vector{}
				for k, i := range outs {
					bigConsts[i] = vals[k]
				}
			}
			if len(cursored) > 0 {
				cursors = map[int]*cursorEval{}
				for i, c := range cursored {
					var rows int64 = -1
					if bigFacts != nil {
						rows = bigFacts.rows
					}
					e, err := newCursorEval(p, g, c, src, partCols, orderCols, srcOf0(), buf, rows, filters, o.Budget)
					if err != nil {
						return "", err
					}
					cursors[i] = e
				}
			}
			carries = map[int]*runningCarry{}
			for i, out := range p.outputs {
				if out.call != nil && !whole[out.call] && runningCall(out.call) {
					carries[i] = &runningCarry{c: out.call}
				}
			}
			end := buf.n
			to, err := sliceEnd(end, 0)
			if err != nil {
				return "", err
			}
			if err := emit(end, 0, to, 0, true); err != nil {
				return "", err
			}
			keep, err := sliceKeep(to)
			if err != nil {
				return "", err
			}
			if err := leave(keep); err != nil {
				return "", err
			}
			shift(keep)
			bigPos = int64(keep)
			written = to - keep
			scanned = buf.n
		}
	}
	m, err := w.Commit()
	if err != nil {
		return "", fmt.Errorf("windower: commit result: %w", err)
	}
	committed = true
	st.SpilledBytes += containerBytes(m)
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	return outDir, nil
}

// halo is how far, in rows, the frames of a window group reach before and
// after the current row.
type halo struct {
	before, after int
}

// bigPartitionHalo returns the group's halo, or an error naming the first
// call whose frame is not bounded in rows (and so needs its whole
// partition at once).
func bigPartitionHalo(g *windowGroup, whole map[*call]bool) (halo, error) {
	var h halo
	for _, c := range g.calls {
		if whole[c] {
			continue // computed by a pass of its own
		}
		if cursorCall(c, whole) {
			h.before = max(h.before, 1) // the row before tells where a peer group starts
			continue
		}
		if positionalCall(c) {
			if err := positionalHalo(c, &h); err != nil {
				return h, err
			}
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
		if runningCall(c) {
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
		// What is left: min, max and value functions over frames with
		// EXCLUDE, which slices serve for bounded ROWS frames only.
		if f.mode != modeRows || f.exclude == excludeGroup || f.exclude == excludeTies {
			return h, fmt.Errorf("select item %q: over a partition larger than the grant, nth_value with EXCLUDE works only as EXCLUDE CURRENT ROW in a bounded ROWS frame", c.alias)
		}
		for _, b := range []bound{f.start, f.end} {
			switch b.kind {
			case boundUnboundedPreceding, boundUnboundedFollowing:
				return h, fmt.Errorf("select item %q: over a partition larger than the grant, nth_value with EXCLUDE works only as EXCLUDE CURRENT ROW in a bounded ROWS frame", c.alias)
			case boundPreceding, boundFollowing:
				if b.off > maxHalo {
					return h, fmt.Errorf("select item %q: frame offset %d is too large to evaluate in slices", c.alias, b.off)
				}
				if b.kind == boundPreceding {
					h.before = max(h.before, int(b.off))
				} else {
					h.after = max(h.after, int(b.off))
				}
			}
		}
	}
	return h, nil
}

// equalRowsCols reports whether rows a and b of the buffer agree on cols.
func equalRowsCols(in *input, cols []int, a, b int) bool {
	for _, c := range cols {
		if compareValues(in.cols[c], a, b, false) != 0 {
			return false
		}
	}
	return true
}

func int64Bytes(v []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
}

// runningCall reports whether c is a running count, sum, avg, min or max
// over ROWS (frame from UNBOUNDED PRECEDING to CURRENT ROW or an offset a
// halo holds; nothing excluded): over a big partition each slice's
// results are combined with the aggregate of the rows before the buffer
// (runningCarry).
func runningCall(c *call) bool {
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
	return f.mode == modeRows && f.end.kind != boundUnboundedFollowing && f.end.off <= maxHalo

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
		out.ints = make([]int64, n)
		for i, x := range src[:n] {
			out.ints[i] = x + rc.cnt
		}
	case fnSum:
		src := col.(*array.Int64)
		out.ints, out.nulls = make([]int64, n), make([]bool, n)
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
					v.nulls = make([]bool, n)
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
