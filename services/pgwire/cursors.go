package main

// SQL cursors: DECLARE name [SCROLL | NO SCROLL] CURSOR [WITH HOLD] FOR
// SELECT ..., FETCH and MOVE in every direction PostgreSQL has (NEXT,
// PRIOR, FIRST, LAST, ABSOLUTE n, RELATIVE n, [FORWARD | BACKWARD] n |
// ALL), CLOSE name | ALL. A cursor's window query runs at DECLARE (so
// its errors are DECLARE's); its result container stays open, and a
// FETCH reads the rows it asks for by their number, one block of the
// result in memory at a time (the block holding the row; the next block
// read when a row falls outside it): what psycopg's server-side cursors
// (and JDBC's fetch size, through portals) need to read a large result
// in pieces, and scrollable cursors to go back. A cursor not declared
// SCROLL moves forward only, as PostgreSQL's over a window query: going
// back is 55000.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"
)

type declareStmt struct {
	name   string
	hold   bool  // WITH HOLD: outlives the transaction block's COMMIT
	scroll bool  // SCROLL: may move backward
	query  *stmt // the window query
}

type fetchStmt struct {
	name  string
	dir   pg.FetchDirection // FORWARD, BACKWARD, ABSOLUTE, RELATIVE
	count int64             // rows, or a row number; fetchAll: ALL
	move  bool              // MOVE: position the cursor, send no rows
}

// fetchAll is FETCH ALL's count (PostgreSQL's FETCH_ALL, LONG_MAX).
const fetchAll = 1<<63 - 1

type closeStmt struct{ name string } // "": CLOSE ALL

// namedCursor is a declared cursor: its result (nil once a forward-only
// cursor has passed the end), its columns, its length and where it
// stands: pos 0 is before the first row, 1..rows on a row, rows+1 after
// the last, as PostgreSQL's portal position.
type namedCursor struct {
	cur    *cursor
	cols   []column
	hold   bool
	inTxn  bool // declared in the transaction block still open
	scroll bool
	rows   int64
	pos    int64
	block  int // the block cur.rec holds (cur.rec nil: none)
}

func (c *namedCursor) close() {
	if c.cur != nil {
		c.cur.close()
		c.cur = nil
	}
}

// The bits of DeclareCursorStmt.Options (PostgreSQL's CURSOR_OPT_*).
const (
	cursorOptBinary = 0x1
	cursorOptScroll = 0x2
	cursorOptHold   = 0x20
)

func (s *session) planDeclare(ctx context.Context, text string, d *pg.DeclareCursorStmt, version int32) (*stmt, error) {
	switch {
	case d.Portalname == "":
		return nil, &pgError{code: "34000", msg: "invalid cursor name: must not be empty"}
	case d.Options&cursorOptBinary != 0:
		return nil, notSupported("DECLARE BINARY CURSOR (ask for binary results in the extended protocol instead)")
	}
	sel := d.Query.GetSelectStmt()
	if sel == nil {
		return nil, notSupported("DECLARE CURSOR for a statement other than SELECT")
	}
	inner, off, ok := afterKeyword(text, "for")
	if !ok {
		return nil, &pgError{code: "42601", msg: "DECLARE CURSOR: no FOR before the query"}
	}
	q, err := s.planSelect(ctx, inner, sel, version)
	if err != nil {
		return nil, shiftPos(err, off)
	}
	if q.window == nil {
		return nil, notSupported("DECLARE CURSOR over a query that reads no table")
	}
	return &stmt{tag: "DECLARE CURSOR", declare: &declareStmt{name: d.Portalname, hold: d.Options&cursorOptHold != 0, scroll: d.Options&cursorOptScroll != 0, query: q}}, nil
}

// afterKeyword returns the text after the first keyword kw (lower case)
// of sql, and where it starts.
func afterKeyword(sql, kw string) (string, int, bool) {
	res, err := pg.Scan(sql)
	if err != nil {
		return "", 0, false
	}
	for _, t := range res.Tokens {
		if t.KeywordKind != pg.KeywordKind_NO_KEYWORD && strings.EqualFold(sql[t.Start:t.End], kw) {
			return sql[t.End:], int(t.End), true
		}
	}
	return "", 0, false
}

// shiftPos moves an error's position in a statement's inner query to
// the statement's text.
func shiftPos(err error, off int) error {
	if pe, ok := err.(*pgError); ok && pe.pos > 0 {
		return &pgError{code: pe.code, msg: pe.msg, pos: pe.pos + int32(off), where: pe.where, hint: pe.hint}
	}
	return err
}

func planFetch(f *pg.FetchStmt) (*stmt, error) {
	tag := "FETCH"
	if f.Ismove {
		tag = "MOVE"
	}
	fs := &fetchStmt{name: f.Portalname, dir: f.Direction, count: f.HowMany, move: f.Ismove}
	// A negative count goes the other way (FORWARD -2 is BACKWARD 2).
	if fs.count < 0 {
		switch fs.dir {
		case pg.FetchDirection_FETCH_FORWARD:
			fs.dir, fs.count = pg.FetchDirection_FETCH_BACKWARD, -fs.count
		case pg.FetchDirection_FETCH_BACKWARD:
			fs.dir, fs.count = pg.FetchDirection_FETCH_FORWARD, -fs.count
		}
	}
	return &stmt{tag: tag, fetch: fs}, nil
}

func (s *session) namedCursor(name string) (*namedCursor, error) {
	c, ok := s.cursors[name]
	if !ok {
		return nil, &pgError{code: "34000", msg: fmt.Sprintf("cursor %q does not exist", name)}
	}
	return c, nil
}

// runDeclare runs the cursor's window query and keeps its result open.
func (s *session) runDeclare(ctx context.Context, d *declareStmt) error {
	if !d.hold && s.txn != 'T' {
		return &pgError{code: "25P01", msg: "DECLARE CURSOR can only be used in transaction blocks (or WITH HOLD)"}
	}
	if _, ok := s.cursors[d.name]; ok {
		return &pgError{code: "42P03", msg: fmt.Sprintf("cursor %q already exists", d.name)}
	}
	cur, err := s.windowResult(ctx, d.query, &portal{stmt: d.query})
	if err != nil {
		return err
	}
	if s.cursors == nil {
		s.cursors = map[string]*namedCursor{}
	}
	rows := max(cur.ct.Rows()-cur.skip, 0)
	if cur.left >= 0 {
		rows = min(rows, cur.left)
	}
	s.cursors[d.name] = &namedCursor{cur: cur, cols: cur.cols, hold: d.hold, inTxn: s.txn == 'T', scroll: d.scroll, rows: rows, block: -1}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("DECLARE CURSOR")})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// runFetch sends (or, for MOVE, passes over) the rows a FETCH asks for
// and moves the cursor, as PostgreSQL's DoPortalRunFetch does. describe
// sends the RowDescription first (the simple protocol). An Execute's
// row limit (maxRows > 0) below what a FETCH FORWARD or BACKWARD asks
// for sends that many and suspends the portal, pt keeping the count for
// the next Execute.
func (s *session) runFetch(ctx context.Context, f *fetchStmt, pt *portal, formats []int16, maxRows int64, describe bool) error {
	c, err := s.namedCursor(f.name)
	if err != nil {
		return err
	}
	fr := &fetchRun{s: s, ctx: ctx, c: c, formats: formats, emit: !f.move, describe: describe && !f.move}
	var n int64
	suspend := false
	switch f.dir {
	case pg.FetchDirection_FETCH_FORWARD, pg.FetchDirection_FETCH_BACKWARD:
		forward := f.dir == pg.FetchDirection_FETCH_FORWARD
		want := f.count
		if want == 0 {
			n, err = fr.current(forward)
			break
		}
		if want != fetchAll {
			want -= pt.fetched
		}
		if maxRows > 0 && want > maxRows {
			want, suspend = maxRows, true
		}
		n, err = fr.run(forward, want, fr.emit)
		if n < want {
			suspend = false // the rows ran out
		}
	case pg.FetchDirection_FETCH_ABSOLUTE:
		n, err = fr.absolute(f.count)
	case pg.FetchDirection_FETCH_RELATIVE:
		n, err = fr.relative(f.count)
	}
	if err != nil {
		if err != errForwardOnly {
			// The result could not be read, or the client went away.
			c.close()
			delete(s.cursors, f.name)
		}
		return err
	}
	if !c.scroll && c.pos > c.rows {
		c.close() // a forward-only cursor never reads its result again
	}
	pt.fetched += n
	if suspend {
		s.be.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	pt.done = true
	tag := "FETCH "
	if f.move {
		tag = "MOVE "
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag + strconv.FormatInt(pt.fetched, 10))})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// fetchRun is one FETCH or MOVE on a cursor.
type fetchRun struct {
	s       *session
	ctx     context.Context
	c       *namedCursor
	formats []int16
	emit    bool // FETCH: send the rows the last step arrives at
	// describe sends the RowDescription as the rows are about to be
	// sent (the simple protocol), after the last step's checks: as
	// PostgreSQL, a FETCH refused sends none.
	describe bool
	vals     [][]byte
	offs     []int
	buf      []byte
}

var errForwardOnly = &pgError{code: "55000", msg: "cursor can only scan forward", hint: "Declare it with SCROLL option to enable backward scan."}

// run moves the cursor up to count rows forward or backward, sending
// each row it arrives at when emit, and returns how many it moved (as
// PostgreSQL's PortalRunSelect): past the last row it stands after the
// end, past the first before the start. A forward-only cursor refuses
// to go backward, even by none.
func (fr *fetchRun) run(forward bool, count int64, emit bool) (int64, error) {
	c := fr.c
	if !forward && !c.scroll {
		return 0, errForwardOnly
	}
	if emit && fr.describe {
		fr.s.sendRowDescription(c.cols, nil)
		fr.describe = false
	}
	var n int64
	for n < count {
		next := c.pos + 1
		if !forward {
			next = c.pos - 1
		}
		if next < 1 {
			c.pos = 0
			break
		}
		if next > c.rows {
			c.pos = c.rows + 1
			break
		}
		if emit {
			if err := fr.send(next); err != nil {
				return n, err
			}
		}
		c.pos = next
		n++
	}
	return n, nil
}

// rewind puts the cursor before its first row; a forward-only cursor
// only when it is there already.
func (fr *fetchRun) rewind() error {
	c := fr.c
	if c.pos == 0 {
		return nil
	}
	if !c.scroll {
		return errForwardOnly
	}
	c.pos = 0
	return nil
}

// absolute is FETCH ABSOLUTE n (FIRST, LAST), PostgreSQL's way: from
// the start or from where the cursor stands, whichever is nearer, or
// from the end for n < 0.
func (fr *fetchRun) absolute(n int64) (int64, error) {
	c := fr.c
	switch {
	case n > 0:
		pos := c.pos // PostgreSQL's portalPos, plus one after the end
		if n-1 <= min(pos, c.rows)/2 {
			if err := fr.rewind(); err != nil {
				return 0, err
			}
			if n > 1 {
				if _, err := fr.run(true, n-1, false); err != nil {
					return 0, err
				}
			}
		} else if n <= pos {
			if _, err := fr.run(false, pos-n+1, false); err != nil {
				return 0, err
			}
		} else if n > pos+1 {
			if _, err := fr.run(true, n-pos-1, false); err != nil {
				return 0, err
			}
		}
		return fr.run(true, 1, fr.emit)
	case n < 0:
		if _, err := fr.run(true, fetchAll, false); err != nil {
			return 0, err
		}
		if n < -1 {
			if _, err := fr.run(false, -n-1, false); err != nil {
				return 0, err
			}
		}
		return fr.run(false, 1, fr.emit)
	}
	if err := fr.rewind(); err != nil {
		return 0, err
	}
	return fr.run(true, 0, fr.emit)
}

// relative is FETCH RELATIVE n: n-1 rows on, the next one returned (n <
// 0: back); RELATIVE 0 is FETCH 0.
func (fr *fetchRun) relative(n int64) (int64, error) {
	switch {
	case n > 0:
		if n > 1 {
			if _, err := fr.run(true, n-1, false); err != nil {
				return 0, err
			}
		}
		return fr.run(true, 1, fr.emit)
	case n < 0:
		if n < -1 {
			if _, err := fr.run(false, -n-1, false); err != nil {
				return 0, err
			}
		}
		return fr.run(false, 1, fr.emit)
	}
	return fr.current(true)
}

// current is FETCH 0 (FORWARD 0, BACKWARD 0, RELATIVE 0): the row the
// cursor stands on again, backing up one and fetching it (so not for a
// forward-only cursor); MOVE 0 says whether there is one.
func (fr *fetchRun) current(forward bool) (int64, error) {
	c := fr.c
	onRow := c.pos > 0 && c.pos <= c.rows
	switch {
	case !fr.emit && onRow:
		return 1, nil
	case !fr.emit:
		return 0, nil
	case onRow:
		if _, err := fr.run(false, 1, false); err != nil {
			return 0, err
		}
		return fr.run(true, 1, true)
	}
	return fr.run(forward, 0, true) // no row: BACKWARD 0 still goes back
}

// send sends row k (1-based) of the cursor's result: the block holding
// it is read unless it is the one held, after what was sent of the last
// block is flushed.
func (fr *fetchRun) send(k int64) error {
	c := fr.c
	cur := c.cur
	if cur == nil {
		return &pgError{code: "XX000", msg: "the cursor's result is closed"}
	}
	r := cur.skip + k - 1 // the row in the result container
	blocks := cur.ct.Manifest().Blocks
	if c.block < 0 || cur.rec == nil || r < blocks[c.block].FirstRow || r >= blocks[c.block].FirstRow+int64(blocks[c.block].Rows) {
		if err := fr.ctx.Err(); err != nil {
			return err
		}
		if err := fr.s.be.Flush(); err != nil {
			return err
		}
		b := sort.Search(len(blocks), func(i int) bool { return blocks[i].FirstRow+int64(blocks[i].Rows) > r })
		if b == len(blocks) {
			return &pgError{code: "XX000", msg: fmt.Sprintf("row %d is not in the result %s", r, cur.dir)}
		}
		if cur.rec != nil {
			cur.rec.Release()
			cur.rec = nil
		}
		rec, err := cur.br.ReadBlock(b)
		if err != nil {
			return &pgError{code: "58030", msg: fmt.Sprintf("read result %s: %v", cur.dir, err)}
		}
		cur.rec, c.block = rec, b
	}
	if fr.vals == nil {
		fr.vals = make([][]byte, len(c.cols))
		fr.offs = make([]int, len(c.cols))
	}
	row := int(r - blocks[c.block].FirstRow)
	fr.buf = fr.buf[:0]
	for i := range c.cols {
		v := arrowValue(cur.rec.Column(i), row)
		if v == nil {
			fr.offs[i] = -1
			continue
		}
		fr.offs[i] = len(fr.buf)
		var err error
		if fr.buf, err = appendValue(fr.buf, c.cols[i].oid, formatOf(fr.formats, i), v); err != nil {
			return &pgError{code: "XX000", msg: err.Error()}
		}
	}
	fillValues(fr.vals, fr.buf, fr.offs)
	fr.s.sendDataRow(fr.vals)
	return nil
}

func (s *session) runClose(c *closeStmt) error {
	if c.name == "" {
		s.closeCursors(func(*namedCursor) bool { return true })
	} else {
		nc, err := s.namedCursor(c.name)
		if err != nil {
			return err
		}
		nc.close()
		delete(s.cursors, c.name)
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("CLOSE CURSOR")})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// closeCursors closes the cursors which drop says to.
func (s *session) closeCursors(drop func(*namedCursor) bool) {
	for name, c := range s.cursors {
		if drop(c) {
			c.close()
			delete(s.cursors, name)
		}
	}
}

// endTransaction ends the transaction block: its cursors are closed but
// those WITH HOLD a COMMIT keeps (a ROLLBACK closes those it declared).
func (s *session) endTransaction(commit bool) {
	s.txn = 'I'
	s.closeCursors(func(c *namedCursor) bool { return !c.hold || (!commit && c.inTxn) })
	for _, c := range s.cursors {
		c.inTxn = false
	}
}
