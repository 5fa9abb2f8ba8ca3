package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/internal/bytesize"
)

// A table is what a command prints: named columns of typed cells, written
// as an aligned table for people or as CSV or JSON for programs.
//
// A cell is nil (NULL: nothing known), a string, an int64, a bool, a size
// (bytes), a time.Time or a time.Duration. The formats write them:
//
//	cell           table              csv                      json
//	nil            - (humanNull)      (empty; csvNull)         null
//	string         escaped (\n, \t)   as is; "" quoted          string
//	int64          123                123                      123
//	bool           YES / no           true / false             true / false
//	size           674.5KiB           690688                   690688
//	time.Time      2006-01-02 15:04:05.000   RFC 3339 in UTC   RFC 3339 string
//	time.Duration  22ms               0.022 (seconds)          0.022 (seconds)
//
// A column's key names it in CSV and JSON (a duration's key ends in
// _seconds); its name heads the aligned table. JSON is an array of objects
// whose keys are in column order.
type table struct {
	cols []column
	rows [][]any
	// How nil is written: in the aligned table (default "-") and in CSV
	// (default the empty field). A window result writes NULL.
	humanNull, csvNull string
}

// column is one column of a table.
type column struct {
	name string // header of the aligned table
	key  string // CSV header and JSON key; name when empty
}

// size is a cell counting bytes.
type size int64

// newTable returns a table of the columns named; "name:key" gives a
// column a key of its own.
func newTable(names ...string) *table {
	t := &table{}
	for _, n := range names {
		name, key, _ := strings.Cut(n, ":")
		t.cols = append(t.cols, column{name: name, key: key})
	}
	return t
}

func (c column) jsonKey() string {
	if c.key != "" {
		return c.key
	}
	return c.name
}

// add adds a row of cells, one per column.
func (t *table) add(cells ...any) { t.rows = append(t.rows, cells) }

// print writes t to w in format: table, json or csv.
func (t *table) print(w io.Writer, format string) error {
	switch format {
	case "", "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		names := make([]string, len(t.cols))
		for i, c := range t.cols {
			names[i] = escapeCell(c.name)
		}
		fmt.Fprintln(tw, strings.Join(names, "\t"))
		cells := make([]string, len(t.cols))
		for _, r := range t.rows {
			for i := range cells {
				if v := cellAt(r, i); v == nil && t.humanNull != "" {
					cells[i] = t.humanNull
				} else {
					cells[i] = humanCell(v)
				}
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		return tw.Flush()
	case "json":
		var b []byte
		b = append(b, '[')
		for ri, r := range t.rows {
			if ri > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n  {"...)
			for i, c := range t.cols {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = appendJSON(b, c.jsonKey())
				b = append(b, ": "...)
				b = appendJSONCell(b, cellAt(r, i))
			}
			b = append(b, '}')
		}
		if len(t.rows) > 0 {
			b = append(b, '\n')
		}
		b = append(b, "]\n"...)
		_, err := w.Write(b)
		return err
	case "csv":
		// As DuckDB's COPY ... TO: a value that is not NULL but empty, or
		// spells NULL, is quoted (convert.AppendCSVField).
		var b []byte
		for i, c := range t.cols {
			if i > 0 {
				b = append(b, ',')
			}
			b = convert.AppendCSVField(b, c.jsonKey(), ',', "")
		}
		b = append(b, '\n')
		for _, r := range t.rows {
			for i := range t.cols {
				if i > 0 {
					b = append(b, ',')
				}
				if v := cellAt(r, i); v == nil {
					b = append(b, t.csvNull...)
				} else {
					b = convert.AppendCSVField(b, plainCell(v), ',', t.csvNull)
				}
			}
			b = append(b, '\n')
		}
		_, err := w.Write(b)
		return err
	}
	return fmt.Errorf("%w: --format %q: want table, json or csv", errUsage, format)
}

func cellAt(r []any, i int) any {
	if i < len(r) {
		return r[i]
	}
	return nil
}

// humanCell renders a cell for the aligned table.
func humanCell(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		return escapeCell(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case bool:
		if v {
			return "YES"
		}
		return "no"
	case size:
		return bytesize.Format(int64(v))
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05.000")
	case time.Duration:
		return v.Round(time.Millisecond).String()
	}
	return escapeCell(fmt.Sprint(v))
}

// escapeCell keeps a value on its line and in its column: a line break,
// tab or other control character becomes its Go escape (\n, \t, \x1b),
// and a backslash is doubled so the escapes read back.
func escapeCell(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// plainCell renders a cell for CSV: no units, NULL empty.
func plainCell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case size:
		return strconv.FormatInt(int64(v), 10)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return strconv.FormatFloat(v.Seconds(), 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// appendJSONCell appends a cell as a typed JSON value.
func appendJSONCell(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendJSON(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case bool:
		return strconv.AppendBool(b, v)
	case size:
		return strconv.AppendInt(b, int64(v), 10)
	case time.Time:
		return appendJSON(b, v.UTC().Format(time.RFC3339Nano))
	case time.Duration:
		s := v.Seconds()
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return append(b, "null"...)
		}
		return strconv.AppendFloat(b, s, 'f', -1, 64)
	}
	return appendJSON(b, fmt.Sprint(v))
}

func appendJSON(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // a string always encodes
	return append(b, enc...)
}

func checkFormat(format string) error {
	switch format {
	case "table", "json", "csv":
		return nil
	}
	return fmt.Errorf("%w: --format %q: want table, json or csv", errUsage, format)
}

// The cells of optional values: nil when the value is unknown.

// timeCell is the time of ns nanoseconds since 1970, nil for 0.
func timeCell(ns int64) any {
	if ns == 0 {
		return nil
	}
	return time.Unix(0, ns).UTC()
}

// durationCell is end - start, nil when either is unknown.
func durationCell(start, end int64) any {
	if start == 0 || end == 0 {
		return nil
	}
	return time.Duration(end - start)
}

// sizeCell is n bytes, nil for 0 (not measured, not granted).
func sizeCell(n int64) any {
	if n == 0 {
		return nil
	}
	return size(n)
}

// textCell is s, nil when empty.
func textCell(s string) any {
	if s == "" {
		return nil
	}
	return s
}
