package columnar

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// ColumnSchema is one column of a manifest's schema.
type ColumnSchema struct {
	Name     string `json:"name"`
	Type     string `json:"type"`               // see TypeName
	Nullable bool   `json:"nullable"`           //
	TimeZone string `json:"timezone,omitempty"` // timestamp_us only
}

// TypeName returns the manifest name of an Arrow type ("int64", "utf8",
// "timestamp_us", ...) or an error wrapping ErrUnsupportedType.
func TypeName(t arrow.DataType) (string, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL, arrow.DATE32:
		return t.Name(), nil
	case arrow.STRING:
		return "utf8", nil
	case arrow.BINARY:
		return "binary", nil
	case arrow.TIMESTAMP:
		if t.(*arrow.TimestampType).Unit == arrow.Microsecond {
			return "timestamp_us", nil
		}
	}
	return "", fmt.Errorf("%w: %s (want int8..int64, uint8..uint64, float32, float64, bool, utf8, binary, date32 or timestamp[us])", ErrUnsupportedType, t)
}

// dataTypeOf is the inverse of TypeName.
func dataTypeOf(c ColumnSchema) (arrow.DataType, error) {
	switch c.Type {
	case "int8":
		return arrow.PrimitiveTypes.Int8, nil
	case "int16":
		return arrow.PrimitiveTypes.Int16, nil
	case "int32":
		return arrow.PrimitiveTypes.Int32, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "uint8":
		return arrow.PrimitiveTypes.Uint8, nil
	case "uint16":
		return arrow.PrimitiveTypes.Uint16, nil
	case "uint32":
		return arrow.PrimitiveTypes.Uint32, nil
	case "uint64":
		return arrow.PrimitiveTypes.Uint64, nil
	case "float32":
		return arrow.PrimitiveTypes.Float32, nil
	case "float64":
		return arrow.PrimitiveTypes.Float64, nil
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "date32":
		return arrow.FixedWidthTypes.Date32, nil
	case "utf8":
		return arrow.BinaryTypes.String, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "timestamp_us":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: c.TimeZone}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedType, c.Type)
}

// SchemaColumns converts an Arrow schema to manifest columns, rejecting
// unsupported types and duplicate or empty names.
func SchemaColumns(s *arrow.Schema) ([]ColumnSchema, error) {
	if s == nil || s.NumFields() == 0 {
		return nil, fmt.Errorf("%w: schema has no columns", ErrSchemaMismatch)
	}
	cols := make([]ColumnSchema, s.NumFields())
	seen := make(map[string]bool, s.NumFields())
	for i, f := range s.Fields() {
		if f.Name == "" {
			return nil, fmt.Errorf("%w: column %d has no name", ErrSchemaMismatch, i)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: duplicate column name %q", ErrSchemaMismatch, f.Name)
		}
		if !utf8.ValidString(f.Name) {
			// The manifest is JSON, which cannot hold the name.
			return nil, fmt.Errorf("%w: column %d name %q is not UTF-8", ErrSchemaMismatch, i, f.Name)
		}
		seen[f.Name] = true
		name, err := TypeName(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols[i] = ColumnSchema{Name: f.Name, Type: name, Nullable: f.Nullable}
		if ts, ok := f.Type.(*arrow.TimestampType); ok {
			cols[i].TimeZone = ts.TimeZone
		}
	}
	return cols, nil
}

// ArrowSchema converts manifest columns back to an Arrow schema.
func ArrowSchema(cols []ColumnSchema) (*arrow.Schema, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: schema has no columns", ErrSchemaMismatch)
	}
	fields := make([]arrow.Field, len(cols))
	seen := make(map[string]bool, len(cols))
	for i, c := range cols {
		if c.Name == "" {
			return nil, fmt.Errorf("%w: column %d has no name", ErrSchemaMismatch, i)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("%w: duplicate column name %q", ErrSchemaMismatch, c.Name)
		}
		seen[c.Name] = true
		t, err := dataTypeOf(c)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		fields[i] = arrow.Field{Name: c.Name, Type: t, Nullable: c.Nullable}
	}
	return arrow.NewSchema(fields, nil), nil
}
