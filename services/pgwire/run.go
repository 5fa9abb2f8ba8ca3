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
// schema, worked out without data (an empty run), so an unknown column
// or function is reported before any job.
func (s *session) columns(ctx context.Context, st *stmt, pt *portal) ([]column, error) {
	if st.window == nil {
		return st.cols, nil
	}
	if pt.cols != nil {
		return pt.cols, nil
	}
	tables, err := s.srv.sched.tables(ctx, st.window.Table)
	if err != nil {
		return nil, jobError(err)
	}
	var cols []columnar.ColumnSchema
	found := false
	for _, t := range tables {
		if t.name == st.window.Table {
			cols, found = t.columns, true
		}
	}
	if !found {
		return nil, &pgError{code: "42P01", msg: fmt.Sprintf("relation %q does not exist", st.window.Table)}
	}
	if cols == nil {
		return nil, &pgError{code: "58030", msg: fmt.Sprintf("cannot read the schema of table %q from the data directory", st.window.Table)}
	}
	schema, err := columnar.ArrowSchema(cols)
	if err != nil {
		return nil, &pgError{code: "XX000", msg: err.Error()}
	}
	res, err := windower.RunRecords(ctx, st.window, schema, nil, windower.Options{Threads: 1, Grant: windower.MinGrant})
	if err != nil {
		return nil, jobError(&jobFailedError{reason: err.Error()})
	}
	defer res.Close()
	out, err := arrowColumns(res.Schema())
	if err != nil {
		return nil, err
	}
	pt.cols = out
	return out, nil
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
		return s.runWindow(ctx, st, pt, formats, describe)
	}
	if st.apply != nil {
		st.apply(s)
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
	for _, row := range st.rows {
		buf = buf[:0]
		offs := make([]int, 0, len(row))
		for i, v := range row {
			if v == nil {
				offs = append(offs, -1)
				continue
			}
			start := len(buf)
			var err error
			if buf, err = appendValue(buf, st.cols[i].oid, formatOf(formats, i), v); err != nil {
				return &pgError{code: "XX000", msg: err.Error()}
			}
			offs = append(offs, start)
			_ = start
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

// runWindow has the scheduler run the window query, then streams the
// result container's rows block by block, flushing each block to the
// client: the result is never all in memory.
func (s *session) runWindow(ctx context.Context, st *stmt, pt *portal, formats []int16, describe bool) error {
	if !describe && pt.cols == nil {
		// Executed without Describe: the client knows the columns already
		// (or does not care); still check the query before the job.
		if _, err := s.columns(ctx, st, pt); err != nil {
			return err
		}
	} else if describe {
		if _, err := s.columns(ctx, st, pt); err != nil {
			return err
		}
	}
	dir, err := s.srv.sched.runWindow(ctx, st.window)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return jobError(err)
	}
	ct, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		return &pgError{code: "58030", msg: fmt.Sprintf("open result %s: %v", dir, err)}
	}
	defer ct.Close()
	cols, err := arrowColumns(ct.Schema())
	if err != nil {
		return err
	}
	if pt.cols != nil && !sameColumns(cols, pt.cols) {
		return &pgError{code: "XX000", msg: "the result's columns differ from those described"}
	}
	if describe {
		s.sendRowDescription(cols, nil)
	}
	idx := make([]int, len(cols))
	for i := range idx {
		idx[i] = i
	}
	br, err := ct.OpenColumns(idx)
	if err != nil {
		return &pgError{code: "58030", msg: fmt.Sprintf("read result %s: %v", dir, err)}
	}
	defer br.Close()
	skip, left := st.offset, st.limit
	var sent int64
	var buf []byte
	vals := make([][]byte, len(cols))
	offs := make([]int, len(cols))
	for left != 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &pgError{code: "58030", msg: fmt.Sprintf("read result %s: %v", dir, err)}
		}
		n := int64(rec.NumRows())
		if skip >= n {
			skip -= n
			rec.Release()
			continue
		}
		for r := int(skip); r < int(n) && left != 0; r++ {
			buf = buf[:0]
			for c := range cols {
				v := arrowValue(rec.Column(c), r)
				if v == nil {
					offs[c] = -1
					continue
				}
				offs[c] = len(buf)
				if buf, err = appendValue(buf, cols[c].oid, formatOf(formats, c), v); err != nil {
					rec.Release()
					return &pgError{code: "XX000", msg: err.Error()}
				}
			}
			fillValues(vals, buf, offs)
			s.be.Send(&pgproto3.DataRow{Values: vals})
			sent++
			if left > 0 {
				left--
			}
		}
		skip = 0
		rec.Release()
		if err := s.be.Flush(); err != nil {
			return err
		}
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT " + strconv.FormatInt(sent, 10))})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
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
