package convert

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/columnar"
)

// schemaTypes maps the type names ParseSchema accepts to Arrow types: the
// names TypeString prints, the manifest's names and the SQL spellings a
// DuckDB or PostgreSQL user writes.
var schemaTypes = map[string]arrow.DataType{
	"int8": arrow.PrimitiveTypes.Int8, "tinyint": arrow.PrimitiveTypes.Int8,
	"int16": arrow.PrimitiveTypes.Int16, "smallint": arrow.PrimitiveTypes.Int16,
	"int32": arrow.PrimitiveTypes.Int32, "int": arrow.PrimitiveTypes.Int32, "integer": arrow.PrimitiveTypes.Int32,
	"int64": arrow.PrimitiveTypes.Int64, "bigint": arrow.PrimitiveTypes.Int64,
	"uint8": arrow.PrimitiveTypes.Uint8, "utinyint": arrow.PrimitiveTypes.Uint8,
	"uint16": arrow.PrimitiveTypes.Uint16, "usmallint": arrow.PrimitiveTypes.Uint16,
	"uint32": arrow.PrimitiveTypes.Uint32, "uinteger": arrow.PrimitiveTypes.Uint32,
	"uint64": arrow.PrimitiveTypes.Uint64, "ubigint": arrow.PrimitiveTypes.Uint64,
	"float32": arrow.PrimitiveTypes.Float32, "real": arrow.PrimitiveTypes.Float32, "float": arrow.PrimitiveTypes.Float32, "float4": arrow.PrimitiveTypes.Float32,
	"float64": arrow.PrimitiveTypes.Float64, "double": arrow.PrimitiveTypes.Float64, "double precision": arrow.PrimitiveTypes.Float64, "float8": arrow.PrimitiveTypes.Float64,
	"bool": arrow.FixedWidthTypes.Boolean, "boolean": arrow.FixedWidthTypes.Boolean,
	"date": arrow.FixedWidthTypes.Date32, "date32": arrow.FixedWidthTypes.Date32,
	"timestamp": naiveTimestamp, "timestamp_us": naiveTimestamp,
	"timestamp without time zone": naiveTimestamp, "datetime": naiveTimestamp,
	"timestamptz":              &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	"timestamp with time zone": &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	"utf8":                     arrow.BinaryTypes.String, "string": arrow.BinaryTypes.String, "text": arrow.BinaryTypes.String,
	"varchar": arrow.BinaryTypes.String, "char": arrow.BinaryTypes.String, "character": arrow.BinaryTypes.String,
	"character varying": arrow.BinaryTypes.String,
	"binary":            arrow.BinaryTypes.Binary, "blob": arrow.BinaryTypes.Binary, "bytea": arrow.BinaryTypes.Binary, "varbinary": arrow.BinaryTypes.Binary,
}

// naiveTimestamp is timestamp[us] without a zone (arrow's
// FixedWidthTypes.Timestamp_us has the zone UTC).
var naiveTimestamp = &arrow.TimestampType{Unit: arrow.Microsecond}

const schemaTypesWanted = "want int8..int64, uint8..uint64, float32, float64, bool, date, timestamp, timestamptz, utf8 or binary"

// ParseSchema parses the schema of a CSV file written as a list of
// columns, each a name and a type:
//
//	id int64, ts timestamp, "unit price" double, name varchar
//
// A name may be double-quoted (a doubled quote inside stands for one) to
// hold spaces, commas or quotes. Types are case-insensitive: int8, int16,
// int32, int64 (also tinyint, smallint, int or integer, bigint); uint8 ..
// uint64 (also utinyint, usmallint, uinteger, ubigint); float32 (real,
// float, float4) and float64 (double, double precision, float8); bool or
// boolean; date; timestamp (without a zone; also datetime) and
// timestamptz (timestamp with time zone: UTC instants); utf8 (string,
// text, varchar, char, with or without a length, which is ignored); binary
// (blob, bytea, varbinary; base64 in the file). Every column is nullable.
func ParseSchema(s string) (*arrow.Schema, error) {
	fields, err := parseSchema(s)
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", s, err)
	}
	return arrow.NewSchema(fields, nil), nil
}

func parseSchema(s string) ([]arrow.Field, error) {
	var fields []arrow.Field
	seen := make(map[string]bool)
	i := 0
	skip := func() {
		for i < len(s) && isSchemaSpace(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i == len(s) {
			if len(fields) == 0 {
				return nil, errors.New("no columns")
			}
			return nil, errors.New("empty column after the last comma")
		}
		if s[i] == ',' {
			return nil, fmt.Errorf("empty column at offset %d", i)
		}
		var name string
		if s[i] == '"' {
			var err error
			if name, i, err = columnar.QuotedName(s, i); err != nil {
				return nil, err
			}
		} else {
			j := i
			for j < len(s) && !isSchemaSpace(s[j]) && s[j] != ',' && s[j] != '"' {
				j++
			}
			name, i = s[i:j], j
		}
		// The type runs to the next comma outside parentheses.
		j, depth := i, 0
		for ; j < len(s); j++ {
			if s[j] == '(' {
				depth++
			} else if s[j] == ')' && depth > 0 {
				depth--
			} else if s[j] == ',' && depth == 0 {
				break
			}
		}
		typName := strings.Join(strings.FieldsFunc(s[i:j], func(r rune) bool { return r < 0x80 && isSchemaSpace(byte(r)) }), " ")
		i = j
		if typName == "" {
			return nil, fmt.Errorf("column %q has no type", name)
		}
		typ, ok := schemaType(typName)
		if !ok {
			return nil, fmt.Errorf("column %q: unknown type %q (%s)", name, typName, schemaTypesWanted)
		}
		if seen[name] {
			return nil, fmt.Errorf("column %q given twice", name)
		}
		seen[name] = true
		fields = append(fields, arrow.Field{Name: name, Type: typ, Nullable: true})
		if i == len(s) {
			return fields, nil
		}
		i++ // the comma
	}
}

func isSchemaSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// schemaType looks up a type name, ignoring case and the length of a
// string type (varchar(20)).
func schemaType(name string) (arrow.DataType, bool) {
	name = strings.ToLower(name)
	if t, ok := schemaTypes[name]; ok {
		return t, true
	}
	open := strings.IndexByte(name, '(')
	if open < 0 || !strings.HasSuffix(name, ")") {
		return nil, false
	}
	n := strings.TrimSpace(name[open+1 : len(name)-1])
	if n == "" || strings.Trim(n, "0123456789") != "" {
		return nil, false
	}
	t, ok := schemaTypes[strings.TrimSpace(name[:open])]
	if !ok || t.ID() != arrow.STRING {
		return nil, false
	}
	return t, true
}

// TypeString names an Arrow type as ParseSchema spells it: int64, date,
// timestamp (no zone), timestamptz (UTC), utf8, ...; a type ParseSchema
// has no name for as Arrow prints it.
func TypeString(t arrow.DataType) string {
	switch t.ID() {
	case arrow.DATE32:
		return "date"
	case arrow.TIMESTAMP:
		ts := t.(*arrow.TimestampType)
		switch {
		case ts.Unit != arrow.Microsecond:
		case ts.TimeZone == "":
			return "timestamp"
		case ts.TimeZone == "UTC":
			return "timestamptz"
		}
		return t.String()
	case arrow.STRING:
		return "utf8"
	}
	return t.String()
}
