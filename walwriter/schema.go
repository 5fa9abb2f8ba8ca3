package walwriter

import (
	"fmt"
	"unicode/utf8"

	"github.com/strata-db/strata/messages"
)

// A table's column types are messages.RowType, the types of the
// canonical row encoding the update events carry; they decide which values
// a column accepts, and the WAL stores every value as bytes. A segment
// stores each type as one byte, its code below (the package doc's "column
// types"); the codes are the WAL's format and never change.
var columnCodes = [...]messages.RowType{
	1: messages.RowInt64, 2: messages.RowFloat64, 3: messages.RowBool, 4: messages.RowText,
	5: messages.RowBytes, 6: messages.RowTimestamp, 7: messages.RowDate,
}

// columnCode returns the segment byte of column type t, 0 if t is not a
// known type.
func columnCode(t messages.RowType) byte {
	for c, name := range columnCodes {
		if c > 0 && name == t {
			return byte(c)
		}
	}
	return 0
}

// columnType returns the column type of segment byte c.
func columnType(c byte) (messages.RowType, bool) {
	if c == 0 || int(c) >= len(columnCodes) {
		return "", false
	}
	return columnCodes[c], true
}

// checkValue reports why v is not a valid value of type t, or nil.
func checkValue(t messages.RowType, v []byte) error {
	if v == nil {
		return nil
	}
	if w := t.Width(); w != 0 && len(v) != w {
		return fmt.Errorf("%s value of %d bytes, want %d", t, len(v), w)
	}
	switch t {
	case messages.RowBool:
		if v[0] > 1 {
			return fmt.Errorf("bool value %d, want 0 or 1", v[0])
		}
	case messages.RowText:
		if !utf8.Valid(v) {
			return fmt.Errorf("text value is not valid UTF-8")
		}
	}
	return nil
}

// Table describes a table whose updates the WAL accepts.
type Table struct {
	Name    string
	Columns []messages.RowType
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
		if !c.Valid() {
			return fmt.Errorf("walwriter: table %q: column %d: unknown type %q", t.Name, i, c)
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
		if err := checkValue(t.Columns[i], v); err != nil {
			return fmt.Errorf("column %d: %v", i, err)
		}
	}
	return nil
}
