package convert

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/columnar"
)

// importText imports in (named in.csv) with o and returns the one
// container's manifest and its rows exported as CSV without a header,
// NULL written as ~.
func importText(t *testing.T, in string, o ImportOptions) (*columnar.Manifest, string) {
	t.Helper()
	ms, err := ImportCSV(strings.NewReader(in), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("%d containers, want 1", len(ms))
	}
	var out bytes.Buffer
	if err := ExportCSV(columnar.ContainerDir(o.DataDir, o.Table, o.Projection, ms[0].ID), &out, ExportOptions{NoHeader: true, Null: "~"}); err != nil {
		t.Fatal(err)
	}
	return ms[0], strings.TrimSpace(out.String())
}

// typeOf renders a manifest column's type with its zone, if any.
func typeOf(c columnar.ColumnSchema) string {
	if c.TimeZone != "" {
		return c.Type + "/" + c.TimeZone
	}
	return c.Type
}

func TestImportCSVInferTimestamps(t *testing.T) {
	for _, tt := range []struct {
		name string
		vals []string // the values of column v, rows id 1, 2, ...
		typ  string   // inferred type of v
		want []string // v as exported, in id order
	}{
		{"naive, space", []string{"2024-01-15 10:30:00"}, "timestamp_us", []string{"2024-01-15 10:30:00"}},
		{"naive, T", []string{"2024-01-15T10:30:00"}, "timestamp_us", []string{"2024-01-15 10:30:00"}},
		{"naive, fractions", []string{"2024-01-15 10:30:00.5", "2024-01-15T23:59:59.123456", "2024-01-15 00:00:00.000001"},
			"timestamp_us", []string{"2024-01-15 10:30:00.5", "2024-01-15 23:59:59.123456", "2024-01-15 00:00:00.000001"}},
		{"naive, no seconds", []string{"2024-01-15 10:30"}, "timestamp_us", []string{"2024-01-15 10:30:00"}},
		{"naive and dates", []string{"2024-01-15", "2024-01-15 10:30:00"}, "timestamp_us", []string{"2024-01-15 00:00:00", "2024-01-15 10:30:00"}},
		{"naive, NULLs", []string{"", "2024-01-15 10:30:00", "NULL"}, "timestamp_us", []string{"~", "2024-01-15 10:30:00", "~"}},
		{"zoned Z", []string{"2024-01-15T10:30:00Z"}, "timestamp_us/UTC", []string{"2024-01-15 10:30:00Z"}},
		{"zoned offsets", []string{"2024-01-15T10:30:00+02:00", "2024-01-15 10:30:00+0200", "2024-01-15 10:30:00+02", "2024-01-15 10:30:00.25-05:30", "2024-01-15 10:30:00 +01:00"},
			"timestamp_us/UTC", []string{"2024-01-15 08:30:00Z", "2024-01-15 08:30:00Z", "2024-01-15 08:30:00Z", "2024-01-15 16:00:00.25Z", "2024-01-15 09:30:00Z"}},
		{"zoned across midnight", []string{"2024-01-01T00:30:00+01:00"}, "timestamp_us/UTC", []string{"2023-12-31 23:30:00Z"}},
		{"zoned, NULLs", []string{"2024-01-15T10:30:00Z", ""}, "timestamp_us/UTC", []string{"2024-01-15 10:30:00Z", "~"}},
		// A column mixing naive and zoned values (or dates and zoned
		// values) is read as strings, as DuckDB falls back to VARCHAR.
		{"naive and zoned", []string{"2024-01-15 10:30:00", "2024-01-15 10:30:00Z"}, "utf8", []string{"2024-01-15 10:30:00", "2024-01-15 10:30:00Z"}},
		{"date and zoned", []string{"2024-01-15", "2024-01-15 10:30:00Z"}, "utf8", []string{"2024-01-15", "2024-01-15 10:30:00Z"}},
		{"dates", []string{"2024-01-15", "", "1999-12-31"}, "date32", []string{"2024-01-15", "~", "1999-12-31"}},
		// More precise than microseconds: kept as text, not rounded.
		{"nanoseconds", []string{"2024-01-15 10:30:00.123456789"}, "utf8", []string{"2024-01-15 10:30:00.123456789"}},
		{"nanoseconds, zero", []string{"2024-01-15 10:30:00.123456000"}, "timestamp_us", []string{"2024-01-15 10:30:00.123456"}},
		{"not a date", []string{"2024-02-30 10:30:00"}, "utf8", []string{"2024-02-30 10:30:00"}},
		{"hour 24", []string{"2024-01-15 24:00:00"}, "utf8", []string{"2024-01-15 24:00:00"}},
		{"bad offset", []string{"2024-01-15 10:30:00+2"}, "utf8", []string{"2024-01-15 10:30:00+2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("id,v\n")
			for i, v := range tt.vals {
				fmt.Fprintf(&b, "%d,%s\n", i+1, v)
			}
			o := csvOpts(t, "id")
			o.StringsNull = true
			m, out := importText(t, b.String(), o)
			if got := typeOf(m.Schema[1]); got != tt.typ {
				t.Errorf("v inferred as %s, want %s", got, tt.typ)
			}
			var want strings.Builder
			for i, v := range tt.want {
				if i > 0 {
					want.WriteByte('\n')
				}
				fmt.Fprintf(&want, "%d,%s", i+1, v)
			}
			if out != want.String() {
				t.Errorf("rows\n%s\nwant\n%s", out, want.String())
			}
		})
	}
}

func TestImportCSVInferOther(t *testing.T) {
	for _, tt := range []struct {
		name string
		vals []string
		typ  string
	}{
		{"ints", []string{"1", "-2", "+3"}, "int64"},
		{"floats", []string{"1", "2.5", "-1e3"}, "float64"},
		{"bools", []string{"true", "false", "TRUE"}, "bool"},
		// Every value must parse as the inferred type: 1.5 is no bool.
		{"float and bool", []string{"1.5", "true"}, "utf8"},
		// An integer too large for int64 is not rounded into a float64.
		{"huge integer", []string{"1", "12345678901234567891"}, "utf8"},
		{"hex", []string{"0x1F"}, "utf8"},
		{"all NULL", []string{"", "NULL"}, "utf8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("id,v\n")
			for i, v := range tt.vals {
				fmt.Fprintf(&b, "%d,%s\n", i+1, v)
			}
			m, _ := importText(t, b.String(), csvOpts(t, "id"))
			if got := typeOf(m.Schema[1]); got != tt.typ {
				t.Errorf("v inferred as %s, want %s", got, tt.typ)
			}
		})
	}
}

// TestImportCSVTypesAndNulls reads a value and an empty field (NULL) of
// every type a schema may give.
func TestImportCSVTypesAndNulls(t *testing.T) {
	for _, tt := range []struct {
		typ  string // as --schema spells it
		in   string // a value
		want string // as exported
	}{
		{"int8", "-128", "-128"},
		{"int16", "32767", "32767"},
		{"int32", "-7", "-7"},
		{"int64", "9223372036854775807", "9223372036854775807"},
		{"uint8", "255", "255"},
		{"uint16", "65535", "65535"},
		{"uint32", "4294967295", "4294967295"},
		{"uint64", "18446744073709551615", "18446744073709551615"},
		{"float32", "1.5", "1.5"},
		{"float64", "-2.25e10", "-2.25e+10"},
		{"bool", "true", "true"},
		{"date", "2024-02-29", "2024-02-29"},
		{"timestamp", "2024-01-15 10:30:00.000001", "2024-01-15 10:30:00.000001"},
		{"timestamptz", "2024-01-15 10:30:00+01:00", "2024-01-15 09:30:00Z"},
		// A timestamptz column reads a value without a zone as UTC.
		{"timestamptz", "2024-01-15 10:30:00", "2024-01-15 10:30:00Z"},
		{"utf8", "Grüße, 世界 🦆", "\"Grüße, 世界 🦆\""},
		{"binary", "aGk=", "aGk="},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			schema, err := ParseSchema("id int64, v " + tt.typ)
			if err != nil {
				t.Fatal(err)
			}
			o := csvOpts(t, "id")
			o.Schema, o.StringsNull = schema, true
			in := fmt.Sprintf("id,v\n1,%q\n2,\n", tt.in)
			_, out := importText(t, in, o)
			if want := "1," + tt.want + "\n2,~"; out != want {
				t.Errorf("rows\n%s\nwant\n%s", out, want)
			}
		})
	}
}

// TestImportCSVUTF8 imports multi-byte names and values, quoted fields
// holding the delimiter and line breaks, and sorts on a string key.
func TestImportCSVUTF8(t *testing.T) {
	in := "nom,città,n\n" +
		"\"Zoë, la \"\"grande\"\"\",Zürich,1\n" +
		"Ålesund,\"東京\n(とうきょう)\",2\n" +
		"åsa,🦆,3\n" +
		"Émile,,4\n"
	o := csvOpts(t, "nom")
	o.StringsNull = true
	m, out := importText(t, in, o)
	if m.Schema[0].Name != "nom" || m.Schema[1].Name != "città" || m.Schema[1].Type != "utf8" {
		t.Fatalf("schema %+v", m.Schema)
	}
	want := "\"Zoë, la \"\"grande\"\"\",Zürich,1\n" +
		"Ålesund,\"東京\n(とうきょう)\",2\n" +
		"Émile,~,4\n" +
		"åsa,🦆,3"
	if out != want {
		t.Errorf("rows\n%s\nwant\n%s", out, want)
	}
}

func TestImportCSVHeader(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		names    string
	}{
		{"byte order mark", "\ufeffid,v\n1,x\n", "id v"},
		{"spaces trimmed", "id , v\n1,x\n", "id v"},
		{"CRLF", "id,v\r\n1,x\r\n", "id v"},
		// DuckDB names an empty header field column<i>.
		{"empty name", "id,\n1,x\n", "id column1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := importText(t, tt.in, csvOpts(t, "id"))
			var names []string
			for _, c := range m.Schema {
				names = append(names, c.Name)
			}
			if got := strings.Join(names, " "); got != tt.names {
				t.Errorf("columns %q, want %q", got, tt.names)
			}
		})
	}
}

func TestImportCSVNoHeader(t *testing.T) {
	// Without a schema the columns are named as DuckDB names them:
	// column0, column1, ..., zero-padded to the same width.
	o := csvOpts(t, "column0")
	o.NoHeader = true
	m, out := importText(t, "2,b\n1,a\n", o)
	if m.Schema[0].Name != "column0" || m.Schema[1].Name != "column1" || m.Schema[0].Type != "int64" || m.Rows != 2 {
		t.Fatalf("schema %+v, %d rows", m.Schema, m.Rows)
	}
	if out != "1,a\n2,b" {
		t.Fatalf("rows %q", out)
	}
	o = csvOpts(t, "column00")
	o.NoHeader = true
	m, _ = importText(t, "0,1,2,3,4,5,6,7,8,9,10\n", o)
	if m.Schema[0].Name != "column00" || m.Schema[9].Name != "column09" || m.Schema[10].Name != "column10" {
		t.Fatalf("schema %+v", m.Schema)
	}
	// With a schema: its names.
	o = csvOpts(t, "k")
	o.NoHeader = true
	o.Schema, _ = ParseSchema("k int32, v utf8")
	m, out = importText(t, "2,b\n1,a\n", o)
	if m.Schema[0].Name != "k" || m.Schema[0].Type != "int32" || out != "1,a\n2,b" {
		t.Fatalf("schema %+v, rows %q", m.Schema, out)
	}
	// No input at all: no rows.
	o = csvOpts(t, "k")
	o.NoHeader = true
	if ms, err := ImportCSV(strings.NewReader(""), o); err != nil || len(ms) != 0 {
		t.Fatalf("empty input without a header: %d containers, %v", len(ms), err)
	}
}

func TestImportCSVDelimiter(t *testing.T) {
	for _, comma := range []rune{'\t', ';', '|', '¦'} {
		d := string(comma)
		o := csvOpts(t, "id")
		o.Comma = comma
		m, out := importText(t, "id"+d+"v"+d+"w\n2"+d+"a,b"+d+"2024-01-15 10:30:00\n1"+d+"c"+d+"\n", o)
		if len(m.Schema) != 3 || m.Schema[2].Type != "timestamp_us" {
			t.Fatalf("%q: schema %+v", d, m.Schema)
		}
		if want := "1,c,~\n2,\"a,b\",2024-01-15 10:30:00"; out != want {
			t.Fatalf("%q: rows %q, want %q", d, out, want)
		}
	}
	for _, bad := range []rune{'"', '\n', '\r', 0xFFFD} {
		o := csvOpts(t, "id")
		o.Comma = bad
		if _, err := ImportCSV(strings.NewReader("id\n1\n"), o); err == nil {
			t.Errorf("delimiter %q accepted", bad)
		}
	}
}

// TestImportCSVErrorPositions checks that errors name the input, the line
// (the header is line 1) and the column.
func TestImportCSVErrorPositions(t *testing.T) {
	late := func() string {
		var b strings.Builder
		b.WriteString("id,amount\n")
		for i := range InferRows + 5 {
			fmt.Fprintf(&b, "%d,%d\n", i, i)
		}
		b.WriteString("9,2.5\n")
		return b.String()
	}()
	for _, tt := range []struct {
		name, in, schema string
		noHeader         bool
		line             int
		column           string
		msg              string // the whole message
	}{
		{name: "late type error", in: late, line: InferRows + 7, column: "amount",
			msg: fmt.Sprintf("in.csv:%d: column \"amount\": cannot parse \"2.5\" as int64 (types were inferred from lines 2 to %d; give a schema)", InferRows+7, InferRows+1)},
		{name: "schema type error", in: "id,amount\n1,2\n2,3\n3,2.5\n", schema: "id int64, amount int64", line: 4, column: "amount",
			msg: "in.csv:4: column \"amount\": cannot parse \"2.5\" as int64"},
		{name: "after a quoted line break", in: "id,s,n\n1,\"a\nb\",1\n2,x,y\n", schema: "id int64, s utf8, n int64", line: 4, column: "n",
			msg: "in.csv:4: column \"n\": cannot parse \"y\" as int64"},
		{name: "no header", in: "1,2\n2,x\n", schema: "id int64, n int64", noHeader: true, line: 2, column: "n",
			msg: "in.csv:2: column \"n\": cannot parse \"x\" as int64"},
		{name: "out of range", in: "id,n\n1,300\n", schema: "id int64, n int8", line: 2, column: "n",
			msg: "in.csv:2: column \"n\": cannot parse \"300\" as int8: out of range"},
		{name: "zone in a timestamp column", in: "id,ts\n1,2024-01-15 10:30:00Z\n", schema: "id int64, ts timestamp", line: 2, column: "ts",
			msg: "in.csv:2: column \"ts\": cannot parse \"2024-01-15 10:30:00Z\" as timestamp: it has a zone offset; make the column timestamptz"},
		{name: "nanoseconds", in: "id,ts\n1,2024-01-15 10:30:00.1234567\n", schema: "id int64, ts timestamp", line: 2, column: "ts",
			msg: "in.csv:2: column \"ts\": cannot parse \"2024-01-15 10:30:00.1234567\" as timestamp: more precise than microseconds"},
		{name: "bad utf8", in: "id,s\n1,ok\n2,a\xffb\n", line: 3, column: "s",
			msg: "in.csv:3: column \"s\": \"a\\xffb\" is not valid UTF-8"},
		{name: "bad base64", in: "id,b\n1,!!\n", schema: "id int64, b binary", line: 2, column: "b",
			msg: "in.csv:2: column \"b\": cannot parse \"!!\" as binary (base64)"},
		{name: "long value cut", in: "id,n\n1," + strings.Repeat("x", 200) + "\n", schema: "id int64, n int64", line: 2, column: "n",
			msg: "in.csv:2: column \"n\": cannot parse \"" + strings.Repeat("x", 60) + "...\" as int64"},
		{name: "duplicate header column", in: "id,a,b,a\n1,2,3,4\n", line: 1, column: "a",
			msg: "in.csv:1: column \"a\": appears twice in the header (fields 2 and 4)"},
		{name: "too many fields", in: "id,a\n1,2\n3,4,5\n", line: 3,
			msg: "in.csv:3: 3 fields, the header has 2"},
		{name: "too few fields", in: "id,a\n1,2\n3\n", schema: "id int64, a int64", line: 3,
			msg: "in.csv:3: 1 field, the header has 2"},
		{name: "too many fields, inferring", in: "id,a\n1,2\n" + strings.Repeat("3,4\n", 10) + "5,6,7\n", line: 13,
			msg: "in.csv:13: 3 fields, the header has 2"},
		{name: "no header, ragged", in: "1,2\n3,4,5\n", noHeader: true, line: 2,
			msg: "in.csv:2: 3 fields, line 1 has 2"},
		{name: "no header, schema", in: "1,2,3\n", schema: "id int64, a int64", noHeader: true, line: 1,
			msg: "in.csv:1: 3 fields, the schema has 2"},
		{name: "schema count", in: "id,a,b\n1,2,3\n", schema: "id int64, a int64", line: 1,
			msg: "in.csv:1: the header has 3 columns (id, a, b), the schema 2 (id, a)"},
		{name: "schema names", in: "id,amount\n1,2\n", schema: "id int64, amt int64", line: 1, column: "amount",
			msg: "in.csv:1: column \"amount\": the schema's column 2 is \"amt\""},
		{name: "bare quote", in: "id,a\n1,x\"y\n", line: 2,
			msg: "in.csv:2: bare \" in non-quoted-field"},
		{name: "unterminated quote", in: "id,a\n1,\"xy\n2,3\n", line: 3,
			msg: "in.csv:3: extraneous or missing \" in quoted-field (the field starts on line 2)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := csvOpts(t, "id")
			o.NoHeader = tt.noHeader
			if tt.schema != "" {
				var err error
				if o.Schema, err = ParseSchema(tt.schema); err != nil {
					t.Fatal(err)
				}
			}
			ms, err := ImportCSV(strings.NewReader(tt.in), o)
			if err == nil {
				t.Fatalf("imported %d containers", len(ms))
			}
			var ce *CSVError
			if !errors.As(err, &ce) {
				t.Fatalf("%v: not a *CSVError", err)
			}
			if ce.Name != "in.csv" || ce.Line != tt.line || ce.Column != tt.column {
				t.Errorf("error at %s:%d column %q, want in.csv:%d column %q", ce.Name, ce.Line, ce.Column, tt.line, tt.column)
			}
			if ce.Error() != tt.msg {
				t.Errorf("message\n%s\nwant\n%s", ce.Error(), tt.msg)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not hold %q", err, tt.msg)
			}
		})
	}
}

// TestImportCSVSortKeyCheckedFirst: a sort key naming no column fails
// before any row is read or written, and says so.
func TestImportCSVSortKeyCheckedFirst(t *testing.T) {
	var b strings.Builder
	b.WriteString("a,b\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "%d,x\n", i)
	}
	o := csvOpts(t, "nope")
	o.RowsPerContainer = 100
	ms, err := ImportCSV(strings.NewReader(b.String()), o)
	if !errors.Is(err, columnar.ErrSchemaMismatch) || len(ms) != 0 || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("import = %d containers, %v", len(ms), err)
	}
}

// TestImportCSVManyContainers imports a file of many containers and
// blocks and checks every row arrives, in key order within each container.
func TestImportCSVManyContainers(t *testing.T) {
	const rows = 25000
	var b strings.Builder
	b.WriteString("id,ts,name,score\n")
	for i := range rows {
		id := (i * 7919) % rows // every id once, shuffled
		name := fmt.Sprintf("n%dé", id)
		if id%10 == 0 {
			name = ""
		}
		fmt.Fprintf(&b, "%d,2024-01-%02d %02d:%02d:%02d.%06d,%s,%d.5\n", id, 1+id%28, id%24, id%60, (id/60)%60, id, name, id)
	}
	o := csvOpts(t, "id")
	o.RowsPerContainer, o.BlockRows, o.StringsNull = 10000, 1000, true
	ms, err := ImportCSV(strings.NewReader(b.String()), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].Rows != 10000 || ms[2].Rows != 5000 || len(ms[0].Blocks) != 10 {
		t.Fatalf("%d containers", len(ms))
	}
	if typ := typeOf(ms[0].Schema[1]); typ != "timestamp_us" {
		t.Fatalf("ts inferred as %s", typ)
	}
	seen := make([]bool, rows)
	for _, m := range ms {
		if err := columnar.Verify(columnar.ContainerDir(o.DataDir, "t", "p", m.ID)); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := ExportCSV(columnar.ContainerDir(o.DataDir, "t", "p", m.ID), &out, ExportOptions{NoHeader: true, Null: "~"}); err != nil {
			t.Fatal(err)
		}
		prev := -1
		for line := range strings.Lines(out.String()) {
			var id int
			if _, err := fmt.Sscanf(line, "%d,", &id); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			name := fmt.Sprintf("n%dé", id)
			if id%10 == 0 {
				name = "~"
			}
			ts := time.Date(2024, 1, 1+id%28, id%24, id%60, (id/60)%60, id*1000, time.UTC).Format("2006-01-02 15:04:05.999999")
			want := fmt.Sprintf("%d,%s,%s,%d.5\n", id, ts, name, id)
			if line != want {
				t.Fatalf("row %q, want %q", line, want)
			}
			if id <= prev || seen[id] {
				t.Fatalf("id %d after %d (seen %v)", id, prev, seen[id])
			}
			prev, seen[id] = id, true
		}
	}
	for id, ok := range seen {
		if !ok {
			t.Fatalf("id %d lost", id)
		}
	}
}

func TestParseSchema(t *testing.T) {
	for _, tt := range []struct {
		in, want string // want: name:type ... as arrow prints the types
	}{
		{"id int64, ts timestamp, name utf8", "id:int64 ts:timestamp[us] name:utf8"},
		{"a INT8, b int16, c int32, d Int64", "a:int8 b:int16 c:int32 d:int64"},
		{"a uint8, b uint16, c uint32, d uint64", "a:uint8 b:uint16 c:uint32 d:uint64"},
		{"a tinyint, b smallint, c integer, d int, e bigint", "a:int8 b:int16 c:int32 d:int32 e:int64"},
		{"a utinyint, b usmallint, c uinteger, d ubigint", "a:uint8 b:uint16 c:uint32 d:uint64"},
		{"a float32, b float64, c double, d real, e float, f double precision", "a:float32 b:float64 c:float64 d:float32 e:float32 f:float64"},
		{"a bool, b boolean", "a:bool b:bool"},
		{"a date, b date32", "a:date32 b:date32"},
		{"a timestamp, b timestamptz, c timestamp with time zone, d timestamp without time zone, e timestamp_us",
			"a:timestamp[us] b:timestamp[us, tz=UTC] c:timestamp[us, tz=UTC] d:timestamp[us] e:timestamp[us]"},
		{"a utf8, b string, c varchar, d text, e VARCHAR(20), f char(3)", "a:utf8 b:utf8 c:utf8 d:utf8 e:utf8 f:utf8"},
		{"a binary, b blob, c bytea", "a:binary b:binary c:binary"},
		{`"odd, name" int64, "say ""hi""" utf8, "ünï" date`, `odd, name:int64 say "hi":utf8 ünï:date32`},
		{"  id   int64 ,\n\tv utf8  ", "id:int64 v:utf8"},
	} {
		s, err := ParseSchema(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		var got []string
		for _, f := range s.Fields() {
			got = append(got, f.Name+":"+f.Type.String())
			if !f.Nullable {
				t.Errorf("%q: %s not nullable", tt.in, f.Name)
			}
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%q: %s, want %s", tt.in, strings.Join(got, " "), tt.want)
		}
	}
	for _, tt := range []struct{ in, msg string }{
		{"", "no columns"},
		{"id", `column "id" has no type`},
		{"id int64, ts timestmp", `column "ts": unknown type "timestmp"`},
		{"id decimal(10,2)", `column "id": unknown type "decimal(10,2)"`},
		{"id int64, id utf8", `column "id" given twice`},
		{"id int64,", "empty column after the last comma"},
		{"id int64,, v utf8", "empty column"},
		{`"id int64`, "unterminated quoted name"},
		{`"" int64`, "empty name"},
		{`"a"b int64`, `unknown type "b int64"`},
	} {
		_, err := ParseSchema(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v, want one saying %q", tt.in, err, tt.msg)
		}
	}
	// Every type ParseSchema gives is one a container holds.
	s, err := ParseSchema("a int8, b uint64, c float32, d bool, e date, f timestamp, g timestamptz, h utf8, i binary")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := columnar.SchemaColumns(s); err != nil {
		t.Fatal(err)
	}
	if got := TypeString(&arrow.TimestampType{Unit: arrow.Microsecond}); got != "timestamp" {
		t.Errorf("TypeString(timestamp[us]) = %s", got)
	}
	if got := TypeString(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}); got != "timestamptz" {
		t.Errorf("TypeString(timestamp[us, UTC]) = %s", got)
	}
}
