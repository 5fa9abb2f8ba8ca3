package main

// COPY FROM STDIN and COPY ... TO STDOUT, in the text, CSV and binary
// formats.
//
// COPY t FROM STDIN loads rows into a keyed table as insert change
// events, the same road as INSERT (changes.go): every row is parsed and
// checked (types, NULL in a key column, a key twice or already with a
// row) before any event is sent, and the statement completes once they
// are visible. An append-only table is loaded with strata load.
//
// COPY (SELECT ...) TO STDOUT and COPY t TO STDOUT run the query as a
// window job, like a SELECT, and stream the result container's rows as
// CopyData: the CSV format is written by columnar/convert, as `strata
// window ... --out FILE.csv` and `strata export` write it; the text
// format is PostgreSQL's (tab-separated, \N for NULL, backslash escapes)
// with the values as the text results of a SELECT give them (bytea as
// \x and hex in CSV too, as PostgreSQL writes it); the binary format is
// PostgreSQL's (its header, each row's fields with their lengths, the
// trailer), the values as a SELECT's binary results, and COPY FROM reads
// it back in the binary forms of the columns' types.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strata-db/strata/columnar/convert"
)

// maxCopyIn bounds the data of one COPY FROM STDIN: its rows are all
// checked before any is sent, so they are all held.
const maxCopyIn = 256 << 20

type copyStmt struct {
	from  bool
	table string   // COPY t ...
	cols  []string // COPY t (cols) ...; nil: every column
	query *stmt    // TO: the window query whose rows are sent

	csv           bool
	binary        bool // FORMAT binary
	header, match bool // HEADER, HEADER MATCH
	delim         byte
	null          string
	quote, escape byte // CSV
}

func (s *session) planCopy(ctx context.Context, text string, c *pg.CopyStmt, version int32) (*stmt, error) {
	switch {
	case c.IsProgram:
		return nil, notSupported(`COPY to or from a program (use COPY ... FROM STDIN or TO STDOUT; psql's \copy runs them)`)
	case c.Filename != "":
		return nil, notSupported(`COPY to or from a file of the server (use COPY ... FROM STDIN or TO STDOUT; psql's \copy runs them)`)
	case c.WhereClause != nil:
		return nil, notSupported("COPY FROM ... WHERE")
	}
	cp := &copyStmt{from: c.IsFrom, delim: '\t', null: `\N`, quote: '"', escape: '"'}
	if err := cp.options(c.Options); err != nil {
		return nil, err
	}
	if c.Relation != nil {
		t, err := relationName(c.Relation, "COPY")
		if err != nil {
			return nil, err
		}
		cp.table = t
	}
	for _, n := range c.Attlist {
		cp.cols = append(cp.cols, n.GetString_().GetSval())
	}
	if cp.from {
		return &stmt{tag: "COPY", copy: cp}, nil
	}
	var q *stmt
	var err error
	if c.Query != nil {
		sel := c.Query.GetSelectStmt()
		if sel == nil {
			return nil, notSupported("COPY (" + statementName(c.Query) + ") TO: strata copies the rows of a SELECT")
		}
		inner, off, ok := insideParens(text)
		if !ok {
			return nil, &pgError{code: "42601", msg: "COPY (query) TO: the query's parentheses do not match"}
		}
		if q, err = s.planSelect(ctx, inner, sel, version); err != nil {
			return nil, shiftPos(err, off)
		}
	} else if q, err = s.planTableCopy(ctx, cp); err != nil {
		return nil, err
	}
	if q.window == nil {
		return nil, notSupported("COPY (SELECT ...) TO over a query that reads no table")
	}
	if cp.csv && q.offset > 0 {
		return nil, notSupported("OFFSET in COPY (SELECT ...) TO with FORMAT csv (the CSV is written as strata export writes a result; use the text format, or WHERE)")
	}
	cp.query = q
	return &stmt{tag: "COPY", copy: cp}, nil
}

// planTableCopy plans COPY t [(cols)] TO as the window query SELECT cols
// FROM t (every column of t when none are named).
func (s *session) planTableCopy(ctx context.Context, cp *copyStmt) (*stmt, error) {
	tables, err := s.srv.sched.tables(ctx, cp.table)
	if err != nil {
		return nil, jobError(err)
	}
	var have []string
	found := false
	for _, t := range tables {
		if t.name == cp.table {
			found = true
			for _, c := range t.columns {
				have = append(have, c.Name)
			}
		}
	}
	if !found {
		return nil, &pgError{code: "42P01", msg: fmt.Sprintf("relation %q does not exist", cp.table)}
	}
	names := have
	if cp.cols != nil {
		names = nil
		for _, c := range cp.cols {
			i := -1
			for j, h := range have {
				if h == c || (i < 0 && strings.EqualFold(h, c)) {
					i = j
				}
			}
			if i < 0 {
				return nil, &pgError{code: "42703", msg: fmt.Sprintf("column %q of relation %q does not exist", c, cp.table)}
			}
			names = append(names, have[i])
		}
	}
	if len(names) == 0 {
		return nil, &pgError{code: "58030", msg: fmt.Sprintf("cannot read the columns of table %q", cp.table)}
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = quoteIdent(n)
	}
	sql := "SELECT " + strings.Join(quoted, ", ") + " FROM " + quoteIdent(cp.table)
	tree, err := pg.Parse(sql)
	if err != nil {
		return nil, syntaxError(err)
	}
	return s.planSelect(ctx, sql, tree.Stmts[0].Stmt.GetSelectStmt(), tree.Version)
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func quoteIdent(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// insideParens returns the text inside the first parenthesis of sql and
// its match, and where it starts.
func insideParens(sql string) (string, int, bool) {
	res, err := pg.Scan(sql)
	if err != nil {
		return "", 0, false
	}
	depth, start := 0, -1
	for _, t := range res.Tokens {
		switch sql[t.Start:t.End] {
		case "(":
			if depth == 0 && start < 0 {
				start = int(t.End)
			}
			depth++
		case ")":
			depth--
			if depth == 0 && start >= 0 {
				return sql[start:t.Start], start, true
			}
		}
	}
	return "", 0, false
}

// options reads COPY's options (WITH (FORMAT csv, HEADER, ...) and the
// older CSV HEADER spelling, which the parser turns into the same).
func (cp *copyStmt) options(opts []*pg.Node) error {
	var delim, null, quote, escape *string
	seen := map[string]bool{}
	for _, n := range opts {
		d := n.GetDefElem()
		if d == nil {
			continue
		}
		name := strings.ToLower(d.Defname)
		if seen[name] {
			return &pgError{code: "42601", msg: "conflicting or redundant options: " + name}
		}
		seen[name] = true
		val, _ := optionText(d.Arg)
		switch name {
		case "format":
			switch strings.ToLower(val) {
			case "text":
			case "csv":
				cp.csv = true
			case "binary":
				cp.binary = true
			default:
				return &pgError{code: "22023", msg: fmt.Sprintf("COPY format %q not recognized", val)}
			}
		case "header":
			if d.Arg == nil {
				cp.header = true
				continue
			}
			switch strings.ToLower(val) {
			case "true", "on", "1":
				cp.header = true
			case "false", "off", "0":
			case "match":
				cp.header, cp.match = true, true
			default:
				return &pgError{code: "22023", msg: fmt.Sprintf("header requires a Boolean value or \"match\", not %q", val)}
			}
		case "delimiter":
			delim = &val
		case "null":
			null = &val
		case "quote":
			quote = &val
		case "escape":
			escape = &val
		case "encoding":
			if e := strings.ToLower(strings.ReplaceAll(val, "-", "")); e != "utf8" && e != "unicode" {
				return notSupported(fmt.Sprintf("COPY with ENCODING %q (strata's text is UTF8)", val))
			}
		case "freeze":
			// Nothing to freeze: the rows become change events.
		case "force_quote", "force_not_null", "force_null", "default", "on_error", "log_verbosity":
			return notSupported("COPY option " + strings.ToUpper(name))
		default:
			return &pgError{code: "42601", msg: fmt.Sprintf("option %q not recognized", name)}
		}
	}
	if cp.binary {
		// PostgreSQL's errors, in its order.
		switch {
		case delim != nil:
			return &pgError{code: "42601", msg: "cannot specify DELIMITER in BINARY mode"}
		case null != nil:
			return &pgError{code: "42601", msg: "cannot specify NULL in BINARY mode"}
		case cp.header:
			return &pgError{code: "0A000", msg: "cannot specify HEADER in BINARY mode"}
		case quote != nil:
			return &pgError{code: "0A000", msg: "COPY quote available only in CSV mode"}
		case escape != nil:
			return &pgError{code: "0A000", msg: "COPY escape available only in CSV mode"}
		}
		return nil
	}
	if cp.csv {
		cp.delim, cp.null = ',', ""
	}
	oneChar := func(what string, v *string, dst *byte) error {
		if v == nil {
			return nil
		}
		if len(*v) != 1 {
			return &pgError{code: "0A000", msg: fmt.Sprintf("COPY %s must be a single one-byte character", what)}
		}
		*dst = (*v)[0]
		return nil
	}
	if err := oneChar("delimiter", delim, &cp.delim); err != nil {
		return err
	}
	if null != nil {
		cp.null = *null
	}
	if (quote != nil || escape != nil) && !cp.csv {
		return &pgError{code: "0A000", msg: "COPY quote and escape are available only in CSV mode"}
	}
	if err := oneChar("quote", quote, &cp.quote); err != nil {
		return err
	}
	cp.escape = cp.quote
	if err := oneChar("escape", escape, &cp.escape); err != nil {
		return err
	}
	switch {
	case cp.delim == '\n' || cp.delim == '\r':
		return &pgError{code: "22023", msg: "COPY delimiter cannot be newline or carriage return"}
	case !cp.csv && (cp.delim == '\\' || (cp.delim >= 'a' && cp.delim <= 'z') || (cp.delim >= '0' && cp.delim <= '9') || cp.delim == '.'):
		return &pgError{code: "22023", msg: fmt.Sprintf("COPY delimiter cannot be %q", cp.delim)}
	case cp.csv && cp.delim == cp.quote:
		return &pgError{code: "22023", msg: "COPY delimiter and quote must be different"}
	case strings.IndexByte(cp.null, cp.delim) >= 0:
		return &pgError{code: "22023", msg: "COPY delimiter must not appear in the NULL specification"}
	case strings.ContainsAny(cp.null, "\r\n"):
		return &pgError{code: "22023", msg: "COPY null representation cannot use newline or carriage return"}
	}
	if !cp.from && cp.csv && (cp.quote != '"' || cp.escape != '"') {
		return notSupported(`COPY TO with a QUOTE or ESCAPE other than '"'`)
	}
	if !cp.from && cp.match {
		return &pgError{code: "0A000", msg: "cannot use \"match\" with HEADER in COPY TO"}
	}
	return nil
}

// optionText is a COPY option's value as text.
func optionText(n *pg.Node) (string, bool) {
	switch {
	case n == nil:
		return "", false
	case n.GetString_() != nil:
		return n.GetString_().Sval, true
	case n.GetInteger() != nil:
		return strconv.Itoa(int(n.GetInteger().Ival)), true
	case n.GetBoolean() != nil:
		return strconv.FormatBool(n.GetBoolean().Boolval), true
	case n.GetFloat() != nil:
		return n.GetFloat().Fval, true
	}
	return "", false
}

func (s *session) runCopy(ctx context.Context, cp *copyStmt) error {
	if cp.from {
		return s.copyIn(ctx, cp)
	}
	return s.copyOut(ctx, cp)
}

// ---- COPY ... TO STDOUT ----

// copyOut runs the query and streams its rows as CopyData, flushing
// each block's.
func (s *session) copyOut(ctx context.Context, cp *copyStmt) error {
	cur, err := s.windowResult(ctx, cp.query, &portal{stmt: cp.query})
	if err != nil {
		return err
	}
	defer cur.close()
	format := uint16(0)
	if cp.binary {
		format = 1
	}
	formats := make([]uint16, len(cur.cols))
	for i := range formats {
		formats[i] = format
	}
	s.be.Send(&pgproto3.CopyOutResponse{OverallFormat: byte(format), ColumnFormatCodes: formats})
	var n int64
	if cp.binary {
		// A CopyData a row, the header in the first one's and the
		// trailer in one of its own, as PostgreSQL sends them (psycopg
		// reads the header with the first row).
		tuple := binaryCopyHeader()
		_, err = s.pump(ctx, cur, []int16{1}, 0, func(vals [][]byte) {
			tuple = binary.BigEndian.AppendUint16(tuple, uint16(len(vals)))
			for _, v := range vals {
				if v == nil {
					tuple = binary.BigEndian.AppendUint32(tuple, 0xffffffff)
					continue
				}
				tuple = binary.BigEndian.AppendUint32(tuple, uint32(len(v)))
				tuple = append(tuple, v...)
			}
			s.be.Send(&pgproto3.CopyData{Data: tuple})
			tuple = tuple[:0]
		})
		if err != nil {
			return err
		}
		s.be.Send(&pgproto3.CopyData{Data: append(tuple, 0xff, 0xff)}) // the trailer
		n = cur.sent
	} else if cp.csv {
		w := &copyOutWriter{s: s, ctx: ctx}
		n, err = convert.Export(convert.CSV, []string{cur.dir}, w, convert.ExportOptions{Comma: rune(cp.delim), NoHeader: !cp.header, Null: cp.null, ByteaHex: true})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var pe *pgError
			if errors.As(err, &pe) {
				return pe
			}
			return &pgError{code: "58030", msg: fmt.Sprintf("COPY TO: %v", err)}
		}
	} else {
		var line []byte
		if cp.header {
			for i, c := range cur.cols {
				if i > 0 {
					line = append(line, cp.delim)
				}
				line = appendCopyText(line, []byte(c.name), cp.delim)
			}
			s.be.Send(&pgproto3.CopyData{Data: append(line, '\n')})
		}
		_, err = s.pump(ctx, cur, nil, 0, func(vals [][]byte) {
			line = line[:0]
			for i, v := range vals {
				if i > 0 {
					line = append(line, cp.delim)
				}
				if v == nil {
					line = append(line, cp.null...)
				} else {
					line = appendCopyText(line, v, cp.delim)
				}
			}
			s.be.Send(&pgproto3.CopyData{Data: append(line, '\n')})
		})
		if err != nil {
			return err
		}
		n = cur.sent
	}
	s.be.Send(&pgproto3.CopyDone{})
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("COPY " + strconv.FormatInt(n, 10))})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// copyOutWriter sends what it is given as CopyData, flushed: the CSV
// writer hands it a buffer at a time.
type copyOutWriter struct {
	s   *session
	ctx context.Context
}

func (w *copyOutWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	w.s.be.Send(&pgproto3.CopyData{Data: p})
	if err := w.s.be.Flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// appendCopyText appends v as a field of COPY's text format: backslash,
// line breaks, tab and the delimiter escaped with a backslash.
func appendCopyText(dst, v []byte, delim byte) []byte {
	for _, c := range v {
		switch c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\v':
			dst = append(dst, '\\', 'v')
		default:
			if c == delim {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
		}
	}
	return dst
}

// ---- COPY t FROM STDIN ----

// copyIn reads the rows of a COPY FROM STDIN, checks them all, and
// inserts them as change events (as an INSERT of them would).
func (s *session) copyIn(ctx context.Context, cp *copyStmt) error {
	p, err := s.newChangePlan(ctx, &changeStmt{kind: "COPY", table: cp.table, cols: cp.cols})
	if err != nil {
		var pe *pgError
		if errors.As(err, &pe) && pe.code == "0A000" {
			return &pgError{code: "0A000", msg: fmt.Sprintf("COPY %s FROM STDIN: table %s is append-only (it has no primary key), and COPY FROM loads a keyed table's rows as change events; "+
				"load an append-only table with strata load --table %s --csv FILE", cp.table, cp.table, cp.table)}
		}
		return err
	}
	cols, err := p.targetColumns()
	if err != nil {
		return err
	}
	format := uint16(0)
	if cp.binary {
		format = 1
	}
	formats := make([]uint16, len(cols))
	for i := range formats {
		formats[i] = format
	}
	s.be.Send(&pgproto3.CopyInResponse{OverallFormat: byte(format), ColumnFormatCodes: formats})
	if err := s.be.Flush(); err != nil {
		return err
	}
	in := &copyRows{p: p, cp: cp, cols: cols}
	var rd copyReader = &copyParser{cp: cp}
	if cp.binary {
		rd = &binaryParser{in: in}
	}
	var ferr error // the first error in the data; the rest is read and dropped
	var size int64
	for done := false; !done; {
		msg, err := s.be.Receive()
		if err != nil {
			return &connError{err: err}
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			size += int64(len(m.Data))
			if ferr == nil && size > maxCopyIn {
				ferr = &pgError{code: "54000", msg: fmt.Sprintf("COPY FROM STDIN of more than %d MiB: its rows are all checked before any is sent, so they are held; load the data in smaller pieces", maxCopyIn>>20)}
			}
			if ferr == nil {
				ferr = rd.feed(m.Data, in.record)
			}
		case *pgproto3.CopyDone:
			if ferr == nil {
				ferr = rd.finish(in.record)
			}
			done = true
		case *pgproto3.CopyFail:
			return &pgError{code: "57014", msg: "COPY from stdin failed: " + m.Message}
		case *pgproto3.Flush, *pgproto3.Sync:
			// Ignored during COPY, as PostgreSQL does.
		default:
			return &pgError{code: "08P01", msg: fmt.Sprintf("unexpected message %T during COPY from stdin", msg)}
		}
		if ferr == nil && ctx.Err() != nil {
			ferr = ctx.Err()
		}
	}
	if ferr != nil {
		return ferr
	}
	n, err := p.insertRows(ctx, s.srv.sched, in.rows, in.keys)
	if err != nil {
		return changeBackendError(ctx, err)
	}
	if err := s.publish(ctx, p); err != nil {
		return err
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("COPY " + strconv.Itoa(n))})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// copyField is one field of a COPY FROM record, unescaped.
type copyField struct {
	v      string
	null   bool
	quoted bool // CSV: the field was quoted
}

// copyRows turns COPY FROM's records into checked rows and their keys.
type copyRows struct {
	p          *changePlan
	cp         *copyStmt
	cols       []int
	headerDone bool
	rows       [][]any
	keys       [][]byte
}

// copyError says where in the data err happened, as PostgreSQL's CONTEXT
// does, in the message too.
func (c *copyRows) copyError(err error, line int, col string, val *string) error {
	var pe *pgError
	if !errors.As(err, &pe) {
		return err
	}
	where := fmt.Sprintf("COPY %s, line %d", c.cp.table, line)
	msg := fmt.Sprintf("%s (line %d", pe.msg, line)
	if col != "" {
		where += ", column " + col
		msg += ", column " + col
		if val != nil {
			where += fmt.Sprintf(": %q", *val)
		}
	}
	return &pgError{code: pe.code, msg: msg + ")", where: where}
}

func (c *copyRows) record(fields []copyField, line int) error {
	tc := c.p.tc
	if c.cp.header && !c.headerDone {
		c.headerDone = true
		if !c.cp.match {
			return nil
		}
		if len(fields) != len(c.cols) {
			return c.copyError(&pgError{code: "22P04", msg: fmt.Sprintf("wrong number of fields in header line: got %d, expected %d", len(fields), len(c.cols))}, line, "", nil)
		}
		for i, f := range fields {
			if want := tc.fields[c.cols[i]].Name; f.null || f.v != want {
				return c.copyError(&pgError{code: "22P04", msg: fmt.Sprintf("column name mismatch in header line field %d: got %q, expected %q", i+1, f.v, want)}, line, "", nil)
			}
		}
		return nil
	}
	if len(fields) < len(c.cols) {
		name := tc.fields[c.cols[len(fields)]].Name
		return c.copyError(&pgError{code: "22P04", msg: fmt.Sprintf("missing data for column %q", name)}, line, name, nil)
	}
	if len(fields) > len(c.cols) {
		return c.copyError(&pgError{code: "22P04", msg: "extra data after last expected column"}, line, "", nil)
	}
	row := make([]any, len(tc.fields))
	for j, f := range fields {
		if f.null {
			continue
		}
		col := tc.fields[c.cols[j]]
		if !utf8.ValidString(f.v) {
			return c.copyError(&pgError{code: "22021", msg: "invalid byte sequence for encoding \"UTF8\""}, line, col.Name, nil)
		}
		nv, err := assign(unknownLit(f.v), col.Type, false, col.Name)
		if err != nil {
			return c.copyError(err, line, col.Name, &f.v)
		}
		row[c.cols[j]] = unwrapValue(nv)
	}
	return c.add(row, line)
}

// add keeps a checked row and its key.
func (c *copyRows) add(row []any, line int) error {
	key, err := c.p.keyOf(row, true)
	if err != nil {
		return c.copyError(err, line, "", nil)
	}
	c.rows = append(c.rows, row)
	c.keys = append(c.keys, key)
	return nil
}

// binaryRecord is record for a tuple of the binary format: each field's
// bytes (nil for NULL) in the binary form of its column's type.
func (c *copyRows) binaryRecord(fields [][]byte, line int) error {
	tc := c.p.tc
	row := make([]any, len(tc.fields))
	for j, b := range fields {
		if b == nil {
			continue
		}
		col := tc.fields[c.cols[j]]
		v, err := binaryValue(col.Type, b)
		if err == nil {
			v, err = assign(v, col.Type, false, col.Name)
		}
		if err != nil {
			return c.copyError(err, line, col.Name, nil)
		}
		row[c.cols[j]] = unwrapValue(v)
	}
	return c.add(row, line)
}

// binaryValue reads b, a value of a column of type t in the binary form
// of the PostgreSQL type pgwire gives t (oidOf), as assign takes it.
// Fewer bytes than the type has is PostgreSQL's 08P01, more its 22P03.
func binaryValue(t arrow.DataType, b []byte) (any, error) {
	oid, err := oidOf(t)
	if err != nil {
		return nil, notSupported(fmt.Sprintf("a value of type %s", t))
	}
	if size := int(typeSize(oid)); size > 0 && len(b) != size {
		if len(b) < size {
			return nil, &pgError{code: "08P01", msg: "insufficient data left in message"}
		}
		return nil, &pgError{code: "22P03", msg: "incorrect binary data format"}
	}
	switch oid {
	case oidBool:
		return b[0] != 0, nil
	case oidInt2:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case oidInt4:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case oidInt8:
		return int64(binary.BigEndian.Uint64(b)), nil
	case oidFloat4:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case oidFloat8:
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case oidText:
		if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			return nil, &pgError{code: "22021", msg: "invalid byte sequence for encoding \"UTF8\""}
		}
		return string(b), nil
	case oidBytea:
		return bytes.Clone(b), nil
	case oidDate:
		return dateVal(int32(binary.BigEndian.Uint32(b)) + pgEpochDays), nil
	case oidTimestamp, oidTimestamptz:
		return tsVal(int64(binary.BigEndian.Uint64(b)) + pgEpochMicros), nil
	}
	return nil, notSupported(fmt.Sprintf("binary COPY FROM of type %s", typeName[oid]))
}

// copyReader reads COPY FROM's data as it arrives: copyParser (text,
// CSV) or binaryParser.
type copyReader interface {
	feed(data []byte, rec recordFunc) error
	finish(rec recordFunc) error
}

var binarySignature = []byte("PGCOPY\n\xff\r\n\x00")

// binaryCopyHeader is the header of COPY's binary format: the
// signature, no flags, no header extension.
func binaryCopyHeader() []byte {
	return append(bytes.Clone(binarySignature), 0, 0, 0, 0, 0, 0, 0, 0)
}

// binaryParser reads COPY's binary format as it arrives: the header (its
// flags checked, its extension skipped), then tuples (a field count,
// each field's length, -1 for NULL, and bytes) until the trailer (-1)
// or the end of the data, as PostgreSQL reads it. A tuple is read once
// all of it has come; its fields are handed to the copyRows.
type binaryParser struct {
	in     *copyRows
	buf    []byte // what has come and is not read yet
	header bool   // the header was read
	ended  bool   // the trailer was read
	line   int    // tuples read (PostgreSQL's line numbers)
	fields [][]byte
}

func (p *binaryParser) feed(data []byte, _ recordFunc) error {
	p.buf = append(p.buf, data...)
	return p.parse(false)
}

func (p *binaryParser) finish(recordFunc) error { return p.parse(true) }

func (p *binaryParser) badFormat(msg string, line int, col string) error {
	err := &pgError{code: "22P04", msg: msg}
	if line == 0 {
		return err
	}
	return p.in.copyError(err, line, col, nil)
}

// parse reads what it can of p.buf; eof: the data has ended.
func (p *binaryParser) parse(eof bool) error {
	b := p.buf
	defer func() {
		n := copy(p.buf, b)
		p.buf = p.buf[:n]
	}()
	if !p.header {
		if len(b) < len(binarySignature) || len(b) < 19 {
			switch {
			case !bytes.HasPrefix(binarySignature, b[:min(len(b), len(binarySignature))]):
				return p.badFormat("COPY file signature not recognized", 0, "")
			case !eof:
				return nil
			case len(b) < len(binarySignature):
				return p.badFormat("COPY file signature not recognized", 0, "")
			case len(b) < 15:
				return p.badFormat("invalid COPY file header (missing flags)", 0, "")
			}
			return p.badFormat("invalid COPY file header (missing length)", 0, "")
		}
		if !bytes.Equal(b[:len(binarySignature)], binarySignature) {
			return p.badFormat("COPY file signature not recognized", 0, "")
		}
		flags := binary.BigEndian.Uint32(b[11:])
		if flags&(1<<16) != 0 {
			return p.badFormat("invalid COPY file header (WITH OIDS)", 0, "")
		}
		if (flags&^(1<<16))>>16 != 0 {
			return p.badFormat("unrecognized critical flags in COPY file header", 0, "")
		}
		ext := int32(binary.BigEndian.Uint32(b[15:]))
		if ext < 0 {
			return p.badFormat("invalid COPY file header (missing length)", 0, "")
		}
		if len(b)-19 < int(ext) {
			if eof {
				return p.badFormat("invalid COPY file header (wrong length)", 0, "")
			}
			return nil
		}
		b = b[19+int(ext):]
		p.header = true
	}
	cols := p.in.cols
	for {
		if p.ended {
			if len(b) > 0 {
				return p.badFormat("received copy data after EOF marker", p.line, "")
			}
			return nil
		}
		if len(b) < 2 {
			return nil // the end without a trailer is an end too
		}
		line := p.line + 1
		n := int16(binary.BigEndian.Uint16(b))
		if n == -1 {
			p.ended, p.line = true, line
			b = b[2:]
			continue
		}
		if int(n) != len(cols) {
			return p.badFormat(fmt.Sprintf("row field count is %d, expected %d", n, len(cols)), line, "")
		}
		p.fields = p.fields[:0]
		at := 2
		for i := range int(n) {
			col := p.in.p.tc.fields[cols[i]].Name
			if len(b)-at < 4 {
				if eof {
					return p.badFormat("unexpected EOF in COPY data", line, col)
				}
				return nil
			}
			l := int32(binary.BigEndian.Uint32(b[at:]))
			at += 4
			if l == -1 {
				p.fields = append(p.fields, nil)
				continue
			}
			if l < 0 {
				return p.badFormat("invalid field size", line, col)
			}
			if len(b)-at < int(l) {
				if eof {
					return p.badFormat("unexpected EOF in COPY data", line, col)
				}
				return nil
			}
			p.fields = append(p.fields, b[at:at+int(l):at+int(l)])
			at += int(l)
		}
		p.line = line
		if err := p.in.binaryRecord(p.fields, line); err != nil {
			return err
		}
		b = b[at:]
	}
}

// copyParser splits COPY FROM's data, as it arrives, into records of
// fields: the text format (a line a record, the delimiter between
// fields, backslash escapes, the NULL string as it is written) or CSV
// (quoted fields, which may hold delimiters and line breaks; only an
// unquoted field can be NULL). A line \. ends the data.
type copyParser struct {
	cp     *copyStmt
	line   int // records read
	ended  bool
	buf    []byte // text: the line not yet complete
	fields []copyField
	// CSV: the field being read and the parser's state.
	cur     []byte
	quoted  bool
	state   int
	skipLF  bool
	pending bool // a record has begun
}

const (
	csvStart = iota
	csvUnquoted
	csvQuoted
	csvEscape    // after ESCAPE inside quotes (ESCAPE other than QUOTE)
	csvQuoteSeen // after QUOTE inside quotes: its end, or a doubled quote
)

type recordFunc func([]copyField, int) error

func (p *copyParser) feed(data []byte, rec recordFunc) error {
	if p.ended {
		return nil
	}
	if p.cp.csv {
		return p.feedCSV(data, rec)
	}
	p.buf = append(p.buf, data...)
	start := 0
	for !p.ended {
		i := bytes.IndexByte(p.buf[start:], '\n')
		if i < 0 {
			break
		}
		line := p.buf[start : start+i]
		start += i + 1
		if err := p.textLine(line, rec); err != nil {
			return err
		}
	}
	n := copy(p.buf, p.buf[start:])
	p.buf = p.buf[:n]
	return nil
}

func (p *copyParser) finish(rec recordFunc) error {
	if p.ended {
		return nil
	}
	if !p.cp.csv {
		if len(p.buf) > 0 {
			return p.textLine(p.buf, rec)
		}
		return nil
	}
	switch p.state {
	case csvQuoted, csvEscape:
		return &pgError{code: "22P04", msg: fmt.Sprintf("unterminated CSV quoted field (COPY %s, line %d)", p.cp.table, p.line+1), where: fmt.Sprintf("COPY %s, line %d", p.cp.table, p.line+1)}
	}
	if p.pending {
		p.endField()
		return p.endRecord(rec)
	}
	return nil
}

// textLine reads one line of the text format.
func (p *copyParser) textLine(line []byte, rec recordFunc) error {
	p.line++
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if string(line) == `\.` {
		p.ended = true
		return nil
	}
	p.fields = p.fields[:0]
	var cur []byte
	rawStart := 0
	field := func(end int) {
		raw := line[rawStart:end]
		p.fields = append(p.fields, copyField{v: string(cur), null: string(raw) == p.cp.null})
		cur = cur[:0]
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == p.cp.delim {
			field(i)
			rawStart = i + 1
			continue
		}
		if c != '\\' {
			cur = append(cur, c)
			continue
		}
		i++
		if i == len(line) {
			return &pgError{code: "22P04", msg: fmt.Sprintf("a backslash ends the line (COPY %s, line %d)", p.cp.table, p.line), where: fmt.Sprintf("COPY %s, line %d", p.cp.table, p.line)}
		}
		switch e := line[i]; e {
		case 'b':
			cur = append(cur, '\b')
		case 'f':
			cur = append(cur, '\f')
		case 'n':
			cur = append(cur, '\n')
		case 'r':
			cur = append(cur, '\r')
		case 't':
			cur = append(cur, '\t')
		case 'v':
			cur = append(cur, '\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && i+1 < len(line) && line[i+1] >= '0' && line[i+1] <= '7'; k++ {
				i++
				v = v*8 + int(line[i]-'0')
			}
			cur = append(cur, byte(v))
		case 'x':
			v, k := 0, 0
			for ; k < 2 && i+1 < len(line) && isHex(line[i+1]); k++ {
				i++
				v = v*16 + hexVal(line[i])
			}
			if k == 0 {
				cur = append(cur, 'x')
			} else {
				cur = append(cur, byte(v))
			}
		default:
			cur = append(cur, e)
		}
	}
	field(len(line))
	return rec(p.fields, p.line)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}

func (p *copyParser) endField() {
	v := string(p.cur)
	p.fields = append(p.fields, copyField{v: v, null: !p.quoted && v == p.cp.null, quoted: p.quoted})
	p.cur, p.quoted = p.cur[:0], false
}

func (p *copyParser) endRecord(rec recordFunc) error {
	p.line++
	p.state, p.pending = csvStart, false
	fields := p.fields
	p.fields = p.fields[:0]
	if len(fields) == 1 && fields[0].v == `\.` && !fields[0].quoted {
		p.ended = true
		return nil
	}
	return rec(fields, p.line)
}

func (p *copyParser) feedCSV(data []byte, rec recordFunc) error {
	cp := p.cp
	for i := 0; i < len(data) && !p.ended; {
		c := data[i]
		if p.skipLF {
			p.skipLF = false
			if c == '\n' && p.state == csvStart && !p.pending {
				i++
				continue
			}
		}
		switch p.state {
		case csvStart:
			p.pending = true
			if c == cp.quote {
				p.state, p.quoted = csvQuoted, true
				i++
				continue
			}
			p.state = csvUnquoted
			continue // read c as part of an unquoted field
		case csvUnquoted:
			switch c {
			case cp.delim:
				p.endField()
				p.state = csvStart
			case '\n', '\r':
				p.endField()
				if err := p.endRecord(rec); err != nil {
					return err
				}
				p.skipLF = c == '\r'
			default:
				p.cur = append(p.cur, c)
			}
		case csvQuoted:
			switch {
			case c == cp.escape && cp.escape != cp.quote:
				p.state = csvEscape
			case c == cp.quote:
				p.state = csvQuoteSeen
			default:
				p.cur = append(p.cur, c)
			}
		case csvEscape:
			if c != cp.quote && c != cp.escape {
				p.cur = append(p.cur, cp.escape)
			}
			p.cur = append(p.cur, c)
			p.state = csvQuoted
		case csvQuoteSeen:
			if c == cp.quote && cp.escape == cp.quote {
				p.cur = append(p.cur, c)
				p.state = csvQuoted
				break
			}
			// The quoted part ended: the field goes on unquoted.
			p.state = csvUnquoted
			continue
		}
		i++
	}
	return nil
}
