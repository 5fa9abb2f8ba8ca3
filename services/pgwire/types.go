package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// PostgreSQL type OIDs (pg_type.dat).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidOid         = 26
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
)

// typeName is the name format_type gives each OID the front door uses.
var typeName = map[uint32]string{
	oidBool: "boolean", oidBytea: "bytea", oidInt8: "bigint", oidInt2: "smallint", oidInt4: "integer",
	oidText: "text", oidOid: "oid", oidFloat4: "real", oidFloat8: "double precision", oidDate: "date",
	oidTimestamp: "timestamp without time zone", oidTimestamptz: "timestamp with time zone", oidNumeric: "numeric",
}

// typeSize is pg_type.typlen: -1 for variable-length types.
func typeSize(oid uint32) int16 {
	switch oid {
	case oidBool:
		return 1
	case oidInt2:
		return 2
	case oidInt4, oidFloat4, oidOid, oidDate:
		return 4
	case oidInt8, oidFloat8, oidTimestamp, oidTimestamptz:
		return 8
	}
	return -1
}

// oidOf maps an Arrow type to the PostgreSQL type that holds every value:
// unsigned integers to the next wider signed type (uint64 to numeric).
func oidOf(t arrow.DataType) (uint32, error) {
	switch t.ID() {
	case arrow.BOOL:
		return oidBool, nil
	case arrow.INT8, arrow.INT16, arrow.UINT8:
		return oidInt2, nil
	case arrow.INT32, arrow.UINT16:
		return oidInt4, nil
	case arrow.INT64, arrow.UINT32:
		return oidInt8, nil
	case arrow.UINT64:
		return oidNumeric, nil
	case arrow.FLOAT32:
		return oidFloat4, nil
	case arrow.FLOAT64:
		return oidFloat8, nil
	case arrow.STRING, arrow.LARGE_STRING:
		return oidText, nil
	case arrow.BINARY, arrow.LARGE_BINARY:
		return oidBytea, nil
	case arrow.DATE32:
		return oidDate, nil
	case arrow.TIMESTAMP:
		if t.(*arrow.TimestampType).TimeZone != "" {
			return oidTimestamptz, nil
		}
		return oidTimestamp, nil
	}
	return 0, fmt.Errorf("column type %s has no PostgreSQL type here", t)
}

// pgEpoch is 2000-01-01, PostgreSQL's epoch for dates and timestamps.
const (
	pgEpochDays   = 10957
	pgEpochMicros = 946684800000000
)

// cell is one value of any column: Go values for the catalog's rows,
// Arrow values for results, converted to these first.
//
// appendValue appends v (of PostgreSQL type oid) to buf in format
// (0 text, 1 binary). v is bool, int64, uint64, float64, string,
// []byte, or time.Time (a date when oid is date).
func appendValue(buf []byte, oid uint32, format int16, v any) ([]byte, error) {
	if format == 0 {
		return appendText(buf, oid, v), nil
	}
	switch oid {
	case oidBool:
		if v.(bool) {
			return append(buf, 1), nil
		}
		return append(buf, 0), nil
	case oidInt2:
		return binary.BigEndian.AppendUint16(buf, uint16(toInt(v))), nil
	case oidInt4:
		return binary.BigEndian.AppendUint32(buf, uint32(toInt(v))), nil
	case oidOid:
		return binary.BigEndian.AppendUint32(buf, uint32(toInt(v))), nil
	case oidInt8:
		return binary.BigEndian.AppendUint64(buf, uint64(toInt(v))), nil
	case oidFloat4:
		return binary.BigEndian.AppendUint32(buf, math.Float32bits(float32(v.(float64)))), nil
	case oidFloat8:
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(v.(float64))), nil
	case oidText:
		return append(buf, fmt.Sprint(v)...), nil
	case oidBytea:
		return append(buf, v.([]byte)...), nil
	case oidDate:
		days := v.(time.Time).Unix()/86400 - pgEpochDays
		return binary.BigEndian.AppendUint32(buf, uint32(int32(days))), nil
	case oidTimestamp, oidTimestamptz:
		return binary.BigEndian.AppendUint64(buf, uint64(v.(time.Time).UnixMicro()-pgEpochMicros)), nil
	case oidNumeric:
		return appendNumericBinary(buf, v.(uint64)), nil
	}
	return nil, fmt.Errorf("no binary format for type %d", oid)
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case int:
		return int64(x)
	case uint32:
		return int64(x)
	}
	return 0
}

func appendText(buf []byte, oid uint32, v any) []byte {
	switch x := v.(type) {
	case bool:
		if x {
			return append(buf, 't')
		}
		return append(buf, 'f')
	case int64:
		return strconv.AppendInt(buf, x, 10)
	case int:
		return strconv.AppendInt(buf, int64(x), 10)
	case uint32:
		return strconv.AppendUint(buf, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(buf, x, 10)
	case float64:
		return appendFloat(buf, x, oid == oidFloat4)
	case string:
		return append(buf, x...)
	case []byte:
		buf = append(buf, `\x`...)
		return hex.AppendEncode(buf, x)
	case time.Time:
		return appendTimeText(buf, oid, x)
	}
	return fmt.Append(buf, v)
}

// appendTimeText writes a date, timestamp or timestamptz in PostgreSQL's
// ISO style (timestamptz in UTC).
func appendTimeText(buf []byte, oid uint32, t time.Time) []byte {
	switch oid {
	case oidDate:
		return t.AppendFormat(buf, "2006-01-02")
	case oidTimestamptz:
		return t.UTC().AppendFormat(buf, "2006-01-02 15:04:05.999999-07")
	}
	return t.UTC().AppendFormat(buf, "2006-01-02 15:04:05.999999")
}

// appendFloat writes a float as PostgreSQL 12+ does (the shortest text
// that reads back exactly; exponent form below 1e-4 and from 1e15, 1e6
// for real).
func appendFloat(buf []byte, f float64, single bool) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, "NaN"...)
	case math.IsInf(f, 1):
		return append(buf, "Infinity"...)
	case math.IsInf(f, -1):
		return append(buf, "-Infinity"...)
	}
	bits, limit := 64, 15
	if single {
		bits, limit = 32, 6
	}
	if f == 0 {
		return strconv.AppendFloat(buf, f, 'f', -1, bits)
	}
	exp := int(math.Floor(math.Log10(math.Abs(f))))
	if exp < -4 || exp >= limit {
		return strconv.AppendFloat(buf, f, 'e', -1, bits)
	}
	return strconv.AppendFloat(buf, f, 'f', -1, bits)
}

// appendNumericBinary writes an unsigned integer in numeric's binary
// format: digits in base 10000, most significant first.
func appendNumericBinary(buf []byte, u uint64) []byte {
	var digits []uint16
	for u > 0 {
		digits = append([]uint16{uint16(u % 10000)}, digits...)
		u /= 10000
	}
	weight := len(digits) - 1
	for len(digits) > 0 && digits[len(digits)-1] == 0 { // trailing zero groups are implied by the weight
		digits = digits[:len(digits)-1]
	}
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(digits)))
	buf = binary.BigEndian.AppendUint16(buf, uint16(int16(weight)))
	buf = binary.BigEndian.AppendUint16(buf, 0) // sign: positive
	buf = binary.BigEndian.AppendUint16(buf, 0) // display scale
	for _, d := range digits {
		buf = binary.BigEndian.AppendUint16(buf, d)
	}
	return buf
}

// arrowValue returns the value of row r of arr as appendValue takes it,
// or nil for NULL.
func arrowValue(arr arrow.Array, r int) any {
	if arr.IsNull(r) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(r)
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
	case *array.Uint64:
		return a.Value(r)
	case *array.Float32:
		return float64(a.Value(r))
	case *array.Float64:
		return a.Value(r)
	case *array.String:
		return a.Value(r)
	case *array.LargeString:
		return a.Value(r)
	case *array.Binary:
		return a.Value(r)
	case *array.LargeBinary:
		return a.Value(r)
	case *array.Date32:
		return time.Unix(int64(a.Value(r))*86400, 0).UTC()
	case *array.Timestamp:
		return time.UnixMicro(int64(a.Value(r))).UTC()
	}
	return arr.ValueStr(r)
}

// encoder appends the value of row r (not NULL) of the array it was made
// for: the bytes appendValue(buf, oid, format, arrowValue(arr, r)) makes,
// without boxing the value in an interface (an allocation a value).
type encoder func(buf []byte, r int) []byte

// newEncoder returns the encoder of arr's values as type oid in format,
// or nil where arrowValue and appendValue are the way.
func newEncoder(arr arrow.Array, oid uint32, format int16) encoder {
	if format == 0 {
		return newTextEncoder(arr, oid)
	}
	switch oid {
	case oidBool:
		if a, ok := arr.(*array.Boolean); ok {
			return func(buf []byte, r int) []byte {
				if a.Value(r) {
					return append(buf, 1)
				}
				return append(buf, 0)
			}
		}
	case oidInt2, oidInt4, oidOid, oidInt8:
		v := intGetter(arr)
		if v == nil {
			return nil
		}
		switch oid {
		case oidInt2:
			return func(buf []byte, r int) []byte { return binary.BigEndian.AppendUint16(buf, uint16(v(r))) }
		case oidInt8:
			return func(buf []byte, r int) []byte { return binary.BigEndian.AppendUint64(buf, uint64(v(r))) }
		}
		return func(buf []byte, r int) []byte { return binary.BigEndian.AppendUint32(buf, uint32(v(r))) }
	case oidFloat4, oidFloat8:
		var v func(int) float64
		switch a := arr.(type) {
		case *array.Float32:
			v = func(r int) float64 { return float64(a.Value(r)) }
		case *array.Float64:
			v = a.Value
		default:
			return nil
		}
		if oid == oidFloat4 {
			return func(buf []byte, r int) []byte {
				return binary.BigEndian.AppendUint32(buf, math.Float32bits(float32(v(r))))
			}
		}
		return func(buf []byte, r int) []byte { return binary.BigEndian.AppendUint64(buf, math.Float64bits(v(r))) }
	case oidText:
		return stringEncoder(arr)
	case oidBytea:
		switch a := arr.(type) {
		case *array.Binary:
			return func(buf []byte, r int) []byte { return append(buf, a.Value(r)...) }
		case *array.LargeBinary:
			return func(buf []byte, r int) []byte { return append(buf, a.Value(r)...) }
		}
	case oidDate:
		if a, ok := arr.(*array.Date32); ok {
			return func(buf []byte, r int) []byte {
				return binary.BigEndian.AppendUint32(buf, uint32(int32(int64(a.Value(r))-pgEpochDays)))
			}
		}
	case oidTimestamp, oidTimestamptz:
		if a, ok := arr.(*array.Timestamp); ok {
			return func(buf []byte, r int) []byte {
				return binary.BigEndian.AppendUint64(buf, uint64(int64(a.Value(r))-pgEpochMicros))
			}
		}
	case oidNumeric:
		if a, ok := arr.(*array.Uint64); ok {
			return func(buf []byte, r int) []byte { return appendNumericBinary(buf, a.Value(r)) }
		}
	}
	return nil
}

// newTextEncoder is newEncoder's text format: appendText of arrowValue's
// value, by the array's type.
func newTextEncoder(arr arrow.Array, oid uint32) encoder {
	switch a := arr.(type) {
	case *array.Boolean:
		return func(buf []byte, r int) []byte {
			if a.Value(r) {
				return append(buf, 't')
			}
			return append(buf, 'f')
		}
	case *array.Uint64:
		return func(buf []byte, r int) []byte { return strconv.AppendUint(buf, a.Value(r), 10) }
	case *array.Float32:
		return func(buf []byte, r int) []byte { return appendFloat(buf, float64(a.Value(r)), oid == oidFloat4) }
	case *array.Float64:
		return func(buf []byte, r int) []byte { return appendFloat(buf, a.Value(r), oid == oidFloat4) }
	case *array.String, *array.LargeString:
		return stringEncoder(arr)
	case *array.Binary:
		return func(buf []byte, r int) []byte { return hex.AppendEncode(append(buf, `\x`...), a.Value(r)) }
	case *array.LargeBinary:
		return func(buf []byte, r int) []byte { return hex.AppendEncode(append(buf, `\x`...), a.Value(r)) }
	case *array.Date32:
		return func(buf []byte, r int) []byte {
			return appendTimeText(buf, oid, time.Unix(int64(a.Value(r))*86400, 0).UTC())
		}
	case *array.Timestamp:
		return func(buf []byte, r int) []byte {
			return appendTimeText(buf, oid, time.UnixMicro(int64(a.Value(r))).UTC())
		}
	}
	if v := intGetter(arr); v != nil {
		return func(buf []byte, r int) []byte { return strconv.AppendInt(buf, v(r), 10) }
	}
	return nil
}

func stringEncoder(arr arrow.Array) encoder {
	switch a := arr.(type) {
	case *array.String:
		return func(buf []byte, r int) []byte { return append(buf, a.Value(r)...) }
	case *array.LargeString:
		return func(buf []byte, r int) []byte { return append(buf, a.Value(r)...) }
	}
	return nil
}

// intGetter reads an integer array's values as arrowValue and toInt do
// (uint64 wrapping to int64), or is nil for other arrays.
func intGetter(arr arrow.Array) func(int) int64 {
	switch a := arr.(type) {
	case *array.Int8:
		return func(r int) int64 { return int64(a.Value(r)) }
	case *array.Int16:
		return func(r int) int64 { return int64(a.Value(r)) }
	case *array.Int32:
		return func(r int) int64 { return int64(a.Value(r)) }
	case *array.Int64:
		return a.Value
	case *array.Uint8:
		return func(r int) int64 { return int64(a.Value(r)) }
	case *array.Uint16:
		return func(r int) int64 { return int64(a.Value(r)) }
	case *array.Uint32:
		return func(r int) int64 { return int64(a.Value(r)) }
	case *array.Uint64:
		return func(r int) int64 { return int64(a.Value(r)) }
	}
	return nil
}
