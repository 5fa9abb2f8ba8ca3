package applier

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// Table is what applying changes needs of a keyed table: its projection's
// schema (change columns included), sort key and primary key, and the row
// encoding of its change events.
type Table struct {
	Name       string
	Projection string
	Schema     *arrow.Schema // the containers' schema, ending with the change columns
	SortKey    columnar.SortKey
	PrimaryKey []string

	types  []messages.RowType // of the columns before the change columns
	keyIdx []int              // schema positions of the key columns, in key order
}

// NewTable describes a keyed table from one of its containers' manifest.
func NewTable(m *columnar.Manifest) (*Table, error) {
	if len(m.PrimaryKey) == 0 {
		return nil, fmt.Errorf("table %s.%s has no primary key", m.Table, m.Projection)
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, fmt.Errorf("table %s.%s: %w", m.Table, m.Projection, err)
	}
	t := &Table{Name: m.Table, Projection: m.Projection, Schema: schema, SortKey: m.SortKey, PrimaryKey: slices.Clone(m.PrimaryKey)}
	if t.types, err = RowTypes(schema); err != nil {
		return nil, fmt.Errorf("table %s.%s: %w", m.Table, m.Projection, err)
	}
	for _, name := range m.PrimaryKey {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("table %s.%s: key column %q is not in the schema", m.Table, m.Projection, name)
		}
		t.keyIdx = append(t.keyIdx, idx[0])
	}
	return t, nil
}

// Types are the row types of the table's columns in a change event: every
// column but the change columns, in schema order.
func (t *Table) Types() []messages.RowType { return t.types }

// KeyTypes are the row types of the key columns, in key order: a change
// event's Key is their row encoding.
func (t *Table) KeyTypes() []messages.RowType {
	out := make([]messages.RowType, len(t.keyIdx))
	for i, c := range t.keyIdx {
		out[i] = t.types[c]
	}
	return out
}

// KeyColumns are the schema positions of the key columns, in key order.
func (t *Table) KeyColumns() []int { return t.keyIdx }

// RowTypes maps a table's Arrow schema to the row types of its change
// events: every column but the change columns. Integers of any width are
// int64 on the wire (a value out of the column's range is refused when
// applied), float32 is float64, strings are text, binary is bytes,
// microsecond timestamps are timestamp and date32 is date.
func RowTypes(schema *arrow.Schema) ([]messages.RowType, error) {
	var out []messages.RowType
	for _, f := range schema.Fields() {
		if columnar.IsChangeColumn(f.Name) {
			continue
		}
		rt, err := RowType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		out = append(out, rt)
	}
	return out, nil
}

// RowType is the row type of one Arrow type (see RowTypes).
func RowType(t arrow.DataType) (messages.RowType, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return messages.RowInt64, nil
	case arrow.FLOAT32, arrow.FLOAT64:
		return messages.RowFloat64, nil
	case arrow.BOOL:
		return messages.RowBool, nil
	case arrow.STRING, arrow.LARGE_STRING:
		return messages.RowText, nil
	case arrow.BINARY, arrow.LARGE_BINARY:
		return messages.RowBytes, nil
	case arrow.DATE32:
		return messages.RowDate, nil
	case arrow.TIMESTAMP:
		if t.(*arrow.TimestampType).Unit == arrow.Microsecond {
			return messages.RowTimestamp, nil
		}
	}
	return "", fmt.Errorf("type %s has no change-event row type", t)
}

// Value is row r of a as the Go value of its row type that
// messages.EncodeRow takes (RowType: int64 for every integer width,
// float64 for both float widths, int32 days for a date, int64
// microseconds for a timestamp, copies of strings and bytes); nil for
// NULL or a type without a row type.
func Value(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int8:
		return int64(a.Value(r))
	case *array.Int16:
		return int64(a.Value(r))
	case *array.Int32:
		return int64(a.Value(r))
	case *array.Int64:
		return a.Value(r)
	case *array.Uint8:
		return int64(a.Value(r))
	case *array.Uint16:
		return int64(a.Value(r))
	case *array.Uint32:
		return int64(a.Value(r))
	case *array.Float32:
		return float64(a.Value(r))
	case *array.Float64:
		return a.Value(r)
	case *array.Boolean:
		return a.Value(r)
	case *array.String:
		return strings.Clone(a.Value(r))
	case *array.LargeString:
		return strings.Clone(a.Value(r))
	case *array.Binary:
		return slices.Clone(a.Value(r))
	case *array.LargeBinary:
		return slices.Clone(a.Value(r))
	case *array.Date32:
		return int32(a.Value(r))
	case *array.Timestamp:
		return int64(a.Value(r))
	}
	return nil
}
