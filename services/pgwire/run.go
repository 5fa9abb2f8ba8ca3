package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower"
)

// columns returns the columns a statement answers with (nil: no rows).
// A window query's are the windower's result types over the table's
// schema, read anew (a Describe promises them before the job).
func (s *session) columns(ctx context.Context, st *stmt, pt *portal) ([]column, error) {
	if st.fetch != nil && !st.fetch.move {
		c, err := s.namedCursor(st.fetch.name)
		if err != nil {
			return nil, err
		}
		return c.cols, nil
	}
	if st.window == nil {
		return st.cols, nil
	}
	if pt.cols != nil {
		return pt.cols, nil
	}
	out, _, err := s.windowColumns(ctx, st, true)
	if err != nil {
		return nil, err
	}
	pt.cols = out
	return out, nil
}

// checkWindow checks a window query before its job against its table's
// kept schema (schemaCache), and against the schema read anew if the kept
// one refuses it: an unknown column or function is reported without a job.
func (s *session) checkWindow(ctx context.Context, st *stmt) error {
	_, kept, err := s.windowColumns(ctx, st, false)
	if err != nil && kept {
		_, _, err = s.windowColumns(ctx, st, true)
	}
	return err
}

// windowColumns works out a window query's result columns over its
// table's schema without data (an empty run); kept says the schema was
// kept (schemaCache), not read anew.
func (s *session) windowColumns(ctx context.Context, st *stmt, fresh bool) (out []column, kept bool, err error) {
	cols, kept, err := s.srv.schemas.columns(ctx, s.srv.sched, st.window.Table, fresh)
	if err != nil {
		return nil, kept, err
	}
	schema, err := columnar.ArrowSchema(cols)
	if err != nil {
		return nil, kept, &pgError{code: "XX000", msg: err.Error()}
	}
	res, err := windower.RunRecords(ctx, st.window, schema, nil, windower.Options{Threads: 1, Grant: windower.MinGrant})
	if err != nil {
		return nil, kept, jobError(&jobFailedError{reason: err.Error()})
	}
	defer res.Close()
	out, err = arrowColumns(res.Schema())
	return out, kept, err
}

func arrowColumns(schema *arrow.Schema) ([]column, error) {
	var out []column
	for _, f := range schema.Fields() {
		oid, err := oidOf(f.Type)
		if err != nil {
			return nil, &pgError{code: "0A000", msg: fmt.Sprintf("column %q: %v", f.Name, err)}
		}
		out = append(out, column{f.Name, oid})
	}
	return out, nil
}

// run executes a planned statement and sends its rows and completion.
// describe sends the RowDescription first (the simple protocol).
func (s *session) run(ctx context.Context, st *stmt, pt *portal, formats []int16, maxRows int64, describe bool) error {
	switch {
	case st.empty:
		s.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	case st.window != nil:
		return s.runWindow(ctx, st, pt, formats, maxRows, describe)
	case st.change != nil:
		return s.runChange(ctx, st)
	case st.copy != nil:
		return s.runCopy(ctx, st.copy)
	case st.declare != nil:
		return s.runDeclare(ctx, st.declare)
	case st.fetch != nil:
		return s.runFetch(ctx, st.fetch, pt, formats, maxRows, describe)
	case st.closeCursor != nil:
		return s.runClose(st.closeCursor)
	case st.txnOp != 0:
		return s.runTransaction(st)
	}
	if st.apply != nil {
		before := make(map[string]string, len(reported))
		for _, r := range reported {
			before[r.key] = s.settings[r.key]
		}
		st.apply(s)
		// A reported setting that changed is reported again, as
		// PostgreSQL does (drivers follow client_encoding, DateStyle ...).
		for _, r := range reported {
			if v := s.settings[r.key]; v != before[r.key] {
				s.be.Send(&pgproto3.ParameterStatus{Name: r.name, Value: v})
			}
		}
	}
	if st.cols == nil {
		s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(st.tag)})
		s.srv.queries.WithLabelValues("ok").Inc()
		return nil
	}
	if describe {
		s.sendRowDescription(st.cols, nil)
	}
	var buf []byte
	vals := make([][]byte, len(st.cols))
	offs := make([]int, len(st.cols))
	for _, row := range st.rows {
		buf = buf[:0]
		for i, v := range row {
			if v == nil {
				offs[i] = -1
				continue
			}
			offs[i] = len(buf)
			var err error
			if buf, err = appendValue(buf, st.cols[i].oid, formatOf(formats, i), v); err != nil {
				return &pgError{code: "XX000", msg: err.Error()}
			}
		}
		fillValues(vals, buf, offs)
		s.be.Send(&pgproto3.DataRow{Values: vals})
	}
	tag := st.tag
	if tag == "SELECT" {
		tag += " " + strconv.Itoa(len(st.rows))
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// fillValues cuts buf into the row's values: offs holds each value's
// start, -1 for NULL.
func fillValues(vals [][]byte, buf []byte, offs []int) {
	for i, o := range offs {
		if o < 0 {
			vals[i] = nil
			continue
		}
		end := len(buf)
		for _, n := range offs[i+1:] {
			if n >= 0 {
				end = n
				break
			}
		}
		vals[i] = buf[o:end:end]
	}
}

// cursor is a window query's result being sent: the open container,
// its block reader and the block being sent, where it stands in it, and
// what is left of OFFSET and LIMIT. An Execute with a row limit leaves it
// open in the portal (PortalSuspended) for the next Execute.
type cursor struct {
	ct         *columnar.Container
	br         *columnar.BatchReader
	rec        arrow.RecordBatch // the block being sent; nil between blocks
	row        int               // next row of rec
	cols       []column
	dir        string
	skip, left int64 // OFFSET rows still to skip; LIMIT rows still to send (-1: all)
	sent       int64
	release    func() // removes a result fetched from a store
}

func (c *cursor) close() {
	if c.rec != nil {
		c.rec.Release()
		c.rec = nil
	}
	if c.br != nil {
		c.br.Close()
		c.br = nil
	}
	if c.ct != nil {
		c.ct.Close()
		c.ct = nil
	}
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// runWindow has the scheduler run the window query, then streams the
// result container's rows block by block, flushing each block to the
// client: the result is never all in memory. maxRows > 0 sends at most
// that many rows and keeps the rest for the next Execute.
func (s *session) runWindow(ctx context.Context, st *stmt, pt *portal, formats []int16, maxRows int64, describe bool) error {
	if pt.cur == nil {
		cur, err := s.windowResult(ctx, st, pt)
		if err != nil {
			return err
		}
		pt.cur = cur
		if describe {
			s.sendRowDescription(cur.cols, nil)
		}
	}
	cur := pt.cur
	done, err := s.pump(ctx, cur, formats, maxRows, s.sendDataRow)
	if err != nil {
		cur.close()
		pt.cur, pt.done = nil, true
		return err
	}
	if !done {
		s.be.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	cur.close()
	pt.done = true
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT " + strconv.FormatInt(cur.sent, 10))})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// sendDataRow sends a row through the session's one DataRow (Send encodes
// it at once), not a new one a row.
func (s *session) sendDataRow(vals [][]byte) {
	s.row.Values = vals
	s.be.Send(&s.row)
	s.row.Values = nil
}

// windowResult checks a window query (and works out its columns) before
// the job, has the scheduler run it, and opens its result.
func (s *session) windowResult(ctx context.Context, st *stmt, pt *portal) (*cursor, error) {
	if pt.cols == nil { // not described: the result's columns are sent
		if err := s.checkWindow(ctx, st); err != nil {
			return nil, err
		}
	}
	wctx, stop := s.watchPeer(ctx)
	dir, release, err := s.srv.sched.runWindow(wctx, st.window)
	ended := wctx.Err() != nil // cancelled, timed out or the client gone
	stop()
	if err != nil {
		s.srv.schemas.forget(st.window.Table)
		if ended {
			return nil, err
		}
		return nil, jobError(err)
	}
	cur, err := openCursor(dir, st)
	if err != nil {
		release()
		return nil, err
	}
	cur.release = release
	if pt.cols != nil && !sameColumns(cur.cols, pt.cols) {
		cur.close()
		return nil, &pgError{code: "XX000", msg: "the result's columns differ from those described"}
	}
	return cur, nil
}

func openCursor(dir string, st *stmt) (*cursor, error) {
	ct, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		return nil, &pgError{code: "58030", msg: fmt.Sprintf("open result %s: %v", dir, err)}
	}
	cols, err := arrowColumns(ct.Schema())
	if err != nil {
		ct.Close()
		return nil, err
	}
	idx := make([]int, len(cols))
	for i := range idx {
		idx[i] = i
	}
	br, err := ct.OpenColumns(idx)
	if err != nil {
		ct.Close()
		return nil, &pgError{code: "58030", msg: fmt.Sprintf("read result %s: %v", dir, err)}
	}
	return &cursor{ct: ct, br: br, cols: cols, dir: dir, skip: st.offset, left: st.limit}, nil
}

// flushBytes is how much pump sends between flushes within a block: the
// client gets its first rows while the rest of the block is encoded
// (PostgreSQL flushes every 8KiB).
const flushBytes = 64 << 10

// pump passes rows of cur to emit (each value in its format, nil for
// NULL; the slices are reused for the next row), at most maxRows (0:
// all), flushing what was sent every flushBytes of values and after each
// block; done when the result (or LIMIT) is used up. A nil emit skips
// the rows (MOVE).
func (s *session) pump(ctx context.Context, cur *cursor, formats []int16, maxRows int64, emit func([][]byte)) (done bool, err error) {
	var buf []byte
	vals := make([][]byte, len(cur.cols))
	offs := make([]int, len(cur.cols))
	encs := make([]encoder, len(cur.cols))
	var encRec arrow.RecordBatch // the block encs were made for
	var n, pending int64
	for cur.left != 0 {
		if maxRows > 0 && n == maxRows {
			return false, nil
		}
		if cur.rec == nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if err := s.be.Flush(); err != nil {
				return false, err
			}
			rec, err := cur.br.Next()
			if errors.Is(err, io.EOF) {
				return true, nil
			}
			if err != nil {
				return false, &pgError{code: "58030", msg: fmt.Sprintf("read result %s: %v", cur.dir, err)}
			}
			rows := rec.NumRows()
			if cur.skip >= rows {
				cur.skip -= rows
				rec.Release()
				continue
			}
			cur.rec, cur.row = rec, int(cur.skip)
			cur.skip = 0
		}
		if cur.row >= int(cur.rec.NumRows()) {
			cur.rec.Release()
			cur.rec = nil
			continue
		}
		r := cur.row
		if emit != nil {
			if encRec != cur.rec {
				for c := range cur.cols {
					encs[c] = newEncoder(cur.rec.Column(c), cur.cols[c].oid, formatOf(formats, c))
				}
				encRec = cur.rec
			}
			buf = buf[:0]
			for c := range cur.cols {
				col := cur.rec.Column(c)
				if col.IsNull(r) {
					offs[c] = -1
					continue
				}
				offs[c] = len(buf)
				if enc := encs[c]; enc != nil {
					buf = enc(buf, r)
					continue
				}
				if buf, err = appendValue(buf, cur.cols[c].oid, formatOf(formats, c), arrowValue(col, r)); err != nil {
					return false, &pgError{code: "XX000", msg: err.Error()}
				}
			}
			fillValues(vals, buf, offs)
			emit(vals)
			if pending += int64(len(buf)); pending >= flushBytes {
				if err := s.be.Flush(); err != nil {
					return false, err
				}
				pending = 0
			}
		}
		cur.row++
		cur.sent++
		n++
		if cur.left > 0 {
			cur.left--
		}
	}
	return true, nil
}

func sameColumns(a, b []column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].oid != b[i].oid {
			return false
		}
	}
	return true
}
