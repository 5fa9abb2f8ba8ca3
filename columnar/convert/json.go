package convert

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// jsonlWriter writes record batches as JSON lines: one object per row.
type jsonlWriter struct {
	w    *bufio.Writer
	keys [][]byte // the column names, JSON-encoded
	buf  []byte
}

func newJSONLWriter(w io.Writer, schema *arrow.Schema) *jsonlWriter {
	return &jsonlWriter{w: bufio.NewWriterSize(w, 1<<16), keys: JSONKeys(schema)}
}

func (j *jsonlWriter) Write(rec arrow.RecordBatch) error {
	for r := 0; r < int(rec.NumRows()); r++ {
		j.buf = AppendJSONRow(j.buf[:0], j.keys, rec, r)
		j.buf = append(j.buf, '\n')
		if _, err := j.w.Write(j.buf); err != nil {
			return err
		}
	}
	return nil
}

func (j *jsonlWriter) Close() error { return j.w.Flush() }

// JSONKeys returns the names of schema's columns, JSON-encoded, for
// AppendJSONRow.
func JSONKeys(schema *arrow.Schema) [][]byte {
	keys := make([][]byte, schema.NumFields())
	for i, f := range schema.Fields() {
		keys[i], _ = json.Marshal(f.Name) // a string always encodes
	}
	return keys
}

// AppendJSONRow appends row r of rec to dst as one JSON object whose keys
// (JSONKeys of rec's schema) are in column order, and returns it. Values
// are typed: integers and finite floats are numbers, booleans true and
// false, NULL null; NaN and the infinities, which JSON cannot write as
// numbers, are the strings "NaN", "Infinity" and "-Infinity"; dates and
// timestamps are strings (2024-01-15, 2024-01-15 10:30:00.5, with a
// zone suffix Z when the type has one), binary base64.
func AppendJSONRow(dst []byte, keys [][]byte, rec arrow.RecordBatch, r int) []byte {
	dst = append(dst, '{')
	for c := 0; c < int(rec.NumCols()); c++ {
		if c > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, keys[c]...)
		dst = append(dst, ':')
		dst = AppendJSONValue(dst, rec.Column(c), r)
	}
	return append(dst, '}')
}

// AppendJSONValue appends value i of arr to dst as JSON, typed as
// AppendJSONRow says.
func AppendJSONValue(dst []byte, arr arrow.Array, i int) []byte {
	if arr.IsNull(i) {
		return append(dst, "null"...)
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return strconv.AppendBool(dst, a.Value(i))
	case *array.Int8:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10)
	case *array.Int16:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10)
	case *array.Int32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10)
	case *array.Int64:
		return strconv.AppendInt(dst, a.Value(i), 10)
	case *array.Uint8:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10)
	case *array.Uint16:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10)
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10)
	case *array.Uint64:
		return strconv.AppendUint(dst, a.Value(i), 10)
	case *array.Float32:
		return appendJSONFloat(dst, float64(a.Value(i)), 32)
	case *array.Float64:
		return appendJSONFloat(dst, a.Value(i), 64)
	case *array.String:
		return appendJSONString(dst, a.Value(i))
	case *array.LargeString:
		return appendJSONString(dst, a.Value(i))
	case *array.Timestamp:
		t := a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit)
		s := t.Format("2006-01-02 15:04:05.999999999")
		if a.DataType().(*arrow.TimestampType).TimeZone != "" {
			s += "Z"
		}
		return appendJSONString(dst, s)
	}
	b, err := json.Marshal(arr.GetOneForMarshal(i))
	if err != nil {
		return appendJSONString(dst, arr.ValueStr(i))
	}
	return append(dst, b...)
}

func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	// As encoding/json writes floats: the shortest form that reads back.
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, bits)
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}
