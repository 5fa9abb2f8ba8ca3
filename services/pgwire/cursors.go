package main

// SQL cursors: DECLARE name [NO SCROLL] CURSOR [WITH HOLD] FOR SELECT ...,
// FETCH [FORWARD] n | ALL FROM name, MOVE, CLOSE name | ALL. A cursor's
// window query runs at DECLARE (so its errors are DECLARE's); its result
// container stays open, and each FETCH streams the next rows from where
// the last one stopped, one block of the result in memory at a time:
// what psycopg's server-side cursors (and JDBC's fetch size, through
// portals) need to read a large result in pieces.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"
)

type declareStmt struct {
	name  string
	hold  bool  // WITH HOLD: outlives the transaction block's COMMIT
	query *stmt // the window query
}

type fetchStmt struct {
	name  string
	count int64 // rows; 0: ALL
	move  bool  // MOVE: skip the rows instead of sending them
}

type closeStmt struct{ name string } // "": CLOSE ALL

// namedCursor is a declared cursor: its result, open where the last
// FETCH left it (nil once used up), and its columns.
type namedCursor struct {
	cur   *cursor
	cols  []column
	hold  bool
	inTxn bool // declared in the transaction block still open
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
	case d.Options&cursorOptScroll != 0:
		return nil, notSupported("SCROLL cursors (strata's cursors read forward only: NO SCROLL)")
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
	return &stmt{tag: "DECLARE CURSOR", declare: &declareStmt{name: d.Portalname, hold: d.Options&cursorOptHold != 0, query: q}}, nil
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
		return &pgError{code: pe.code, msg: pe.msg, pos: pe.pos + int32(off), where: pe.where}
	}
	return err
}

func planFetch(f *pg.FetchStmt) (*stmt, error) {
	what := "FETCH"
	if f.Ismove {
		what = "MOVE"
	}
	if f.Direction != pg.FetchDirection_FETCH_FORWARD || f.HowMany < 0 {
		return nil, &pgError{code: "55000", msg: fmt.Sprintf("cursor %q can only scan forward: strata's cursors are NO SCROLL (%s [FORWARD] n | ALL)", f.Portalname, what)}
	}
	n := f.HowMany
	if n == 1<<63-1 { // FETCH ALL
		n = 0
	} else if n == 0 {
		return nil, notSupported(what + " 0 (the current row again)")
	}
	return &stmt{tag: what, fetch: &fetchStmt{name: f.Portalname, count: n, move: f.Ismove}}, nil
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
	s.cursors[d.name] = &namedCursor{cur: cur, cols: cur.cols, hold: d.hold, inTxn: s.txn == 'T'}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("DECLARE CURSOR")})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// runFetch sends (or, for MOVE, skips) the cursor's next rows. describe
// sends the RowDescription first (the simple protocol). An Execute's row
// limit (maxRows > 0) below what the FETCH asks for sends that many and
// suspends the portal, pt keeping the count for the next Execute.
func (s *session) runFetch(ctx context.Context, f *fetchStmt, pt *portal, formats []int16, maxRows int64, describe bool) error {
	c, err := s.namedCursor(f.name)
	if err != nil {
		return err
	}
	if describe && !f.move {
		s.sendRowDescription(c.cols, nil)
	}
	want := f.count // 0: all
	if want > 0 {
		want -= pt.fetched
	}
	suspend := false
	if maxRows > 0 && (want == 0 || want > maxRows) {
		want, suspend = maxRows, true
	}
	var n int64
	if c.cur != nil && (want > 0 || f.count == 0) {
		emit := s.sendDataRow
		if f.move {
			emit = nil
		}
		before := c.cur.sent
		done, err := s.pump(ctx, c.cur, formats, want, emit)
		n = c.cur.sent - before
		if err != nil {
			c.close()
			delete(s.cursors, f.name)
			return err
		}
		if done {
			c.close() // used up: later FETCHes return no rows
			suspend = false
		}
	}
	pt.fetched += n
	if suspend && (f.count == 0 || pt.fetched < f.count) {
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
