package convert

import (
	"bufio"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/strata-db/strata/columnar"
)

// A CSVError is an error at a line of a CSV input: a value that is not of
// its column's type, a row of the wrong number of fields, a damaged quote,
// a header that does not fit.
type CSVError struct {
	Name   string // the input, as ImportOptions.Name
	Line   int    // 1-based, the header (if any) being line 1
	Column string // the column's name; "" if the error is not in one field
	Err    error
}

func (e *CSVError) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("%s:%d: column %q: %v", e.Name, e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err)
}

func (e *CSVError) Unwrap() error { return e.Err }

// probedRow is a row read to infer the column types, kept to be imported.
type probedRow struct {
	rec   []string
	line  int   // where the row starts
	lines []int // where each field starts, if the row spans lines
}

// csvSource reads CSV rows into record batches of a schema. It is
// ImportCSV's batchSource.
type csvSource struct {
	name   string
	cr     *csv.Reader
	schema *arrow.Schema
	nulls  []string
	strNul bool // nulls are NULL in utf8 columns too

	// width says what fixes the number of fields, for errors.
	width string
	// Rows read to infer the types, imported first; inferred is the last
	// line they cover (0 if the schema was given).
	probed    []probedRow
	inferFrom int
	inferTo   int

	bld    *array.RecordBuilder
	append []func(string) error
	chunk  int
	rows   int64    // rows read so far
	lines  rowLines // where each row starts

	cur  arrow.RecordBatch
	err  error
	done bool
}

// newCSVSource reads the header (unless o.NoHeader) and, without a schema,
// the first InferRows rows to infer it; then checks the schema holds the
// sort key. It returns nil and no error if the input has no rows and no
// schema can be had.
func newCSVSource(r io.Reader, o *ImportOptions) (*csvSource, error) {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		br.Discard(3) // a UTF-8 byte order mark, as spreadsheets write
	}
	s := &csvSource{name: o.Name, cr: csv.NewReader(br), nulls: o.Nulls, strNul: o.StringsNull,
		chunk: min(o.BlockRows, o.RowsPerContainer)}
	s.cr.Comma = o.Comma
	s.cr.FieldsPerRecord = -1 // checked here, to say more
	s.cr.ReuseRecord = true
	schema := o.Schema
	var names []string
	if !o.NoHeader {
		header, err := s.cr.Read()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no header row")
		}
		if err != nil {
			return nil, s.readError(err)
		}
		line, _ := s.cr.FieldPos(0)
		var herr *CSVError
		if names, herr = headerNames(header); herr == nil && schema != nil {
			herr = matchHeader(names, schema)
		}
		if herr != nil {
			herr.Name, herr.Line = s.name, line
			return nil, herr
		}
		s.width = fmt.Sprintf("the header has %d", len(names))
	} else if schema != nil {
		s.width = fmt.Sprintf("the schema has %d", schema.NumFields())
	}
	if schema == nil {
		for len(s.probed) < InferRows {
			rec, err := s.cr.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, s.readError(err)
			}
			line, _ := s.cr.FieldPos(0)
			if names == nil { // no header: the first row says how many columns
				names = generatedNames(len(rec))
				s.width = fmt.Sprintf("line %d has %d", line, len(rec))
			}
			if len(rec) != len(names) {
				return nil, s.fieldCount(line, len(rec))
			}
			p := probedRow{rec: slices.Clone(rec), line: line}
			if last, _ := s.cr.FieldPos(len(rec) - 1); last != line {
				p.lines = make([]int, len(rec))
				for i := range rec {
					p.lines[i], _ = s.cr.FieldPos(i)
				}
			}
			s.probed = append(s.probed, p)
		}
		if len(s.probed) == 0 {
			return nil, nil
		}
		schema = inferSchema(names, s.probed, o.Nulls)
		s.inferFrom, s.inferTo = s.probed[0].line, s.probed[len(s.probed)-1].line
	}
	if err := checkSchema(schema, o); err != nil {
		return nil, err
	}
	s.schema = schema
	s.bld = array.NewRecordBuilder(o.Allocator, schema)
	for i, f := range schema.Fields() {
		fn, err := s.appender(s.bld.Field(i), f.Type)
		if err != nil {
			s.bld.Release()
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		s.append = append(s.append, fn)
	}
	return s, nil
}

// checkSchema fails if the containers of an import could not hold the
// schema or be sorted on the key, before any row is read.
func checkSchema(schema *arrow.Schema, o *ImportOptions) error {
	if _, err := columnar.SchemaColumns(schema); err != nil {
		return err
	}
	if _, err := o.SortKey.Indices(schema); err != nil {
		return err
	}
	if _, err := columnar.NewKeyEncoder(schema, o.SortKey); err != nil {
		return err
	}
	if len(o.PrimaryKey) > 0 {
		return checkKeyColumns(schema, o.PrimaryKey)
	}
	return nil
}

// headerNames returns the column names a header row gives: each trimmed of
// spaces, an empty one named column<i> as DuckDB does. It fails (with a
// *CSVError) on a name given twice or not UTF-8.
func headerNames(header []string) ([]string, *CSVError) {
	names := make([]string, len(header))
	gen := generatedNames(len(header))
	seen := make(map[string]int, len(header))
	for i, h := range header {
		name := strings.TrimFunc(h, func(r rune) bool { return unicode.Is(unicode.Zs, r) })
		if name == "" {
			name = gen[i]
		}
		if !utf8.ValidString(name) {
			return nil, &CSVError{Err: fmt.Errorf("the name of column %d, %s, is not valid UTF-8", i+1, quoteValue(name))}
		}
		if j, ok := seen[name]; ok {
			return nil, &CSVError{Column: name, Err: fmt.Errorf("appears twice in the header (fields %d and %d)", j+1, i+1)}
		}
		seen[name] = i
		names[i] = name
	}
	return names, nil
}

// generatedNames names n columns as DuckDB names those of a file without a
// header: column0, column1, ..., the numbers zero-padded to one width
// (column00 .. column10 for 11 columns).
func generatedNames(n int) []string {
	width := len(strconv.Itoa(max(n-1, 0)))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("column%0*d", width, i)
	}
	return names
}

// matchHeader checks the header names the schema's columns, in order.
func matchHeader(names []string, schema *arrow.Schema) *CSVError {
	if len(names) != schema.NumFields() {
		theirs := make([]string, schema.NumFields())
		for i, f := range schema.Fields() {
			theirs[i] = f.Name
		}
		return &CSVError{Err: fmt.Errorf("the header has %d columns (%s), the schema %d (%s)",
			len(names), nameList(names), len(theirs), nameList(theirs))}
	}
	for i, f := range schema.Fields() {
		if f.Name != names[i] {
			return &CSVError{Column: names[i], Err: fmt.Errorf("the schema's column %d is %q", i+1, f.Name)}
		}
	}
	return nil
}

// nameList joins names for a message, the first ten of them.
func nameList(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}

// readError turns an error of the CSV reader into a *CSVError; an error
// reading the input itself (a canceled context, say) is returned as is.
func (s *csvSource) readError(err error) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	e := &CSVError{Name: s.name, Line: pe.Line, Err: pe.Err}
	if pe.StartLine != pe.Line {
		e.Err = fmt.Errorf("%w (the field starts on line %d)", pe.Err, pe.StartLine)
	}
	return e
}

func (s *csvSource) fieldCount(line, n int) error {
	fields := "fields"
	if n == 1 {
		fields = "field"
	}
	return &CSVError{Name: s.name, Line: line, Err: fmt.Errorf("%d %s, %s", n, fields, s.width)}
}

// Next reads the next batch of up to chunk rows.
func (s *csvSource) Next() bool {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.done {
		return false
	}
	s.bld.Reserve(s.chunk)
	n := 0
	for ; n < s.chunk; n++ {
		var (
			rec []string
			p   probedRow // the row, if probed
		)
		if len(s.probed) > 0 {
			p = s.probed[0]
			s.probed[0] = probedRow{}
			s.probed = s.probed[1:]
			rec = p.rec
		} else {
			var err error
			rec, err = s.cr.Read()
			if errors.Is(err, io.EOF) {
				s.done = true
				break
			}
			if err != nil {
				s.fail(s.readError(err))
				return false
			}
		}
		if len(rec) != len(s.append) {
			s.fail(s.fieldCount(s.lineOf(&p, 0), len(rec)))
			return false
		}
		s.lines.add(s.rows, s.lineOf(&p, 0))
		s.rows++
		for i, v := range rec {
			if err := s.append[i](v); err != nil {
				line := s.lineOf(&p, i)
				if s.inferTo > 0 && line > s.inferTo {
					err = fmt.Errorf("%w (types were inferred from lines %d to %d; give a schema)", err, s.inferFrom, s.inferTo)
				}
				s.fail(&CSVError{Name: s.name, Line: line, Column: s.schema.Field(i).Name, Err: err})
				return false
			}
		}
	}
	if n == 0 {
		return false
	}
	s.cur = s.bld.NewRecordBatch()
	return true
}

// lineOf returns the line field i of the row just read starts on: p if
// the row was probed, else the CSV reader's last.
func (s *csvSource) lineOf(p *probedRow, i int) int {
	switch {
	case p.rec == nil:
		line, _ := s.cr.FieldPos(i)
		return line
	case p.lines != nil:
		return p.lines[i]
	}
	return p.line
}

func (s *csvSource) fail(err error) {
	s.err, s.done = err, true
}

func (s *csvSource) RecordBatch() arrow.RecordBatch { return s.cur }
func (s *csvSource) Schema() *arrow.Schema          { return s.schema }

// rowLine returns the line input row (0-based, in input order) starts on.
func (s *csvSource) rowLine(row int64) int { return s.lines.line(row) }
func (s *csvSource) Err() error            { return s.err }

// Release frees the batch and the builders.
func (s *csvSource) Release() {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	s.bld.Release()
}

func (s *csvSource) isNull(v string) bool { return slices.Contains(s.nulls, v) }

// valueError says a field does not read as its column's type.
type valueError struct {
	value, typ, why string
}

func (e *valueError) Error() string {
	msg := fmt.Sprintf("cannot parse %s as %s", quoteValue(e.value), e.typ)
	if e.why != "" {
		msg += ": " + e.why
	}
	return msg
}

// quoteValue quotes v for a message, cut after 60 bytes.
func quoteValue(v string) string {
	if len(v) > 64 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "..."
	}
	return strconv.Quote(v)
}

// numError turns a strconv error into a valueError.
func numError(v string, t arrow.DataType, err error) error {
	e := &valueError{value: v, typ: TypeString(t)}
	if errors.Is(err, strconv.ErrRange) {
		e.why = "out of range"
	}
	return e
}

// appender returns the function that appends a field to b, a builder of
// type t.
func (s *csvSource) appender(b array.Builder, t arrow.DataType) (func(string) error, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		bits := t.(arrow.FixedWidthDataType).BitWidth()
		return func(v string) error {
			if s.isNull(v) {
				b.AppendNull()
				return nil
			}
			n, err := strconv.ParseInt(v, 10, bits)
			if err != nil {
				return numError(v, t, err)
			}
			switch b := b.(type) {
			case *array.Int8Builder:
				b.Append(int8(n))
			case *array.Int16Builder:
				b.Append(int16(n))
			case *array.Int32Builder:
				b.Append(int32(n))
			case *array.Int64Builder:
				b.Append(n)
			}
			return nil
		}, nil
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		bits := t.(arrow.FixedWidthDataType).BitWidth()
		return func(v string) error {
			if s.isNull(v) {
				b.AppendNull()
				return nil
			}
			n, err := strconv.ParseUint(v, 10, bits)
			if err != nil {
				return numError(v, t, err)
			}
			switch b := b.(type) {
			case *array.Uint8Builder:
				b.Append(uint8(n))
			case *array.Uint16Builder:
				b.Append(uint16(n))
			case *array.Uint32Builder:
				b.Append(uint32(n))
			case *array.Uint64Builder:
				b.Append(n)
			}
			return nil
		}, nil
	case arrow.FLOAT32:
		fb := b.(*array.Float32Builder)
		return func(v string) error {
			if s.isNull(v) {
				fb.AppendNull()
				return nil
			}
			f, err := parseFloat(v, 32)
			if err != nil {
				return numError(v, t, err)
			}
			fb.Append(float32(f))
			return nil
		}, nil
	case arrow.FLOAT64:
		fb := b.(*array.Float64Builder)
		return func(v string) error {
			if s.isNull(v) {
				fb.AppendNull()
				return nil
			}
			f, err := parseFloat(v, 64)
			if err != nil {
				return numError(v, t, err)
			}
			fb.Append(f)
			return nil
		}, nil
	case arrow.BOOL:
		bb := b.(*array.BooleanBuilder)
		return func(v string) error {
			if s.isNull(v) {
				bb.AppendNull()
				return nil
			}
			x, err := strconv.ParseBool(v)
			if err != nil {
				return &valueError{value: v, typ: "bool"}
			}
			bb.Append(x)
			return nil
		}, nil
	case arrow.DATE32:
		db := b.(*array.Date32Builder)
		return func(v string) error {
			if s.isNull(v) {
				db.AppendNull()
				return nil
			}
			c, ok := scanCivil(v)
			if !ok || c.hasTime {
				return &valueError{value: v, typ: "date", why: "want YYYY-MM-DD"}
			}
			db.Append(arrow.Date32FromTime(c.time(time.UTC)))
			return nil
		}, nil
	case arrow.TIMESTAMP:
		ts := t.(*arrow.TimestampType)
		if ts.Unit != arrow.Microsecond {
			return nil, fmt.Errorf("%w: %s", columnar.ErrUnsupportedType, t)
		}
		loc := time.UTC
		if ts.TimeZone != "" && ts.TimeZone != "UTC" {
			var err error
			if loc, err = time.LoadLocation(ts.TimeZone); err != nil {
				return nil, fmt.Errorf("time zone of %s: %w", t, err)
			}
		}
		tb := b.(*array.TimestampBuilder)
		name := TypeString(t)
		return func(v string) error {
			if s.isNull(v) {
				tb.AppendNull()
				return nil
			}
			c, ok := scanCivil(v)
			switch {
			case !ok:
				return &valueError{value: v, typ: name}
			case c.nsec%1000 != 0:
				return &valueError{value: v, typ: name, why: "more precise than microseconds"}
			case c.zoned && ts.TimeZone == "":
				return &valueError{value: v, typ: name, why: "it has a zone offset; make the column timestamptz"}
			}
			tb.Append(arrow.Timestamp(c.time(loc).UnixMicro()))
			return nil
		}, nil
	case arrow.STRING:
		sb := b.(*array.StringBuilder)
		return func(v string) error {
			if s.strNul && s.isNull(v) {
				sb.AppendNull()
				return nil
			}
			if !utf8.ValidString(v) {
				return fmt.Errorf("%s is not valid UTF-8", quoteValue(v))
			}
			sb.Append(v)
			return nil
		}, nil
	case arrow.BINARY:
		bb := b.(*array.BinaryBuilder)
		return func(v string) error {
			if s.isNull(v) {
				bb.AppendNull()
				return nil
			}
			x, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return &valueError{value: v, typ: "binary (base64)"}
			}
			bb.Append(x)
			return nil
		}, nil
	}
	return nil, fmt.Errorf("%w: %s", columnar.ErrUnsupportedType, t)
}
