package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/windower/sqlparse"
)

func copyFrom(t *testing.T, c *pgx.Conn, sql, data string) (string, error) {
	t.Helper()
	tag, err := c.PgConn().CopyFrom(context.Background(), strings.NewReader(data), sql)
	return tag.String(), err
}

// COPY FROM STDIN in the text and CSV formats loads a keyed table's rows
// as insert events; the next query sees them. NULL is \N in text and an
// unquoted empty field in CSV; a quoted empty field is the empty string;
// escapes, quotes holding delimiters and line breaks, a header, a column
// list, \r\n line ends and the end marker \. are read as PostgreSQL does.
func TestCopyFrom(t *testing.T) {
	s := startKeyedServer(t)
	c := s.connect(t)
	sent := len(s.be.keyed.events)
	text := "5001\ta\\tb\\\\c\\nd\t1.5\t2024-01-02 03:04:05.5\t7\tt\n" +
		"5002\t\\N\t\\N\t\\N\t\\N\t\\N\n" +
		"5003\t\t-0.25\t\\N\t-8\tf\r\n" +
		"\\.\n" +
		"this is after the end marker\n"
	if tag, err := copyFrom(t, c, "COPY k (k0, c001_utf8, c002_float64, c003_timestamp_us, c004_int32, c005_bool) FROM STDIN", text); err != nil || tag != "COPY 3" {
		t.Fatalf("text: %q %v", tag, err)
	}
	for k0, want := range map[int64]string{5001: "5001|a\tb\\c\nd|1.5|7|true|1", 5002: "5002|<nil>|<nil>|<nil>|<nil>|1", 5003: "5003||-0.25|-8|false|1"} {
		if got := keyedRow(t, c, k0); got != want {
			t.Errorf("text: key %d is %q, want %q", k0, got, want)
		}
	}
	csv := "k0,c004_int32,c001_utf8,c005_bool\n" +
		"6001,1,\"quoted, with \"\"quotes\"\"\nand a line\",true\n" +
		"6002,,\"\",\n" +
		"6003,3,,false" // no line end at the end
	if tag, err := copyFrom(t, c, "COPY k (k0, c004_int32, c001_utf8, c005_bool) FROM STDIN WITH (FORMAT csv, HEADER match)", csv); err != nil || tag != "COPY 3" {
		t.Fatalf("csv: %q %v", tag, err)
	}
	for k0, want := range map[int64]string{6001: "6001|quoted, with \"quotes\"\nand a line|<nil>|1|true|1", 6002: "6002||<nil>|<nil>|<nil>|1", 6003: "6003|<nil>|<nil>|3|false|1"} {
		if got := keyedRow(t, c, k0); got != want {
			t.Errorf("csv: key %d is %q, want %q", k0, got, want)
		}
	}
	// The old spelling, another delimiter and NULL string.
	if tag, err := copyFrom(t, c, "COPY k (k0, c001_utf8) FROM STDIN DELIMITER ';' NULL 'none' CSV HEADER", "whatever;header\n7001;none\n7002;\"none\"\n"); err != nil || tag != "COPY 2" {
		t.Fatalf("csv ;: %q %v", tag, err)
	}
	if got := keyedRow(t, c, 7001); got != "7001|<nil>|<nil>|<nil>|<nil>|1" {
		t.Errorf("NULL 'none': %q", got)
	}
	if got := keyedRow(t, c, 7002); got != "7002|none|<nil>|<nil>|<nil>|1" {
		t.Errorf(`"none" quoted: %q`, got)
	}
	if n := len(s.be.keyed.events) - sent; n != 8 {
		t.Fatalf("%d events for 8 rows", n)
	}
	for _, ev := range s.be.keyed.events[sent:] {
		if ev.Op != "insert" || ev.OldRow != nil {
			t.Fatalf("event %+v", ev)
		}
	}
}

// A bad row anywhere fails the whole COPY with its SQLSTATE, naming the
// line and column; no row is sent, and the session goes on.
func TestCopyFromErrors(t *testing.T) {
	s := startKeyedServer(t)
	c := s.connect(t)
	if _, err := copyFrom(t, c, "COPY k (k0, c004_int32) FROM STDIN", "8001\t1\n"); err != nil {
		t.Fatal(err)
	}
	sent := len(s.be.keyed.events)
	for _, tc := range []struct{ sql, data, code, msg, where string }{
		{"COPY k (k0, c004_int32) FROM STDIN", "8101\t1\n8102\tx\n", "22P02", `invalid input syntax for type integer: "x" (line 2, column c004_int32)`, `COPY k, line 2, column c004_int32: "x"`},
		{"COPY k (k0, c004_int32) FROM STDIN CSV HEADER", "k0,c004_int32\n8101,1\n8102,3000000000\n", "22003", "line 3, column c004_int32", ""},
		{"COPY k (k0, c004_int32) FROM STDIN", "8101\t1\n8102\n", "22P04", `missing data for column "c004_int32" (line 2, column c004_int32)`, ""},
		{"COPY k (k0, c004_int32) FROM STDIN", "8101\t1\t2\n", "22P04", "extra data after last expected column (line 1)", ""},
		{"COPY k (k0, c004_int32) FROM STDIN", "\\N\t1\n", "23502", `null value in column "k0"`, ""},
		{"COPY k (k0, c004_int32) FROM STDIN CSV", ",1\n", "23502", "line 1", ""},
		{"COPY k (k0, c004_int32) FROM STDIN", "8101\t1\n8001\t2\n", "23505", "Key (k0)=(8001) already exists", ""},
		{"COPY k (k0, c004_int32) FROM STDIN", "8101\t1\n8101\t2\n", "23505", "Key (k0)=(8101) already exists", ""},
		{"COPY k (k0, c005_bool) FROM STDIN", "8101\tmaybe\n", "22P02", "column c005_bool", ""},
		{"COPY k (k0, c003_timestamp_us) FROM STDIN", "8101\tyesterday\n", "22007", "column c003_timestamp_us", ""},
		{"COPY k (k0, c001_utf8) FROM STDIN CSV", "8101,\"never closed\n", "22P04", "unterminated CSV quoted field", ""},
		{"COPY k (k0, c001_utf8) FROM STDIN", "8101\tends in a backslash\\\n", "22P04", "backslash", ""},
		{"COPY k (k0, c004_int32) FROM STDIN (FORMAT csv, HEADER MATCH)", "k0,c005_bool\n8101,1\n", "22P04", `column name mismatch in header line field 2: got "c005_bool", expected "c004_int32"`, ""},
		{"COPY k (k0, nope) FROM STDIN", "", "42703", `column "nope" of relation "k" does not exist`, ""},
		{"COPY t FROM STDIN", "1\n", "0A000", "table t is append-only", ""},
		{"COPY nope FROM STDIN", "1\n", "42P01", "", ""},
		{"COPY k FROM '/etc/passwd'", "", "0A000", "file of the server", ""},
		{"COPY k FROM PROGRAM 'true'", "", "0A000", "program", ""},
		{"COPY k FROM STDIN (FORMAT binary)", "", "22P04", "COPY file signature not recognized", ""},
		{"COPY k FROM STDIN (FORMAT csv, FORCE_NULL (c001_utf8))", "", "0A000", "FORCE_NULL", ""},
		{"COPY k FROM STDIN (DELIMITER 'ab')", "", "0A000", "single one-byte character", ""},
		{"COPY k FROM STDIN (QUOTE '\"')", "", "0A000", "only in CSV mode", ""},
		{"COPY k FROM STDIN (NOPE 1)", "", "42601", `option "nope" not recognized`, ""},
	} {
		_, err := copyFrom(t, c, tc.sql, tc.data)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) || !strings.Contains(pe.Where, tc.where) {
			t.Errorf("%s with %q: %v (where %q), want %s %q", tc.sql, tc.data, err, whereOf(err), tc.code, tc.msg)
		}
	}
	if n := len(s.be.keyed.events) - sent; n != 0 {
		t.Fatalf("the failed COPYs sent %d events", n)
	}
	// The session goes on, and so does COPY.
	if got := keyedRow(t, c, 8001); got != "8001|<nil>|<nil>|1|<nil>|1" {
		t.Fatalf("after the errors: %q", got)
	}
	if tag, err := copyFrom(t, c, "COPY k (k0) FROM STDIN", "8101\n"); err != nil || tag != "COPY 1" {
		t.Fatal(tag, err)
	}
	// COPY is the simple protocol's.
	err := c.PgConn().ExecParams(context.Background(), "COPY k FROM STDIN", nil, nil, nil, nil).Read().Err
	wantCode(t, err, "0A000")
}

func whereOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Where
	}
	return ""
}

// COPY (SELECT ...) TO STDOUT in CSV is what strata window --out FILE.csv
// writes for the same query (columnar/convert's CSV of the result
// container), and COPY t TO STDOUT that of every column; the text format
// has each value as a SELECT's text result, escaped, NULL as \N.
func TestCopyTo(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	query := testSQL + " ORDER BY k0"
	// The result container of the same query, exported as the CLI does.
	q, err := sqlparse.Parse(query)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := s.be.run(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := convert.Export(convert.CSV, []string{dir}, &want, convert.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	tag, err := c.PgConn().CopyTo(ctx, &got, "COPY ("+query+") TO STDOUT WITH (FORMAT csv, HEADER)")
	if err != nil || tag.String() != "COPY 600" {
		t.Fatalf("%q %v", tag, err)
	}
	if got.String() != want.String() {
		t.Fatalf("COPY TO csv differs from the CLI's export:\n%.500s\nwant\n%.500s", got.String(), want.String())
	}
	if !strings.HasPrefix(got.String(), "k0,c004_int32,c001_utf8,c002_float64,c003_timestamp_us,c005_bool,r\n") {
		t.Fatalf("header: %.100s", got.String())
	}
	// Without a header; LIMIT.
	got.Reset()
	if tag, err := c.PgConn().CopyTo(ctx, &got, "COPY ("+query+" LIMIT 5) TO STDOUT CSV"); err != nil || tag.String() != "COPY 5" {
		t.Fatalf("%q %v", tag, err)
	}
	wantLines := strings.SplitAfter(want.String(), "\n")
	if got.String() != strings.Join(wantLines[1:6], "") {
		t.Fatalf("LIMIT 5:\n%s\nwant\n%s", got.String(), strings.Join(wantLines[1:6], ""))
	}

	// Text: the simple protocol's text rows, escaped.
	rows, err := c.Query(ctx, query+" LIMIT 20 OFFSET 3", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	var wantText strings.Builder
	for rows.Next() {
		for i, v := range rows.RawValues() {
			if i > 0 {
				wantText.WriteByte('\t')
			}
			if v == nil {
				wantText.WriteString(`\N`)
			} else {
				wantText.Write(appendCopyText(nil, v, '\t'))
			}
		}
		wantText.WriteByte('\n')
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	got.Reset()
	if tag, err := c.PgConn().CopyTo(ctx, &got, "COPY ("+query+" LIMIT 20 OFFSET 3) TO STDOUT"); err != nil || tag.String() != "COPY 20" {
		t.Fatalf("%q %v", tag, err)
	}
	if got.String() != wantText.String() {
		t.Fatalf("COPY TO text:\n%.400s\nwant\n%.400s", got.String(), wantText.String())
	}
	if !strings.Contains(got.String(), `\N`) {
		t.Fatal("no NULL in the text copy: the test data should have some")
	}

	// COPY t TO: every column of t, and a column list.
	got.Reset()
	if tag, err := c.PgConn().CopyTo(ctx, &got, "COPY t TO STDOUT (FORMAT csv, HEADER true)"); err != nil || tag.String() != "COPY 600" {
		t.Fatalf("%q %v", tag, err)
	}
	m, err := s.be.tables(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, col := range m[0].columns {
		names = append(names, col.Name)
	}
	lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	if lines[0] != strings.Join(names, ",") || len(lines) != 601 {
		t.Fatalf("COPY t: header %q, %d lines", lines[0], len(lines))
	}
	got.Reset()
	if tag, err := c.PgConn().CopyTo(ctx, &got, "COPY t (c004_int32, k0) TO STDOUT WITH (FORMAT text, HEADER)"); err != nil || tag.String() != "COPY 600" {
		t.Fatalf("%q %v", tag, err)
	}
	lines = strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	if lines[0] != "c004_int32\tk0" || len(lines) != 601 || len(strings.Split(lines[1], "\t")) != 2 {
		t.Fatalf("COPY t (cols): %q, %d lines", lines[:2], len(lines))
	}

	for _, tc := range []struct{ sql, code string }{
		{"COPY nope TO STDOUT", "42P01"},
		{"COPY t (nope) TO STDOUT", "42703"},
		{"COPY (SELECT nope, rank() OVER (ORDER BY k0) AS r FROM t) TO STDOUT", "42703"},
		{"COPY (SELECT 1) TO STDOUT", "0A000"},
		{"COPY (" + query + " OFFSET 3) TO STDOUT CSV", "0A000"},
		{"COPY t TO '/tmp/x'", "0A000"},
		{"COPY t TO STDOUT (FORMAT csv, HEADER match)", "0A000"},
	} {
		_, err := c.PgConn().CopyTo(ctx, &got, tc.sql)
		wantCode(t, err, tc.code)
	}
}

func TestAppendCopyText(t *testing.T) {
	for in, want := range map[string]string{"a\tb": `a\tb`, "x\\y": `x\\y`, "l1\nl2\r": `l1\nl2\r`, `\x00ff`: `\\x00ff`, "plain": "plain"} {
		if got := string(appendCopyText(nil, []byte(in), '\t')); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if got := string(appendCopyText(nil, []byte("a|b"), '|')); got != `a\|b` {
		t.Errorf("delimiter: %q", got)
	}
}

// The parser, fed in pieces of every size, reads the same records.
func TestCopyParserPieces(t *testing.T) {
	for _, tc := range []struct {
		cp   copyStmt
		data string
		want string
	}{
		{copyStmt{delim: '\t', null: `\N`}, "a\\tb\t\\N\t\\101\\x41\\q\n\tx\r\nlast", `[a	b|NULL|AAq] [|x] [last]`},
		{copyStmt{csv: true, delim: ',', quote: '"', escape: '"'}, "a,\"b,\"\"c\"\"\r\nd\",,\"\"\r\n\"x\"y,z\n\\.\nignored", `[a|b,"c"` + "\r\n" + `d|NULL|] [xy|z]`},
		{copyStmt{csv: true, delim: ',', quote: '\'', escape: '\\'}, "'it\\'s','a\\\\b','c\\d'\n", `[it's|a\b|c\d]`},
	} {
		for size := 1; size <= len(tc.data); size++ {
			p := &copyParser{cp: &tc.cp}
			var recs []string
			rec := func(fs []copyField, line int) error {
				var f []string
				for _, x := range fs {
					if x.null {
						f = append(f, "NULL")
					} else {
						f = append(f, x.v)
					}
				}
				recs = append(recs, "["+strings.Join(f, "|")+"]")
				return nil
			}
			for i := 0; i < len(tc.data); i += size {
				if err := p.feed([]byte(tc.data[i:min(i+size, len(tc.data))]), rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.finish(rec); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(recs, " "); got != tc.want {
				t.Fatalf("%q in pieces of %d: %s, want %s", tc.data, size, got, tc.want)
			}
		}
	}
}

// DECLARE ... CURSOR, FETCH and CLOSE: the pieces a cursor gives, in
// either protocol and format, are the query's rows; a cursor ends with
// its transaction block unless WITH HOLD.
func TestCursors(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	query := testSQL + " ORDER BY k0"
	all, err := c.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, all)
	if len(want) != 600 {
		t.Fatalf("%d rows", len(want))
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			exec := func(sql string) string {
				t.Helper()
				tag, err := c.Exec(ctx, sql, mode)
				if err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				return tag.String()
			}
			exec("BEGIN")
			if tag := exec("DECLARE cur NO SCROLL CURSOR FOR " + query); tag != "DECLARE CURSOR" {
				t.Fatal(tag)
			}
			var got []string
			for _, f := range []string{"FETCH FORWARD 7 FROM cur", "FETCH 250 FROM cur", "FETCH NEXT FROM cur", "FETCH 42 IN cur"} {
				rows, err := c.Query(ctx, f, mode)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, rowsOf(t, rows)...)
				if tag := rows.CommandTag().String(); !strings.HasPrefix(tag, "FETCH ") {
					t.Fatalf("%s: tag %q", f, tag)
				}
			}
			if tag := exec("MOVE 100 FROM cur"); tag != "MOVE 100" {
				t.Fatal(tag)
			}
			rows, err := c.Query(ctx, "FETCH ALL FROM cur", mode)
			if err != nil {
				t.Fatal(err)
			}
			rest := rowsOf(t, rows)
			if tag := rows.CommandTag().String(); tag != fmt.Sprintf("FETCH %d", len(rest)) {
				t.Fatalf("FETCH ALL: tag %q for %d rows", tag, len(rest))
			}
			if !slices.Equal(got, want[:300]) || !slices.Equal(rest, want[400:]) {
				t.Fatalf("the cursor's rows differ from the query's: %d and %d rows", len(got), len(rest))
			}
			if tag := exec("FETCH 5 FROM cur"); tag != "FETCH 0" {
				t.Fatalf("after the end: %q", tag)
			}
			exec("DECLARE held CURSOR WITH HOLD FOR " + query + " LIMIT 10")
			exec("DECLARE other CURSOR FOR " + query)
			exec("COMMIT")
			_, err = c.Exec(ctx, "FETCH 1 FROM cur", mode)
			wantCode(t, err, "34000")
			_, err = c.Exec(ctx, "FETCH 1 FROM other", mode)
			wantCode(t, err, "34000")
			rows, err = c.Query(ctx, "FETCH ALL FROM held", mode)
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(t, rows); !slices.Equal(got, want[:10]) {
				t.Fatalf("WITH HOLD after COMMIT: %d rows", len(got))
			}
			if tag := exec("CLOSE held"); tag != "CLOSE CURSOR" {
				t.Fatal(tag)
			}
			_, err = c.Exec(ctx, "CLOSE held", mode)
			wantCode(t, err, "34000")
		})
	}
	// Binary results of FETCH in the extended protocol.
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "DECLARE b CURSOR FOR "+query); err != nil {
		t.Fatal(err)
	}
	res := c.PgConn().ExecParams(ctx, "FETCH 3 FROM b", nil, nil, nil, []int16{1}).Read()
	if res.Err != nil || len(res.Rows) != 3 || res.FieldDescriptions[0].Format != 1 || len(res.Rows[0][0]) != 8 {
		t.Fatalf("binary FETCH: %v, %d rows", res.Err, len(res.Rows))
	}
	// An Execute row limit on a FETCH portal: PortalSuspended, and the
	// next Execute goes on, as far as the FETCH asked.
	for _, tc := range []struct {
		fetch string
		want  []int
		tag   string
	}{
		{"FETCH 25 FROM b", []int{10, 20, 25}, "FETCH 25"},
		{"FETCH ALL FROM b", []int{250, 500, 572}, "FETCH 572"},
	} {
		pc := c.PgConn()
		fe := pc.Frontend()
		fe.Send(&pgproto3.Parse{Query: tc.fetch})
		fe.Send(&pgproto3.Bind{})
		for range 3 {
			fe.Send(&pgproto3.Execute{MaxRows: uint32(tc.want[0])})
		}
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var after []int
		n := 0
		var tag string
	read:
		for {
			msg, err := pc.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch m := msg.(type) {
			case *pgproto3.DataRow:
				n++
			case *pgproto3.PortalSuspended:
				after = append(after, n)
			case *pgproto3.CommandComplete:
				after = append(after, n)
				tag = string(m.CommandTag)
			case *pgproto3.ErrorResponse:
				t.Fatalf("%s: %s", m.Code, m.Message)
			case *pgproto3.ReadyForQuery:
				break read
			}
		}
		if !slices.Equal(after, tc.want) || tag != tc.tag {
			t.Fatalf("%s with row limits: rows after each Execute %v, tag %q; want %v, %q", tc.fetch, after, tag, tc.want, tc.tag)
		}
	}
	for _, tc := range []struct{ sql, code string }{
		{"DECLARE b CURSOR FOR " + query, "42P03"},
		{"FETCH BACKWARD 1 FROM b", "55000"},
		{"FETCH PRIOR FROM b", "55000"},
		{"FETCH LAST FROM b", "55000"},
		{"FETCH ABSOLUTE -1 FROM b", "55000"},
		{"FETCH RELATIVE -1 FROM b", "55000"},
		{"DECLARE s CURSOR FOR SELECT 1", "0A000"},
		{"DECLARE s CURSOR FOR SELECT nope, rank() OVER (ORDER BY k0) AS r FROM t", "42703"},
		{"FETCH 1 FROM nope", "34000"},
		{"CLOSE nope", "34000"},
	} {
		// Each in a block of its own: an error fails the block.
		_, err := c.Exec(ctx, tc.sql)
		wantCode(t, err, tc.code)
		if _, err := c.Exec(ctx, "ROLLBACK; BEGIN; DECLARE b CURSOR FOR "+query); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, "CLOSE ALL"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "FETCH 1 FROM b"); err == nil {
		t.Fatal("CLOSE ALL left b open")
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, "DECLARE x CURSOR FOR "+query)
	wantCode(t, err, "25P01")
}

// COPY FROM's data, in either format and cut anywhere, is rows or an
// error with a SQLSTATE, never a panic.
func FuzzCopyIn(f *testing.F) {
	for _, d := range []string{"1\tx\t1.5\t\\N\t7\tt\n\\.\n", "k0,c001_utf8\n1,\"a,\"\"b\"\n2,,\n", "1\t\\x41\\101\\\n", "\"unterminated\n", "1,2,3,4,5,6,7\r\n"} {
		f.Add(d, false, uint8(3))
		f.Add(d, true, uint8(1))
	}
	data := f.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "k", Projection: "p", Columns: 6, Containers: 1, RowsPerContainer: 5, Seed: 5, Keyed: true})
	if err != nil {
		f.Fatal(err)
	}
	tbl, err := applier.NewTable(ms[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data string, csv bool, piece uint8) {
		cp := &copyStmt{from: true, table: "k", delim: '\t', null: `\N`, quote: '"', escape: '"', csv: csv}
		if csv {
			cp.delim, cp.null, cp.header = ',', "", true
		}
		p := &changePlan{t: tbl, tc: &tableCols{name: "k"}, cs: &changeStmt{kind: "COPY", table: "k"}}
		for _, fl := range tbl.Schema.Fields() {
			if !columnar.IsChangeColumn(fl.Name) {
				p.tc.fields = append(p.tc.fields, fl)
			}
		}
		cols, err := p.targetColumns()
		if err != nil {
			t.Fatal(err)
		}
		in := &copyRows{p: p, cp: cp, cols: cols}
		rd := &copyParser{cp: cp}
		size := int(piece%16) + 1
		check := func(err error) bool { return failedWithSQLSTATE(t, data, err) }
		for i := 0; i < len(data); i += size {
			if check(rd.feed([]byte(data[i:min(i+size, len(data))]), in.record)) {
				return
			}
		}
		if check(rd.finish(in.record)) {
			return
		}
		for i, row := range in.rows {
			if len(row) != len(p.tc.fields) || in.keys[i] == nil {
				t.Fatalf("%q: row %v, key %v", data, row, in.keys[i])
			}
		}
	})
}

// startByteaServer is a test server whose keyed table k is (k0 bigint,
// b bytea): keys 1..40, b every kind of byte (NUL, 0xff, quotes,
// commas, backslashes, line breaks), empty, NULL.
func startByteaServer(t *testing.T) *testServer {
	t.Helper()
	s := startServer(t, nil)
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "k0", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for k := int64(1); k <= 40; k++ {
		rb.Field(0).(*array.Int64Builder).Append(k)
		switch k % 10 {
		case 0:
			rb.Field(1).AppendNull()
		case 5:
			rb.Field(1).(*array.BinaryBuilder).Append([]byte{})
		default:
			v := []byte{0, 0xff, byte(k), '"', ',', '\\', '\n', '\r', '\t', 'x'}
			rb.Field(1).(*array.BinaryBuilder).Append(v[:k%10+1])
		}
		rb.Field(2).(*array.Int64Builder).Append(0)
		rb.Field(3).(*array.BooleanBuilder).Append(false)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	dir := columnar.ContainerDir(s.data, "k", "p", "c0000")
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "k", Projection: "p", ID: "c0000", Schema: schema,
		SortKey: columnar.SortKey{{Name: "k0"}}, PrimaryKey: []string{"k0"}, BlockRows: 8, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	k := &keyedLocal{dataDir: s.data, dirs: []string{dir}}
	if k.t, err = applier.NewTable(m); err != nil {
		t.Fatal(err)
	}
	s.be.keyed = k
	return s
}

// byteaRows reads k0 and b of k's rows at or above from.
func byteaRows(t *testing.T, c *pgx.Conn, from int64) map[int64][]byte {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT k0, b FROM k WHERE k0 >= $1", from)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]byte{}
	for rows.Next() {
		var k int64
		var b []byte
		if err := rows.Scan(&k, &b); err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// COPY TO writes bytea as PostgreSQL does, \x and hex digits, in CSV as
// in text, and COPY FROM reads it back: the round trip gives the same
// bytes (shifted to new keys).
func TestCopyByteaRoundTrip(t *testing.T) {
	s := startByteaServer(t)
	c := s.connect(t)
	ctx := context.Background()
	want := byteaRows(t, c, 0)
	if len(want) != 40 {
		t.Fatalf("%d rows", len(want))
	}
	for _, tc := range []struct {
		format string
		delim  string
		shift  int64
	}{{"csv", ",", 100000}, {"text", "\t", 200000}} {
		var out bytes.Buffer
		if _, err := c.PgConn().CopyTo(ctx, &out, "COPY k TO STDOUT (FORMAT "+tc.format+")"); err != nil {
			t.Fatal(err)
		}
		var in strings.Builder
		nonEmpty := 0
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			key, field, _ := strings.Cut(line, tc.delim)
			var k int64
			if _, err := fmt.Sscan(key, &k); err != nil {
				t.Fatalf("%s: line %q", tc.format, line)
			}
			if _, ok := want[k]; !ok {
				continue // copied in by the round trip before
			}
			hexForm := `\x` + fmt.Sprintf("%x", want[k])
			if tc.format == "text" {
				hexForm = `\` + hexForm
			}
			switch {
			case want[k] == nil && (field == "" || field == `\N`):
			case field != hexForm:
				t.Fatalf("%s: key %d: %q, want %q", tc.format, k, field, hexForm)
			case len(want[k]) > 0:
				nonEmpty++
			}
			fmt.Fprintf(&in, "%d%s%s\n", k+tc.shift, tc.delim, field)
		}
		if nonEmpty == 0 {
			t.Fatal("no bytea value to compare")
		}
		if tag, err := copyFrom(t, c, "COPY k FROM STDIN (FORMAT "+tc.format+")", in.String()); err != nil || tag != "COPY 40" {
			t.Fatalf("%s: %q %v", tc.format, tag, err)
		}
		got := byteaRows(t, c, tc.shift)
		for k, b := range want {
			if g, ok := got[k+tc.shift]; !ok || !bytes.Equal(g, b) {
				t.Fatalf("%s: key %d read back as %x, want %x", tc.format, k, g, b)
			}
		}
	}
}

// binaryCopy reads COPY's binary format: the tuples' fields (nil for
// NULL), checking the header and the trailer.
func binaryCopy(t *testing.T, b []byte) [][][]byte {
	t.Helper()
	sig := "PGCOPY\n\xff\r\n\x00"
	if len(b) < 19 || string(b[:11]) != sig || binary.BigEndian.Uint32(b[11:]) != 0 || binary.BigEndian.Uint32(b[15:]) != 0 {
		t.Fatalf("binary COPY header %q", b[:min(len(b), 19)])
	}
	b = b[19:]
	var out [][][]byte
	for {
		n := int16(binary.BigEndian.Uint16(b))
		b = b[2:]
		if n == -1 {
			if len(b) != 0 {
				t.Fatalf("%d bytes after the trailer", len(b))
			}
			return out
		}
		var row [][]byte
		for range n {
			l := int32(binary.BigEndian.Uint32(b))
			b = b[4:]
			if l < 0 {
				row = append(row, nil)
				continue
			}
			row = append(row, b[:l])
			b = b[l:]
		}
		out = append(out, row)
	}
}

// binaryCopyData writes tuples in COPY's binary format.
func binaryCopyData(rows [][][]byte) []byte {
	b := append([]byte("PGCOPY\n\xff\r\n\x00"), 0, 0, 0, 0, 0, 0, 0, 0)
	for _, r := range rows {
		b = binary.BigEndian.AppendUint16(b, uint16(len(r)))
		for _, f := range r {
			if f == nil {
				b = binary.BigEndian.AppendUint32(b, 0xffffffff)
				continue
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
			b = append(b, f...)
		}
	}
	return binary.BigEndian.AppendUint16(b, 0xffff)
}

// COPY's binary format both ways: COPY TO writes PostgreSQL's header,
// each row's fields with their lengths as the binary results of a
// SELECT, and the trailer; COPY FROM reads it, as pgx's CopyFrom sends
// it (and a COPY TO read back: the same bytes under new keys); what is
// not the format is an error naming the line and column.
func TestCopyBinary(t *testing.T) {
	s := startKeyedServer(t)
	c := s.connect(t)
	ctx := context.Background()
	query := testSQL + " ORDER BY k0"
	res := c.PgConn().ExecParams(ctx, query, nil, nil, nil, []int16{1}).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var out bytes.Buffer
	tag, err := c.PgConn().CopyTo(ctx, &out, "COPY ("+query+") TO STDOUT (FORMAT binary)")
	if err != nil || tag.String() != "COPY 600" {
		t.Fatalf("%q %v", tag, err)
	}
	got := binaryCopy(t, out.Bytes())
	if len(got) != len(res.Rows) {
		t.Fatalf("%d rows, the query %d", len(got), len(res.Rows))
	}
	for i := range got {
		for j := range got[i] {
			if !bytes.Equal(got[i][j], res.Rows[i][j]) || (got[i][j] == nil) != (res.Rows[i][j] == nil) {
				t.Fatalf("row %d field %d: %x, the query's %x", i, j, got[i][j], res.Rows[i][j])
			}
		}
	}

	// pgx's CopyFrom: binary COPY of the types the table's columns have.
	cols := []string{"k0", "c001_utf8", "c002_float64", "c003_timestamp_us", "c004_int32", "c005_bool"}
	ts := time.Date(2024, 1, 2, 3, 4, 5, 500000, time.UTC)
	n, err := c.CopyFrom(ctx, pgx.Identifier{"k"}, cols, pgx.CopyFromRows([][]any{
		{int64(9001), "binary, \"copy\"\n", 1.5, ts, int32(7), true},
		{int64(9002), nil, nil, nil, nil, nil},
		{int64(9003), "", -0.25, ts, int32(-8), false},
	}))
	if err != nil || n != 3 {
		t.Fatalf("CopyFrom: %d %v", n, err)
	}
	for k0, want := range map[int64]string{9001: "9001|binary, \"copy\"\n|1.5|7|true|1", 9002: "9002|<nil>|<nil>|<nil>|<nil>|1", 9003: "9003||-0.25|-8|false|1"} {
		if got := keyedRow(t, c, k0); got != want {
			t.Errorf("key %d is %q, want %q", k0, got, want)
		}
	}

	// COPY k TO binary, read back under new keys: the same bytes.
	out.Reset()
	if _, err := c.PgConn().CopyTo(ctx, &out, "COPY (SELECT "+strings.Join(cols, ", ")+" FROM k WHERE k0 < 1000 ORDER BY k0) TO STDOUT (FORMAT binary)"); err != nil {
		t.Fatal(err)
	}
	orig := binaryCopy(t, out.Bytes())
	var shifted [][][]byte
	for _, r := range orig {
		r = slices.Clone(r)
		r[0] = binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(r[0])+100000)
		shifted = append(shifted, r)
	}
	if tag, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(binaryCopyData(shifted)), "COPY k FROM STDIN (FORMAT binary)"); err != nil || tag.String() != fmt.Sprintf("COPY %d", len(orig)) {
		t.Fatalf("%q %v", tag, err)
	}
	out.Reset()
	if _, err := c.PgConn().CopyTo(ctx, &out, "COPY (SELECT "+strings.Join(cols, ", ")+" FROM k WHERE k0 >= 100000 ORDER BY k0) TO STDOUT WITH BINARY"); err != nil {
		t.Fatal(err)
	}
	back := binaryCopy(t, out.Bytes())
	if len(back) != len(orig) || len(orig) < 50 {
		t.Fatalf("%d rows back, %d sent", len(back), len(orig))
	}
	for i := range back {
		for j := 1; j < len(back[i]); j++ {
			if !bytes.Equal(back[i][j], orig[i][j]) || (back[i][j] == nil) != (orig[i][j] == nil) {
				t.Fatalf("row %d field %d: %x back, %x sent", i, j, back[i][j], orig[i][j])
			}
		}
	}

	sent := len(s.be.keyed.events)
	row := func(k0 int64, extra ...[]byte) [][]byte {
		return append([][]byte{binary.BigEndian.AppendUint64(nil, uint64(k0))}, extra...)
	}
	for _, tc := range []struct {
		name, sql string
		data      []byte
		code      string
		msg       string
	}{
		{"signature", "COPY k (k0) FROM STDIN (FORMAT binary)", []byte("PGCOPY\nxx"), "22P04", "COPY file signature not recognized"},
		{"oids", "COPY k (k0) FROM STDIN (FORMAT binary)", append([]byte("PGCOPY\n\xff\r\n\x00"), 0, 1, 0, 0, 0, 0, 0, 0), "22P04", "invalid COPY file header (WITH OIDS)"},
		{"fields", "COPY k (k0, c004_int32) FROM STDIN (FORMAT binary)", binaryCopyData([][][]byte{row(9101)}), "22P04", "row field count is 1, expected 2"},
		{"length", "COPY k (k0, c004_int32) FROM STDIN (FORMAT binary)", binaryCopyData([][][]byte{row(9101, []byte{0, 0, 0, 0, 1})}), "22P03", "incorrect binary data format"},
		{"short", "COPY k (k0) FROM STDIN (FORMAT binary)", binaryCopyData([][][]byte{row(9101)})[:25], "22P04", "unexpected EOF in COPY data"},
		{"short length", "COPY k (k0, c004_int32) FROM STDIN (FORMAT binary)", binaryCopyData([][][]byte{row(9101, []byte{0, 0, 1})}), "08P01", "insufficient data left in message"},
		{"negative length", "COPY k (k0, c004_int32) FROM STDIN (FORMAT binary)", append(binaryCopyData(nil)[:19], 0, 2, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xfe), "22P04", "invalid field size"},
		{"after the trailer", "COPY k (k0) FROM STDIN (FORMAT binary)", append(binaryCopyData([][][]byte{row(9101)}), 1, 2), "22P04", "received copy data after EOF marker"},
		{"text", "COPY k (k0, c001_utf8) FROM STDIN (FORMAT binary)", binaryCopyData([][][]byte{row(9101, []byte{0xff})}), "22021", "invalid byte sequence"},
		{"header", "COPY k FROM STDIN (FORMAT binary, HEADER)", nil, "0A000", "cannot specify HEADER in BINARY mode"},
		{"delimiter", "COPY k TO STDOUT (FORMAT binary, DELIMITER ',')", nil, "42601", "cannot specify DELIMITER in BINARY mode"},
		{"null", "COPY k TO STDOUT (FORMAT binary, NULL 'x')", nil, "42601", "cannot specify NULL in BINARY mode"},
	} {
		_, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(tc.data), tc.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) {
			t.Fatalf("%s: %v, want %s %q", tc.name, err, tc.code, tc.msg)
		}
		if tc.code == "22P03" && !strings.Contains(pe.Where, "COPY k, line 1, column c004_int32") {
			t.Fatalf("%s: context %q", tc.name, pe.Where)
		}
	}
	if n := len(s.be.keyed.events) - sent; n != 0 {
		t.Fatalf("the failed COPYs sent %d events", n)
	}
	// The data may end without the trailer, as PostgreSQL reads it.
	data := binaryCopyData([][][]byte{row(9102)})
	if tag, err := c.PgConn().CopyFrom(ctx, bytes.NewReader(data[:len(data)-2]), "COPY k (k0) FROM STDIN (FORMAT binary)"); err != nil || tag.String() != "COPY 1" {
		t.Fatalf("without the trailer: %q %v", tag, err)
	}
}

// binaryRows is a copyRows over k's columns k0 and c004_int32 and a
// binary parser into it.
func binaryRows(t testing.TB) (*copyRows, *binaryParser) {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "k", Projection: "p", Columns: 6, Containers: 1, RowsPerContainer: 5, Seed: 5, Keyed: true})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := applier.NewTable(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	p := &changePlan{t: tbl, tc: &tableCols{name: "k"}, cs: &changeStmt{kind: "COPY", table: "k", cols: []string{"k0", "c004_int32"}}}
	for _, fl := range tbl.Schema.Fields() {
		if !columnar.IsChangeColumn(fl.Name) {
			p.tc.fields = append(p.tc.fields, fl)
		}
	}
	cols, err := p.targetColumns()
	if err != nil {
		t.Fatal(err)
	}
	in := &copyRows{p: p, cp: &copyStmt{from: true, table: "k", binary: true}, cols: cols}
	return in, &binaryParser{in: in}
}

// The binary parser, fed in pieces of every size, reads the same rows.
func TestBinaryParserPieces(t *testing.T) {
	var rows [][][]byte
	for k := range 20 {
		var v []byte
		if k%3 != 0 {
			v = binary.BigEndian.AppendUint32(nil, uint32(k*7))
		}
		rows = append(rows, [][]byte{binary.BigEndian.AppendUint64(nil, uint64(k)), v})
	}
	data := binaryCopyData(rows)
	// A header extension is skipped.
	data = slices.Concat(data[:15], []byte{0, 0, 0, 3, 'e', 'x', 't'}, data[19:])
	for size := 1; size <= len(data); size++ {
		in, p := binaryRows(t)
		for i := 0; i < len(data); i += size {
			if err := p.feed(data[i:min(i+size, len(data))], nil); err != nil {
				t.Fatalf("pieces of %d: %v", size, err)
			}
		}
		if err := p.finish(nil); err != nil {
			t.Fatalf("pieces of %d: %v", size, err)
		}
		if len(in.rows) != 20 {
			t.Fatalf("pieces of %d: %d rows", size, len(in.rows))
		}
		for k, r := range in.rows {
			if r[0] != int64(k) || (k%3 == 0) != (r[4] == nil) || (k%3 != 0 && r[4] != int64(k*7)) {
				t.Fatalf("pieces of %d: row %d is %v", size, k, r)
			}
		}
	}
}

// Binary COPY FROM's data, cut anywhere, is rows or an error with a
// SQLSTATE, never a panic.
func FuzzCopyInBinary(f *testing.F) {
	k := binary.BigEndian.AppendUint64(nil, 5)
	for _, d := range [][]byte{
		binaryCopyData([][][]byte{{k, {0, 0, 0, 1}}, {k, nil}}),
		binaryCopyData([][][]byte{{k}}),
		binaryCopyData([][][]byte{{nil, {0, 0, 1}}}),
		[]byte("PGCOPY\n\xff\r\n\x00\x00\x01\x00\x00\xff\xff\xff\xff"),
	} {
		f.Add(d, uint8(3))
		f.Add(d[:len(d)-3], uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		in, p := binaryRows(t)
		size := int(piece%16) + 1
		check := func(err error) bool { return failedWithSQLSTATE(t, data, err) }
		for i := 0; i < len(data); i += size {
			if check(p.feed(data[i:min(i+size, len(data))], nil)) {
				return
			}
		}
		if check(p.finish(nil)) {
			return
		}
		for i, row := range in.rows {
			if len(row) != len(in.p.tc.fields) || in.keys[i] == nil {
				t.Fatalf("%q: row %v, key %v", data, row, in.keys[i])
			}
		}
	})
}

// failedWithSQLSTATE reports whether a COPY parser failed on data, and
// fails t when the error carries no SQLSTATE.
func failedWithSQLSTATE[D string | []byte](t *testing.T, data D, err error) bool {
	t.Helper()
	if err == nil {
		return false
	}
	var pe *pgError
	if !errors.As(err, &pe) || len(pe.code) != 5 {
		t.Fatalf("%q: error without SQLSTATE: %v", data, err)
	}
	return true
}
