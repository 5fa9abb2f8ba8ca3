package walwriter

import (
	"fmt"
	"unicode/utf8"
)

// ColumnType is the type of one column of a table. It decides which values
// a column accepts; the WAL stores every value as bytes.
type ColumnType uint8

// Column types and the value bytes each accepts (nil is NULL for all of them).
const (
	Int64     ColumnType = 1 // 8 bytes
	Float64   ColumnType = 2 // 8 bytes
	Bool      ColumnType = 3 // 1 byte, 0 or 1
	Text      ColumnType = 4 // valid UTF-8
	Bytes     ColumnType = 5 // anything
	Timestamp ColumnType = 6 // 8 bytes (microseconds)
	Date      ColumnType = 7 // 4 bytes (days)
)

var columnTypeNames = [...]string{
	Int64: "int64", Float64: "float64", Bool: "bool", Text: "text",
	Bytes: "bytes", Timestamp: "timestamp", Date: "date",
}

func (t ColumnType) String() string {
	if t.valid() {
		return columnTypeNames[t]
	}
	return fmt.Sprintf("ColumnType(%d)", uint8(t))
}

func (t ColumnType) valid() bool { return t >= Int64 && t <= Date }

// ParseColumnType returns the type named s ("int64", "text", ...).
func ParseColumnType(s string) (ColumnType, error) {
	for t, name := range columnTypeNames {
		if name != "" && name == s {
			return ColumnType(t), nil
		}
	}
	return 0, fmt.Errorf("walwriter: unknown column type %q", s)
}

// fixedWidth is the byte width of a non-NULL value, or 0 when any width goes.
func (t ColumnType) fixedWidth() int {
	switch t {
	case Int64, Float64, Timestamp:
		return 8
	case Date:
		return 4
	case Bool:
		return 1
	}
	return 0
}

// checkValue reports why v is not a valid value of type t, or nil.
func (t ColumnType) checkValue(v []byte) error {
	if v == nil {
		return nil
	}
	if w := t.fixedWidth(); w != 0 && len(v) != w {
		return fmt.Errorf("%s value of %d bytes, want %d", t, len(v), w)
	}
	switch t {
	case Bool:
		if v[0] > 1 {
			return fmt.Errorf("bool value %d, want 0 or 1", v[0])
		}
	case Text:
		if !utf8.Valid(v) {
			return fmt.Errorf("text value is not valid UTF-8")
		}
	}
	return nil
}

// Table describes a table whose updates the WAL accepts.
type Table struct {
	Name    string
	Columns []ColumnType
}

// maxTableName bounds table names; they are stored once per segment.
const maxTableName = 255

func (t Table) validate() error {
	if t.Name == "" || len(t.Name) > maxTableName {
		return fmt.Errorf("walwriter: table name %q: want 1 to %d bytes", t.Name, maxTableName)
	}
	if len(t.Columns) == 0 || len(t.Columns) > maxColumns {
		return fmt.Errorf("walwriter: table %q: %d columns, want 1 to %d", t.Name, len(t.Columns), maxColumns)
	}
	for i, c := range t.Columns {
		if !c.valid() {
			return fmt.Errorf("walwriter: table %q: column %d: %v", t.Name, i, c)
		}
	}
	return nil
}

func (t Table) sameColumns(o Table) bool {
	if len(t.Columns) != len(o.Columns) {
		return false
	}
	for i := range t.Columns {
		if t.Columns[i] != o.Columns[i] {
			return false
		}
	}
	return true
}

// checkRow reports why row does not fit t's columns, or nil.
func (t *Table) checkRow(row Row) error {
	if len(row) != len(t.Columns) {
		return fmt.Errorf("%d values for %d columns", len(row), len(t.Columns))
	}
	for i, v := range row {
		if err := t.Columns[i].checkValue(v); err != nil {
			return fmt.Errorf("column %d: %v", i, err)
		}
	}
	return nil
}
