package main

import (
	"bufio"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/messages"
)

// The values of a changes file read as strata load's CSV import reads
// them (columnar/convert, package doc "CSV"), whose parsing is not
// exported: decimal integers within the column's width, decimal floats
// (NaN, Inf), strconv.ParseBool's booleans, dates YYYY-MM-DD, timestamps
// "YYYY-MM-DD[ HH:MM[:SS[.fraction]]]" (T for the space) with a zone
// offset only in a zoned column, UTF-8 text, base64 binary; a field that
// is one of the NULL spellings is NULL in every column, text included
// (strata load's StringsNull).

// changeReader reads the rows of a changes CSV of a keyed table.
type changeReader struct {
	name   string
	cr     *csv.Reader
	nulls  []string
	opName string        // the header's spelling of op
	fields int           // fields per row: op and every column
	col    []int         // per field after op: the table column it holds
	names  []string      // per table column (schema order, change columns left out)
	parse  []valueParser // per table column
	isKey  []bool        // per table column
}

// valueParser reads a CSV field that is not NULL as a value of a column,
// in the Go type messages.EncodeRow takes for its row type.
type valueParser func(string) (any, error)

// newChangeReader reads the header of a changes CSV and matches it to
// table t's columns (every column but the change columns, once each, in
// any order, after op).
func newChangeReader(r io.Reader, name string, t *applier.Table, nulls []string) (*changeReader, error) {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		br.Discard(3) // a UTF-8 byte order mark, as spreadsheets write
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1 // checked here, to say more
	cr.ReuseRecord = true
	c := &changeReader{name: name, cr: cr, nulls: nulls}
	ncols := len(t.Types())
	for i, f := range t.Schema.Fields()[:ncols] {
		p, err := parserFor(f.Type)
		if err != nil {
			return nil, fmt.Errorf("table %s: column %q: %w", t.Name, f.Name, err)
		}
		c.names = append(c.names, f.Name)
		c.parse = append(c.parse, p)
		c.isKey = append(c.isKey, slices.Contains(t.KeyColumns(), i))
	}
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &convert.CSVError{Name: name, Line: 1, Err: errors.New("no header row: want op and the columns of " + t.Name)}
	}
	if err != nil {
		return nil, c.readError(err)
	}
	herr := func(column, format string, args ...any) error {
		return &convert.CSVError{Name: name, Line: 1, Column: column, Err: fmt.Errorf(format, args...)}
	}
	names := make([]string, len(header))
	for i, h := range header {
		names[i] = strings.TrimSpace(h)
	}
	if !strings.EqualFold(names[0], "op") {
		return nil, herr(names[0], "the first column must be op (insert, update or delete, or I, U, D), then the columns of %s", t.Name)
	}
	c.opName = names[0]
	seen := make([]bool, ncols)
	var unknown []string
	for i, n := range names[1:] {
		col := slices.Index(c.names, n)
		switch {
		case strings.EqualFold(n, "op"):
			return nil, herr(n, "op named twice (fields 1 and %d)", i+2)
		case col < 0:
			unknown = append(unknown, strconv.Quote(n))
			continue
		case seen[col]:
			return nil, herr(n, "named twice")
		}
		seen[col] = true
		c.col = append(c.col, col)
	}
	var missing []string
	for i, s := range seen {
		if !s {
			missing = append(missing, strconv.Quote(c.names[i]))
		}
	}
	if len(unknown) > 0 || len(missing) > 0 {
		var why []string
		if len(missing) > 0 {
			why = append(why, "missing column"+plural(len(missing))+" "+strings.Join(missing, ", "))
		}
		if len(unknown) > 0 {
			why = append(why, "unknown column"+plural(len(unknown))+" "+strings.Join(unknown, ", "))
		}
		return nil, herr("", "%s: the header is op and every column of %s: %s", strings.Join(why, "; "), t.Name, quoteList(c.names))
	}
	c.fields = len(names)
	return c, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// readError turns an error of the CSV reader into a *convert.CSVError.
func (c *changeReader) readError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &convert.CSVError{Name: c.name, Line: pe.Line, Err: fmt.Errorf("%v (at character %d of the line)", pe.Err, pe.Column)}
	}
	return fmt.Errorf("read %s: %w", c.name, err)
}

// next reads the next change; io.EOF after the last.
func (c *changeReader) next() (*change, error) {
	rec, err := c.cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, c.readError(err)
	}
	line, _ := c.cr.FieldPos(0)
	if len(rec) != c.fields {
		return nil, &convert.CSVError{Name: c.name, Line: line, Err: fmt.Errorf("%d fields, the header has %d", len(rec), c.fields)}
	}
	fail := func(field int, format string, args ...any) error {
		l, _ := c.cr.FieldPos(field) // a row spanning lines: the field's own line
		name := c.opName
		if field > 0 {
			name = c.names[c.col[field-1]]
		}
		return &convert.CSVError{Name: c.name, Line: l, Column: name, Err: fmt.Errorf(format, args...)}
	}
	ch := &change{line: line, row: make([]any, len(c.names))}
	switch strings.ToLower(strings.TrimSpace(rec[0])) {
	case "insert", "i":
		ch.op = messages.OpInsert
	case "update", "u":
		ch.op = messages.OpUpdate
	case "delete", "d":
		ch.op = messages.OpDelete
	default:
		return nil, fail(0, "op %s: want insert, update or delete (or I, U, D)", quoteField(rec[0]))
	}
	for f, v := range rec[1:] {
		col := c.col[f]
		if slices.Contains(c.nulls, v) {
			if c.isKey[col] {
				return nil, fail(f+1, "NULL in a key column (every change names its row by its key)")
			}
			continue
		}
		x, err := c.parse[col](v)
		if err != nil {
			return nil, fail(f+1, "%v", err)
		}
		// A delete's other columns are checked but not sent: the event
		// carries the key only.
		if ch.op != messages.OpDelete || c.isKey[col] {
			ch.row[col] = x
		}
	}
	return ch, nil
}

// quoteField quotes a field for a message, cut after 60 bytes.
func quoteField(v string) string {
	if len(v) > 64 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + "..."
	}
	return strconv.Quote(v)
}

// cannotParse is the error of a field that does not read as its type.
func cannotParse(v string, t arrow.DataType, why string) error {
	msg := fmt.Sprintf("cannot parse %s as %s", quoteField(v), convert.TypeString(t))
	if why != "" {
		msg += ": " + why
	}
	return errors.New(msg)
}

// parserFor returns the parser of a column of Arrow type t (the types
// applier.RowType maps to a row type).
func parserFor(t arrow.DataType) (valueParser, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		bits := t.(arrow.FixedWidthDataType).BitWidth()
		return func(v string) (any, error) {
			n, err := strconv.ParseInt(v, 10, bits)
			if err != nil {
				return nil, cannotParse(v, t, rangeWhy(err))
			}
			return n, nil
		}, nil
	case arrow.UINT8, arrow.UINT16, arrow.UINT32:
		bits := t.(arrow.FixedWidthDataType).BitWidth()
		return func(v string) (any, error) {
			n, err := strconv.ParseUint(v, 10, bits)
			if err != nil {
				return nil, cannotParse(v, t, rangeWhy(err))
			}
			return int64(n), nil
		}, nil
	case arrow.FLOAT32, arrow.FLOAT64:
		bits := t.(arrow.FixedWidthDataType).BitWidth()
		return func(v string) (any, error) {
			f, err := parseDecimalFloat(v, bits)
			if err != nil {
				return nil, cannotParse(v, t, rangeWhy(err))
			}
			return f, nil
		}, nil
	case arrow.BOOL:
		return func(v string) (any, error) {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, cannotParse(v, t, "")
			}
			return b, nil
		}, nil
	case arrow.DATE32:
		return func(v string) (any, error) {
			d, err := time.Parse(time.DateOnly, v)
			if err != nil {
				return nil, cannotParse(v, t, "want YYYY-MM-DD")
			}
			days := d.Unix() / 86400
			if days < math.MinInt32 || days > math.MaxInt32 {
				return nil, cannotParse(v, t, "out of range")
			}
			return int32(days), nil
		}, nil
	case arrow.TIMESTAMP:
		ts := t.(*arrow.TimestampType)
		if ts.Unit != arrow.Microsecond {
			break
		}
		loc := time.UTC
		if ts.TimeZone != "" && ts.TimeZone != "UTC" {
			var err error
			if loc, err = time.LoadLocation(ts.TimeZone); err != nil {
				return nil, fmt.Errorf("time zone of %s: %w", t, err)
			}
		}
		zoned := ts.TimeZone != ""
		return func(v string) (any, error) {
			tm, hasZone, ok := parseTimestamp(v, loc)
			switch {
			case !ok:
				return nil, cannotParse(v, t, "want YYYY-MM-DD HH:MM:SS[.ffffff]")
			case tm.Nanosecond()%1000 != 0:
				return nil, cannotParse(v, t, "more precise than microseconds")
			case hasZone && !zoned:
				return nil, cannotParse(v, t, "it has a zone offset and the column is a timestamp without time zone")
			}
			return tm.UnixMicro(), nil
		}, nil
	case arrow.STRING, arrow.LARGE_STRING:
		return func(v string) (any, error) {
			if !utf8.ValidString(v) {
				return nil, fmt.Errorf("%s is not valid UTF-8", quoteField(v))
			}
			return v, nil
		}, nil
	case arrow.BINARY, arrow.LARGE_BINARY:
		return func(v string) (any, error) {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, cannotParse(v, t, "want base64")
			}
			return b, nil
		}, nil
	}
	return nil, fmt.Errorf("%w: %s", columnar.ErrUnsupportedType, t)
}

func rangeWhy(err error) string {
	if errors.Is(err, strconv.ErrRange) {
		return "out of range"
	}
	return ""
}

// parseDecimalFloat is strconv.ParseFloat restricted to decimal spellings
// (and NaN and infinities), as the CSV import reads floats: no hexadecimal
// mantissas, no underscores.
func parseDecimalFloat(v string, bits int) (float64, error) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		default:
			switch strings.ToLower(strings.TrimLeft(v, "+-")) {
			case "nan", "inf", "infinity":
				return strconv.ParseFloat(v, bits)
			}
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseFloat(v, bits)
}

// The layouts of a timestamp: a date, a date and a time of day to the
// minute or second (with up to nine fractional digits), each without a
// zone or followed by one (Z, +02:00, +0200 or +02, perhaps after a
// space).
var (
	timestampLayouts = []string{time.DateOnly, "2006-01-02 15:04", "2006-01-02 15:04:05.999999999"}
	zoneLayouts      = []string{"Z07:00", "Z0700", "Z07", " Z07:00", " Z0700", " Z07"}
)

// parseTimestamp reads v as a timestamp, in loc unless it names its zone.
func parseTimestamp(v string, loc *time.Location) (t time.Time, hasZone, ok bool) {
	if len(v) > 10 && (v[10] == 'T' || v[10] == 't') {
		v = v[:10] + " " + v[11:]
	}
	for _, l := range timestampLayouts {
		if t, err := time.ParseInLocation(l, v, loc); err == nil {
			return t, false, true
		}
	}
	if len(v) <= 10 {
		return t, false, false
	}
	for _, l := range timestampLayouts[1:] {
		for _, z := range zoneLayouts {
			if t, err := time.Parse(l+z, v); err == nil {
				return t, true, true
			}
		}
	}
	return t, false, false
}
