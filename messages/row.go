package messages

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// RowType is the type of one column in the canonical row encoding.
type RowType string

// The column types of the canonical row encoding and the Go values
// EncodeRow takes and DecodeRow returns for them (nil is NULL for all).
const (
	RowInt64     RowType = "int64"     // int64; 8 bytes
	RowFloat64   RowType = "float64"   // float64; 8 bytes
	RowBool      RowType = "bool"      // bool; 1 byte, 0 or 1
	RowText      RowType = "text"      // string; valid UTF-8
	RowBytes     RowType = "bytes"     // []byte
	RowTimestamp RowType = "timestamp" // int64 microseconds since the Unix epoch; 8 bytes
	RowDate      RowType = "date"      // int32 days since the Unix epoch; 4 bytes
)

// ErrBadRow is wrapped by every row encoding and decoding error.
var ErrBadRow = errors.New("messages: bad row")

// Valid reports whether t is a known row type.
func (t RowType) Valid() bool {
	switch t {
	case RowInt64, RowFloat64, RowBool, RowText, RowBytes, RowTimestamp, RowDate:
		return true
	}
	return false
}

// Width returns the byte width of a non-NULL value of type t, or 0 when
// values have any width (text, bytes) or t is not a known type.
func (t RowType) Width() int {
	switch t {
	case RowInt64, RowFloat64, RowTimestamp:
		return 8
	case RowDate:
		return 4
	case RowBool:
		return 1
	}
	return 0
}

// EncodeRow encodes values, one per column of types, in the canonical row
// encoding: per column uvarint 0 for NULL, else uvarint(len+1) and the
// value's bytes. Values are encoded so that bytes compare like values:
// integers, timestamps and dates big-endian with the sign bit flipped,
// floats as IEEE 754 bits with the sign bit flipped (all bits for
// negatives), bools as one byte, text and bytes as they are.
func EncodeRow(types []RowType, values []any) ([]byte, error) {
	if len(values) != len(types) {
		return nil, fmt.Errorf("%w: %d values for %d columns", ErrBadRow, len(values), len(types))
	}
	var out []byte
	for i, v := range values {
		b, err := encodeValue(types[i], v)
		if err != nil {
			return nil, fmt.Errorf("%w: column %d (%s): %v", ErrBadRow, i, types[i], err)
		}
		if b == nil {
			out = append(out, 0)
			continue
		}
		out = binary.AppendUvarint(out, uint64(len(b))+1)
		out = append(out, b...)
	}
	return out, nil
}

func encodeValue(t RowType, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	switch t {
	case RowInt64, RowTimestamp:
		x, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("value of type %T, want int64", v)
		}
		return binary.BigEndian.AppendUint64(nil, uint64(x)^1<<63), nil
	case RowDate:
		x, ok := v.(int32)
		if !ok {
			return nil, fmt.Errorf("value of type %T, want int32", v)
		}
		return binary.BigEndian.AppendUint32(nil, uint32(x)^1<<31), nil
	case RowFloat64:
		x, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("value of type %T, want float64", v)
		}
		bits := math.Float64bits(x)
		if bits&(1<<63) != 0 {
			bits = ^bits
		} else {
			bits ^= 1 << 63
		}
		return binary.BigEndian.AppendUint64(nil, bits), nil
	case RowBool:
		x, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("value of type %T, want bool", v)
		}
		if x {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case RowText:
		x, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("value of type %T, want string", v)
		}
		if !utf8.ValidString(x) {
			return nil, errors.New("text is not valid UTF-8")
		}
		return append([]byte{}, x...), nil
	case RowBytes:
		x, ok := v.([]byte)
		if !ok {
			return nil, fmt.Errorf("value of type %T, want []byte", v)
		}
		return append([]byte{}, x...), nil
	}
	return nil, fmt.Errorf("unknown type %q", t)
}

// SplitRow splits an encoded row into its column values without decoding
// them, checking each against its column's type. The values alias data; a
// NULL is nil and an empty value is empty but not nil.
func SplitRow(types []RowType, data []byte) ([][]byte, error) {
	out := make([][]byte, len(types))
	rest := data
	for i, t := range types {
		h, n := binary.Uvarint(rest)
		if n <= 0 || n != len(binary.AppendUvarint(nil, h)) {
			return nil, fmt.Errorf("%w: column %d: bad length at byte %d", ErrBadRow, i, len(data)-len(rest))
		}
		rest = rest[n:]
		if h == 0 {
			continue
		}
		l := h - 1
		if l > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: column %d: %d bytes, only %d left", ErrBadRow, i, l, len(rest))
		}
		v := rest[:l:l]
		rest = rest[l:]
		if err := checkValue(t, v); err != nil {
			return nil, fmt.Errorf("%w: column %d (%s): %v", ErrBadRow, i, t, err)
		}
		out[i] = v
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last of %d columns", ErrBadRow, len(rest), len(types))
	}
	return out, nil
}

func checkValue(t RowType, v []byte) error {
	if !t.Valid() {
		return fmt.Errorf("unknown type %q", t)
	}
	if w := t.Width(); w != 0 && len(v) != w {
		return fmt.Errorf("%d bytes, want %d", len(v), w)
	}
	switch t {
	case RowBool:
		if v[0] > 1 {
			return fmt.Errorf("bool byte %d", v[0])
		}
	case RowText:
		if !utf8.Valid(v) {
			return errors.New("text is not valid UTF-8")
		}
	}
	return nil
}

// DecodeRow decodes an encoded row into Go values (see EncodeRow).
func DecodeRow(types []RowType, data []byte) ([]any, error) {
	vals, err := SplitRow(types, data)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(types))
	for i, v := range vals {
		if v == nil {
			continue
		}
		switch types[i] {
		case RowInt64, RowTimestamp:
			out[i] = int64(binary.BigEndian.Uint64(v) ^ 1<<63)
		case RowDate:
			out[i] = int32(binary.BigEndian.Uint32(v) ^ 1<<31)
		case RowFloat64:
			bits := binary.BigEndian.Uint64(v)
			if bits&(1<<63) != 0 {
				bits ^= 1 << 63
			} else {
				bits = ^bits
			}
			out[i] = math.Float64frombits(bits)
		case RowBool:
			out[i] = v[0] == 1
		case RowText:
			out[i] = string(v)
		case RowBytes:
			out[i] = append([]byte{}, v...)
		}
	}
	return out, nil
}
