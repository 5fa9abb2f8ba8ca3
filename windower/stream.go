package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
)

// A sorted stream evaluates one window group over a container whose rows
// are in (partition, order) order: the rows stream through a buffer,
// whose complete partitions are evaluated in memory as it fills, and a
// partition larger than the buffer is evaluated in slices (bigPartition).

// streamSorted evaluates p (one window group whose keys are plain
// columns) over src, whose rows are in (partition, order) order, and
// writes the result as a container under tmp. filter drops rows as they
// are read.
func streamSorted(ctx context.Context, p *plan, src *columnar.Container, filter rowFilter, tmp string, o Options, st *Stats) (string, error) {
	s, err := newSortedStream(ctx, p, src, filter, o, st)
	if err != nil {
		return "", err
	}
	defer s.close()
	// A result repeating a string (first_value, min...) may put src's
	// longest string on every row of a block: the blocks are sized for it.
	for _, c := range p.repeatedStringArgs() {
		longest, err := longestInColumn(src, c)
		if err != nil {
			return "", err
		}
		s.repeatBytes += longest
	}
	outDir := filepath.Join(tmp, "result")
	s.outBlockRows = spillBlockRows(p.rowBytes()+s.repeatBytes, o.Budget.Limit())
	// Uncompressed, as the runs: read by the next stage or the Result, then
	// removed.
	s.w, err = columnar.Create(outDir, columnar.WriterOptions{Table: "windower", Projection: "result", ID: "result",
		Schema: p.outSchema, Allocator: o.Budget, Compression: columnar.CompressionNone, BlockRows: s.outBlockRows,
		NoSync: true}) // spilled: made again if lost
	if err != nil {
		return "", fmt.Errorf("windower: result container: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			s.w.Abort()
		}
	}()
	if err := s.run(); err != nil {
		return "", err
	}
	m, err := s.w.Commit()
	if err != nil {
		return "", fmt.Errorf("windower: commit result: %w", err)
	}
	committed = true
	st.SpilledBytes += m.CompressedBytes()
	st.PeakBytes = max(st.PeakBytes, o.Budget.Peak())
	return outDir, nil
}

// longestInColumn reads string column col of src, a block at a time, and
// returns the length of its longest value.
func longestInColumn(src *columnar.Container, col int) (int64, error) {
	r, err := src.OpenColumn(col)
	if err != nil {
		return 0, fmt.Errorf("windower: read %s: %w", src.Dir(), err)
	}
	defer r.Close()
	r.ReuseBuffers() // the lengths are read and the block released before the next
	var most int64
	for {
		arr, err := r.Next()
		if errors.Is(err, io.EOF) {
			return most, nil
		}
		if err != nil {
			return 0, fmt.Errorf("windower: read %s: %w", src.Dir(), err)
		}
		if a, ok := arr.(*array.String); ok {
			offs := a.ValueOffsets()
			for i := range a.Len() {
				most = max(most, int64(offs[i+1]-offs[i]))
			}
		}
		arr.Release()
	}
}

// sortedStream is the state of streamSorted.
type sortedStream struct {
	ctx    context.Context
	p      *plan
	g      *windowGroup
	src    *columnar.Container
	filter rowFilter
	o      Options
	eo     Options // evaluation of the buffer's rows: sorted input
	st     *Stats
	w      *columnar.Writer
	// outBlockRows is the rows of the result's blocks, and outRows the
	// rows written to it so far.
	outBlockRows int
	outRows      int64

	used, partCols, orderCols []int
	whole                     map[*call]bool
	halo                      halo
	haloErr                   error // why a partition larger than the buffer cannot be sliced (a bug)
	reach                     int   // the most rows a call's halo may reach (else cursors)
	// positional and cursored are the calls evaluated from row positions
	// and with cursors over a big partition, by output.
	positional, cursored map[int]*call
	rowNumberCols        []bool // outputs that are row_number

	buf      *input
	reserved int64
	// The buffer is full at bufRows rows, or earlier, with at least
	// minRows rows, when its strings (and their copies in the results)
	// pass strCap, what bufRows rows of the input's average take: sorted
	// input clusters long strings together.
	bufRows         int
	minRows         int
	strHeld, strCap int64
	// rowBytes is what a buffered row takes, with its evaluation, and
	// blockBytes the largest input block the reader holds.
	rowBytes, blockBytes int64
	// The results that repeat a string (repeatedStringArgs) take up to
	// repeatBytes a row, the longest strings of their arguments in the
	// source (a value from a cursor can come from outside the buffer):
	// the buffer is full early, and a big partition's slice ends early,
	// when its rows would take more than strCap.
	repeatBytes int64
	// Source rows of the buffer's rows, for a first pass or cursors over
	// a big partition to start where it does: without a filter, row 0's
	// is bufSrc and the rest follow; with one each row's is in srcRows.
	bufSrc, srcNext int64
	srcRows         []int64

	lastStart int  // first row of the last (possibly incomplete) partition in the buffer
	scanned   int  // rows of the buffer already checked for partition starts
	stop      bool // LIMIT reached
	big       *bigPartition
}

// bigPartition is the state of a partition larger than the buffer while
// it streams through in slices.
type bigPartition struct {
	pos     int64 // its rows before the buffer
	end     int   // where it ends in the buffer, once seen; else -1
	written int   // rows at the buffer's start its slices have written
	facts   *partitionFacts
	consts  map[int]*vector       // whole-partition results, by output
	carries map[int]*runningCarry // running aggregates, by output
	cursors map[int]*cursorEval   // cursor calls, by output
}

func (b *bigPartition) close() {
	for _, e := range b.cursors {
		e.close()
	}
	b.cursors = nil
}

// newSortedStream plans the stream of p over src and reserves its buffer.
func newSortedStream(ctx context.Context, p *plan, src *columnar.Container, filter rowFilter, o Options, st *Stats) (*sortedStream, error) {
	g := p.groups[0]
	s := &sortedStream{ctx: ctx, p: p, g: g, src: src, filter: filter, o: o, eo: o, st: st}
	s.eo.InputSorted = true
	s.used = p.usedColumns()
	for _, k := range g.partition {
		s.partCols = append(s.partCols, k.expr.col)
	}
	for _, k := range g.order {
		s.orderCols = append(s.orderCols, k.expr.col)
	}
	s.rowBytes = p.memoryPerRow() + 9*int64(len(s.used))
	if filter.active() {
		s.rowBytes += 8 // the row's source row
	}
	s.blockBytes = maxBlockBytes([]*columnar.Container{src}, s.used)
	s.whole = wholeCalls(g)
	// A call whose halo would take more than a sixteenth of the buffer
	// (a lag or lead, a ROWS frame's offset, nth_value's n) reads its
	// rows with cursors instead: the buffer must hold four times the
	// halo (halo.minBuffer).
	s.reach = max(min(s.bufferRows(0)/16, maxHalo), 0)
	s.halo, s.haloErr = bigPartitionHalo(g, s.whole, s.reach)
	s.positional, s.cursored = map[int]*call{}, map[int]*call{}
	s.rowNumberCols = make([]bool, len(p.outputs))
	for i, out := range p.outputs {
		c := out.call
		if c == nil {
			continue
		}
		s.rowNumberCols[i] = c.fn == fnRowNumber
		if !s.whole[c] && positionalCall(c, s.reach) {
			s.positional[i] = c
		}
		if cursorCall(c, s.whole, s.reach) {
			s.cursored[i] = c
		}
	}
	if err := s.sizeBuffer(); err != nil {
		return nil, err
	}
	return s, nil
}

// sizeBuffer sizes the buffer to the grant and reserves it. Evaluating
// the buffer's rows takes about half the grant; the buffer itself (plus
// one input block), the reader and the writer the rest.
func (s *sortedStream) sizeBuffer() error {
	p, o := s.p, s.o
	blockRows := s.src.Manifest().BlockRows
	// Cursor calls over a big partition hold a block per cursor: leave room.
	var cursorMem int64
	for _, c := range s.cursored {
		n := int64(c.fn.info().cursors)
		switch {
		case excludePieces(c):
			n += 3 // the left piece's end, the right piece's start, the peer end
		case c.frame.exclude == excludeGroup || c.frame.exclude == excludeTies:
			n += 2 // the peers' start and end
			if c.fn == fnNthValue {
				n++ // the nth row past the peers
			}
		case c.fn == fnNthValue && c.frame.exclude == excludeCurrentRow:
			n++ // the row after the nth
		}
		cursorMem += n * cursorBytes(p, c, s.partCols, s.orderCols, s.filter.where, blockRows)
	}
	s.bufRows = s.bufferRows(cursorMem)
	s.minRows = s.halo.minBuffer()
	if s.bufRows < o.fewestRows() || s.bufRows < s.minRows {
		return fmt.Errorf("%w: a %d-byte grant buffers only %d rows (%d bytes a row, input blocks of up to %d bytes)",
			ErrGrantTooSmall, o.Budget.Limit(), max(s.bufRows, 0), s.rowBytes, s.blockBytes)
	}
	var err error
	s.buf, s.reserved, err = reserveBuffer(p, s.bufRows+blockRows, o.Budget)
	if err != nil {
		return err
	}
	s.strCap = p.stringCap(s.bufRows)
	return nil
}

// bufferRows is the rows the buffer is full at, in the grant left beside
// cursorMem bytes for cursors and the reader's block: half of it holds
// the buffer's rows and the other half their evaluation. A block is
// appended whole, so the buffer holds up to a block's rows beyond that,
// which reserveBuffer reserves too: they are set aside first (a block of
// long strings can be most of a small grant).
func (s *sortedStream) bufferRows(cursorMem int64) int {
	b := s.o.Budget
	slack := int64(s.src.Manifest().BlockRows) * s.p.bufferRowBytes()
	return int((b.Limit() - b.InUse() - cursorMem - s.blockBytes - slack) / 2 / s.rowBytes)
}

func (s *sortedStream) close() {
	if s.big != nil {
		s.big.close()
		s.big = nil
	}
	s.o.Budget.Release(s.reserved)
	s.reserved = 0
}

// run streams the rows of the source through the buffer, evaluating and
// writing them.
func (s *sortedStream) run() error {
	br, err := s.src.OpenColumns(s.used)
	if err != nil {
		return fmt.Errorf("windower: read sorted input: %w", err)
	}
	defer br.Close()
	eof := false
	for (!eof || s.buf.n > 0) && !s.stop {
		if !eof && !s.full() {
			if eof, err = s.fill(br); err != nil {
				return err
			}
		}
		s.scan()
		if !s.full() && !eof {
			continue
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		switch {
		case s.big != nil:
			err = s.continuePartition(eof)
		case eof:
			if s.buf.n > 0 {
				err = s.emit(s.buf.n, 0, s.buf.n)
			}
			s.buf.reset()
			s.strHeld = 0
		case s.lastStart > 0:
			if err = s.emit(s.lastStart, 0, s.lastStart); err == nil {
				s.shift(s.lastStart)
				s.lastStart, s.scanned = 0, s.buf.n
			}
		default:
			err = s.startPartition()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// full reports whether the buffer holds all the rows it may before its
// rows are written: bufRows, or at least minRows whose strings, or the
// strings results repeat over them (repeatBytes a row), pass strCap.
func (s *sortedStream) full() bool {
	strFull := s.strHeld > s.strCap || int64(s.buf.n)*s.repeatBytes > s.strCap
	return s.buf.n >= s.bufRows || (strFull && s.buf.n >= s.minRows)
}

// fill appends the source's next block to the buffer, without the rows
// the filter drops; it reports the end of the source.
func (s *sortedStream) fill(br *columnar.BatchReader) (eof bool, err error) {
	rec, err := br.Next()
	switch {
	case errors.Is(err, io.EOF):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("windower: read sorted input: %w", err)
	}
	buf := s.buf
	start := buf.n
	err = buf.appendRecord(rec, s.used)
	rec.Release()
	if err != nil {
		return false, fmt.Errorf("windower: read sorted input: %w", err)
	}
	if s.filter.active() {
		n := buf.n - start
		keep, err := s.filter.apply(buf, start, s.srcNext)
		if err != nil {
			return false, err
		}
		for i := range n {
			if keep == nil || keep[i] {
				s.srcRows = append(s.srcRows, s.srcNext)
			}
			s.srcNext++
		}
	}
	s.strHeld += stringBytes(buf, start, buf.n)
	return false, nil
}

// scan finds the partition starts among the buffer's new rows: in a big
// partition, where it ends; else where the last partition starts.
func (s *sortedStream) scan() {
	buf := s.buf
	for i := max(s.scanned, 1); i < buf.n; i++ {
		if !equalRowsCols(buf, s.partCols, i-1, i) {
			if s.big != nil {
				if s.big.end < 0 {
					s.big.end = i
				}
			} else {
				s.lastStart = i
			}
		}
	}
	s.scanned = buf.n
}

// shift drops the buffer's first k rows, which are written.
func (s *sortedStream) shift(k int) {
	s.strHeld -= stringBytes(s.buf, 0, k)
	s.buf.shift(k)
	s.bufSrc += int64(k)
	if s.filter.active() {
		s.srcRows = s.srcRows[:copy(s.srcRows, s.srcRows[k:])]
	}
}

// srcOf0 is the source row of the buffer's row 0.
func (s *sortedStream) srcOf0() int64 {
	if s.filter.active() {
		return s.srcRows[0]
	}
	return s.bufSrc
}

// startPartition starts a partition that fills the buffer: a first pass
// over it for its whole-partition and positional calls, cursors, carries,
// then its first slice.
func (s *sortedStream) startPartition() error {
	if s.haloErr != nil {
		return fmt.Errorf("windower: a partition of more than %d rows: %w", s.buf.n, s.haloErr)
	}
	s.st.Partitions++
	b := &bigPartition{end: -1, carries: map[int]*runningCarry{}}
	s.big = b
	needRows := false // percent_rank and cume_dist divide by the partition's rows
	for _, c := range s.cursored {
		needRows = needRows || c.fn.info().partitionRows
	}
	if len(s.whole) > 0 || len(s.positional) > 0 || needRows {
		if err := s.firstPass(b); err != nil {
			return err
		}
	}
	if len(s.cursored) > 0 {
		b.cursors = map[int]*cursorEval{}
		var rows int64 = -1
		if b.facts != nil {
			rows = b.facts.rows
		}
		for i, c := range s.cursored {
			e, err := newCursorEval(s.p, s.g, c, s.src, s.partCols, s.orderCols, s.srcOf0(), s.buf, rows, s.filter, s.o.Budget)
			if err != nil {
				return err
			}
			b.cursors[i] = e
		}
	}
	for i, out := range s.p.outputs {
		if out.call != nil && !s.whole[out.call] && runningCall(out.call, s.reach) {
			b.carries[i] = &runningCarry{c: out.call}
		}
	}
	return s.slice(s.sliceRows())
}

// firstPass reads the big partition once for its whole-partition
// aggregates and its positional calls' facts.
func (s *sortedStream) firstPass(b *bigPartition) error {
	var calls, pick []*call
	var outs []int
	for i, out := range s.p.outputs {
		if out.call != nil && s.whole[out.call] {
			calls = append(calls, out.call)
			outs = append(outs, i)
		}
		if s.positional[i] != nil {
			pick = append(pick, out.call)
		}
	}
	vals, facts, err := partitionPass(s.ctx, s.p, s.src, s.used, s.partCols, s.srcOf0(), s.buf, calls, pick, s.filter, s.o.Budget)
	if err != nil {
		return err
	}
	b.facts = facts
	b.consts = map[int]*vector{}
	for k, i := range outs {
		b.consts[i] = vals[k]
	}
	return nil
}

// continuePartition writes the big partition's next slice, or its last
// one when its end is in the buffer (or the input ends).
func (s *sortedStream) continuePartition(eof bool) error {
	b := s.big
	end := s.buf.n
	if b.end >= 0 {
		end = b.end
	}
	if (b.end < 0 && !eof) || s.sliceRows() < end {
		return s.slice(s.sliceRows())
	}
	if err := s.emitBig(end, b.written, end); err != nil {
		return err
	}
	s.shift(end)
	s.endPartition()
	return nil
}

// sliceRows is how many of the buffer's rows the big partition's next
// slice evaluates: all of them, or fewer when results repeating strings
// (repeatBytes a row) would pass strCap over them; never fewer than the
// halo needs, minRows.
func (s *sortedStream) sliceRows() int {
	if s.repeatBytes == 0 || int64(s.buf.n)*s.repeatBytes <= s.strCap {
		return s.buf.n
	}
	return min(s.buf.n, max(s.minRows, int(s.strCap/s.repeatBytes)))
}

// endPartition forgets the big partition once its last slice is written.
func (s *sortedStream) endPartition() {
	s.big.close()
	s.big = nil
	s.lastStart, s.scanned = 0, 0
}

// slice writes a slice of the big partition from the buffer's first
// unwritten row up to where the halo after it still fits before end, then
// drops the rows the next slice no longer needs, folding them into the
// carries.
func (s *sortedStream) slice(end int) error {
	b := s.big
	to, err := s.halo.sliceEnd(end, b.written, s.buf.n)
	if err != nil {
		return err
	}
	if err := s.emitBig(end, b.written, to); err != nil {
		return err
	}
	keep, err := s.halo.sliceKeep(to, s.buf.n)
	if err != nil {
		return err
	}
	for _, rc := range b.carries {
		if err := rc.add(s.buf.view(0, keep), keep); err != nil {
			return err
		}
	}
	s.shift(keep)
	b.pos += int64(keep)
	b.written = to - keep
	if b.end >= 0 {
		b.end -= keep // a slice short of a partition end in the buffer
	}
	s.scanned = s.buf.n
	return nil
}

// emit evaluates rows [0, n) of the buffer as complete partitions and
// writes result rows [from, to).
func (s *sortedStream) emit(n, from, to int) error {
	return s.write(n, from, to, nil)
}

// emitBig evaluates rows [0, n) of the buffer as a slice of the big
// partition and writes result rows [from, to).
func (s *sortedStream) emitBig(n, from, to int) error {
	return s.write(n, from, to, s.big)
}

func (s *sortedStream) write(n, from, to int, big *bigPartition) error {
	if s.stop {
		return nil
	}
	res, err := evaluate(s.ctx, s.p, s.buf.view(0, n), s.eo)
	if err != nil {
		return err
	}
	defer res.Close()
	if big == nil {
		s.st.Partitions += res.stats.Partitions
	}
	if limit := s.p.limit; limit > 0 && s.st.Rows+int64(to-from) >= limit {
		to = from + int(limit-s.st.Rows)
		s.stop = true
	}
	var partPos int64
	if big != nil {
		partPos = big.pos
	}
	cols := s.resultRows(res, from, to, partPos)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	if big != nil {
		if err := s.bigColumns(cols, n, from, to); err != nil {
			return err
		}
	}
	err = s.writeRows(cols, to-from)
	s.st.Rows += int64(to - from)
	return err
}

// writeRows appends n rows, cols, to the stage's container, encoding
// its columns on up to Options.Threads goroutines. The columns may alias
// the buffer, which is overwritten next: the writer encodes the rows that
// fill its blocks at once, and only the rows it keeps for its next block
// are copied, so no more than a block's rows are held beyond the call.
func (s *sortedStream) writeRows(cols []arrow.Array, n int) error {
	pending := int(s.outRows % int64(s.outBlockRows))
	kept := min((pending+n)%s.outBlockRows, n) // rows left in the writer's next block
	write := func(j int) error {
		arr := cols[j]
		if kept < n {
			done := array.NewSlice(arr, 0, int64(n-kept))
			err := s.w.WriteColumn(j, done)
			done.Release()
			if err != nil {
				return err
			}
		}
		if kept == 0 {
			return nil
		}
		tail := array.NewSlice(arr, int64(n-kept), int64(n))
		cp, err := array.Concatenate([]arrow.Array{tail}, s.o.Budget)
		tail.Release()
		if err != nil {
			return fmt.Errorf("windower: copy result rows: %w", err)
		}
		err = s.w.WriteColumn(j, cp)
		cp.Release()
		return err
	}
	t := min(max(s.o.Threads, 1), len(cols))
	errs := make([]error, t)
	parallelFor(t, func(k int) {
		for j := k; j < len(cols); j += t {
			if err := write(j); err != nil {
				errs[k] = err
				return
			}
		}
	})
	s.outRows += int64(n)
	return errors.Join(errs...)
}

// resultRows returns rows [from, to) of the evaluation's result, as
// slices of its columns. row_number counts the rows of a big partition
// from the slice's first: partPos, its rows before the buffer, is added.
func (s *sortedStream) resultRows(res *Result, from, to int, partPos int64) []arrow.Array {
	cols := make([]arrow.Array, len(res.cols))
	for i, c := range res.cols {
		cols[i] = array.NewSlice(c, int64(from), int64(to))
		if s.rowNumberCols[i] && partPos != 0 {
			v := cols[i].(*array.Int64).Int64Values()
			shifted := make([]int64, len(v))
			for k, x := range v {
				shifted[k] = x + partPos
			}
			cols[i].Release()
			cols[i] = wrapFixed(c.DataType(), int64Bytes(shifted), nil, len(shifted), 1, nil)
		}
	}
	return cols
}

// bigColumns replaces the columns of the calls that see beyond a slice
// of the big partition (rows [0, n) of the buffer, result rows [from,
// to)) with their results: constants of the first pass, cursor and
// positional results, and running aggregates combined with their carry.
func (s *sortedStream) bigColumns(cols []arrow.Array, n, from, to int) error {
	b := s.big
	mem := s.o.Budget
	in := s.buf.view(0, n)
	replace := func(i int, v arrow.Array) {
		cols[i].Release()
		cols[i] = v
	}
	for i, v := range b.consts {
		replace(i, broadcast(v, to-from).toArrow(mem))
	}
	for i, e := range b.cursors {
		v, err := e.slice(in, from, to, b.pos, mem)
		if err != nil {
			return err
		}
		replace(i, v)
	}
	for i, c := range s.positional {
		v, err := positionalSlice(c, in, from, to, b.pos, b.facts, mem)
		if err != nil {
			return err
		}
		replace(i, v)
	}
	for i, rc := range b.carries {
		var v arrow.Array
		var err error
		if rc.sequential() {
			v, err = rc.recompute(in, from, to, mem)
		} else {
			v, err = rc.apply(cols[i], mem)
		}
		if err != nil {
			return err
		}
		replace(i, v)
	}
	return nil
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
