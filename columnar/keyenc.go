package columnar

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// Marker bytes that open every column's part of a normalized key. They are
// never inverted for DESC: NULLS FIRST/LAST is independent of direction.
const (
	markNullFirst byte = 0x00
	markValue     byte = 0x01
	markNullLast  byte = 0x02
)

type keyKind uint8

const (
	kindSigned keyKind = iota
	kindUnsigned
	kindFloat32
	kindFloat64
	kindBool
	kindBytes // utf8 and binary
)

type keyColumn struct {
	kind     keyKind
	width    int // value bytes after the marker for fixed-width kinds; 0 for kindBytes
	typ      arrow.Type
	nullMark byte // markNullFirst or markNullLast
	invert   byte // 0xFF for DESC, 0 for ASC: XORed into every value byte
}

// KeyEncoder turns the sort-key values of a row into a normalized key: a
// byte string whose bytes.Compare order is the row order the SortKey
// defines. A KeyEncoder holds no buffers and is safe for concurrent use.
// See the package documentation (# Format, Normalized keys) for the encoding.
type KeyEncoder struct {
	cols  []keyColumn
	fixed int // bytes per row of the fixed-width columns, markers included
}

// NewKeyEncoder builds the encoder of key over schema. The arrays given to
// AppendRow and EncodeBatch are the key columns alone, in key order.
func NewKeyEncoder(schema *arrow.Schema, key SortKey) (*KeyEncoder, error) {
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty sort key", ErrSchemaMismatch)
	}
	idx, err := key.Indices(schema)
	if err != nil {
		return nil, err
	}
	e := &KeyEncoder{cols: make([]keyColumn, len(key))}
	for i, sc := range key {
		t := schema.Field(idx[i]).Type
		c := keyColumn{typ: t.ID(), nullMark: markNullLast}
		if sc.NullsFirst {
			c.nullMark = markNullFirst
		}
		if sc.Desc {
			c.invert = 0xFF
		}
		switch t.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.DATE32, arrow.TIMESTAMP:
			c.kind, c.width = kindSigned, t.(arrow.FixedWidthDataType).BitWidth()/8
		case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
			c.kind, c.width = kindUnsigned, t.(arrow.FixedWidthDataType).BitWidth()/8
		case arrow.FLOAT32:
			c.kind, c.width = kindFloat32, 4
		case arrow.FLOAT64:
			c.kind, c.width = kindFloat64, 8
		case arrow.BOOL:
			c.kind, c.width = kindBool, 1
		case arrow.STRING, arrow.BINARY:
			c.kind = kindBytes
		default:
			return nil, fmt.Errorf("sort column %q: %w: %s", sc.Name, ErrUnsupportedType, t)
		}
		if c.kind != kindBytes {
			e.fixed += 1 + c.width
		}
		e.cols[i] = c
	}
	return e, nil
}

// NumColumns returns the number of key columns.
func (e *KeyEncoder) NumColumns() int { return len(e.cols) }

// AppendRow appends the normalized key of row to dst and returns it. cols
// are the key columns in key order, of the schema's types.
func (e *KeyEncoder) AppendRow(dst []byte, cols []arrow.Array, row int) []byte {
	for i := range e.cols {
		dst = e.appendColumn(dst, i, cols[i], row)
	}
	return dst
}

// AppendColumn appends the part of the normalized key that key column i
// contributes for row. A row's key is the concatenation of its parts.
func (e *KeyEncoder) AppendColumn(dst []byte, i int, arr arrow.Array, row int) []byte {
	return e.appendColumn(dst, i, arr, row)
}

func (e *KeyEncoder) appendColumn(dst []byte, i int, arr arrow.Array, row int) []byte {
	c := &e.cols[i]
	if arr.IsNull(row) {
		dst = append(dst, c.nullMark)
		if c.kind != kindBytes {
			dst = append(dst, make([]byte, c.width)...)
		}
		return dst
	}
	dst = append(dst, markValue)
	if c.kind == kindBytes {
		return appendEscaped(dst, bytesValue(arr, row), c.invert)
	}
	var u uint64
	switch a := arr.(type) {
	case *array.Int8:
		u = signedBits(int64(a.Value(row)), 1)
	case *array.Int16:
		u = signedBits(int64(a.Value(row)), 2)
	case *array.Int32:
		u = signedBits(int64(a.Value(row)), 4)
	case *array.Int64:
		u = signedBits(a.Value(row), 8)
	case *array.Date32:
		u = signedBits(int64(a.Value(row)), 4)
	case *array.Timestamp:
		u = signedBits(int64(a.Value(row)), 8)
	case *array.Uint8:
		u = uint64(a.Value(row))
	case *array.Uint16:
		u = uint64(a.Value(row))
	case *array.Uint32:
		u = uint64(a.Value(row))
	case *array.Uint64:
		u = a.Value(row)
	case *array.Float32:
		u = uint64(float32Bits(a.Value(row)))
	case *array.Float64:
		u = float64Bits(a.Value(row))
	case *array.Boolean:
		if a.Value(row) {
			u = 1
		}
	default:
		panic(fmt.Sprintf("columnar: key column %d: array type %T does not match the key's type %s", i, arr, c.typ))
	}
	return appendBigEndian(dst, u^invertMask(c.invert), c.width)
}

func invertMask(inv byte) uint64 {
	if inv != 0 {
		return math.MaxUint64
	}
	return 0
}

// signedBits maps a signed integer of width bytes to unsigned bits that
// order the same way: two's complement with the sign bit flipped.
func signedBits(v int64, width int) uint64 {
	return (uint64(v) ^ (1 << (width*8 - 1))) & widthMask(width)
}

func widthMask(width int) uint64 {
	if width == 8 {
		return math.MaxUint64
	}
	return 1<<(width*8) - 1
}

// float64Bits maps a float64 to bits that order like the value under the
// package's float policy: -0.0 equals +0.0, every NaN equals every other NaN
// and sorts after +Inf.
func float64Bits(f float64) uint64 {
	if f != f {
		return 0xFFF8000000000000 // canonical NaN, sign flipped: above +Inf
	}
	if f == 0 {
		return 1 << 63 // +0.0 and -0.0
	}
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

func float32Bits(f float32) uint32 {
	if f != f {
		return 0xFFC00000
	}
	if f == 0 {
		return 1 << 31
	}
	b := math.Float32bits(f)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}

func appendBigEndian(dst []byte, u uint64, width int) []byte {
	switch width {
	case 1:
		return append(dst, byte(u))
	case 2:
		return binary.BigEndian.AppendUint16(dst, uint16(u))
	case 4:
		return binary.BigEndian.AppendUint32(dst, uint32(u))
	default:
		return binary.BigEndian.AppendUint64(dst, u)
	}
}

func putBigEndian(d []byte, u uint64, width int) {
	switch width {
	case 1:
		d[0] = byte(u)
	case 2:
		binary.BigEndian.PutUint16(d, uint16(u))
	case 4:
		binary.BigEndian.PutUint32(d, uint32(u))
	default:
		binary.BigEndian.PutUint64(d, u)
	}
}

func bytesValue(arr arrow.Array, row int) []byte {
	vo, data := bytesOffsets(arr)
	return data[vo[row]:vo[row+1]]
}

// escapedLen is the encoded length of a string value, terminator included.
func escapedLen(s []byte) int { return len(s) + countZeros(s) + 2 }

// countZeros counts 0x00 bytes; short strings (the common key) skip the
// setup cost of bytes.Count.
func countZeros(s []byte) int {
	if len(s) > 32 {
		return bytes.Count(s, zeroByte)
	}
	n := 0
	for _, c := range s {
		if c == 0 {
			n++
		}
	}
	return n
}

var zeroByte = []byte{0}

// appendEscaped writes s with every 0x00 as 0x00 0xFF, then the terminator
// 0x00 0x00, every byte XORed with inv. The escaping keeps the encoding
// prefix-free, so a string sorts before every longer string it prefixes.
func appendEscaped(dst, s []byte, inv byte) []byte {
	start := len(dst)
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			dst = append(dst, s...)
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, 0xFF)
		s = s[i+1:]
	}
	dst = append(dst, 0, 0)
	if inv != 0 {
		invertBytes(dst[start:])
	}
	return dst
}

// putEscaped is appendEscaped into d, which is exactly escapedLen(s) long;
// zeros is the number of 0x00 bytes in s.
func putEscaped(d, s []byte, inv byte, zeros int) {
	p := 0
	if zeros == 0 {
		p = copy(d, s)
		d[p], d[p+1] = 0, 0
		if inv != 0 {
			invertBytes(d)
		}
		return
	}
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			p += copy(d[p:], s)
			break
		}
		p += copy(d[p:], s[:i+1])
		d[p] = 0xFF
		p++
		s = s[i+1:]
	}
	d[p], d[p+1] = 0, 0
	if inv != 0 {
		invertBytes(d)
	}
}

func invertBytes(b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, ^binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for i := range b {
		b[i] = ^b[i]
	}
}

// KeyBatch holds the normalized keys of a run of rows in one buffer: key i
// is Data[Offsets[i]:Offsets[i+1]]. Reusing a KeyBatch across calls to
// EncodeBatch makes encoding allocation-free once its buffers have grown.
type KeyBatch struct {
	Data    []byte
	Offsets []int
	cursor  []int
}

// Len returns the number of keys.
func (kb *KeyBatch) Len() int {
	if len(kb.Offsets) == 0 {
		return 0
	}
	return len(kb.Offsets) - 1
}

// Key returns key i. The slice aliases the batch's buffer.
func (kb *KeyBatch) Key(i int) []byte { return kb.Data[kb.Offsets[i]:kb.Offsets[i+1]] }

// EncodeBatch replaces the contents of kb with the keys of rows [from, to)
// of cols (the key columns in key order). It encodes column by column with
// one typed loop per column, which is several times faster than AppendRow
// per row.
func (e *KeyEncoder) EncodeBatch(kb *KeyBatch, cols []arrow.Array, from, to int) error {
	if len(cols) != len(e.cols) {
		return fmt.Errorf("%w: %d key columns given, key has %d", ErrSchemaMismatch, len(cols), len(e.cols))
	}
	if from < 0 || to < from {
		return fmt.Errorf("columnar: encode keys: bad row range [%d, %d)", from, to)
	}
	for i, a := range cols {
		if a.DataType().ID() != e.cols[i].typ {
			return fmt.Errorf("%w: key column %d is %s, key wants %s", ErrSchemaMismatch, i, a.DataType(), e.cols[i].typ)
		}
		if to > a.Len() {
			return fmt.Errorf("columnar: encode keys: rows [%d, %d) beyond key column %d of %d rows", from, to, i, a.Len())
		}
	}
	n := to - from
	kb.Offsets = growInts(kb.Offsets, n+1)
	kb.cursor = growInts(kb.cursor, n)
	offs := kb.Offsets
	// Row lengths: the fixed part, plus each string's escaped length.
	for j := range n {
		offs[j+1] = e.fixed
	}
	for i, c := range e.cols {
		if c.kind != kindBytes {
			continue
		}
		vo, data := bytesOffsets(cols[i])
		nulls := cols[i].NullN() > 0
		for j := range n {
			row := from + j
			if nulls && cols[i].IsNull(row) {
				offs[j+1]++
				continue
			}
			s := data[vo[row]:vo[row+1]]
			offs[j+1] += 1 + escapedLen(s)
		}
	}
	offs[0] = 0
	for j := range n {
		offs[j+1] += offs[j]
	}
	total := offs[n]
	if cap(kb.Data) < total {
		kb.Data = make([]byte, total, total+total/4)
	}
	kb.Data = kb.Data[:total]
	cur := kb.cursor
	copy(cur, offs[:n])
	for i := range e.cols {
		e.encodeColumn(kb.Data, cur, i, cols[i], from, n)
	}
	return nil
}

func growInts(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n, n+n/4)
	}
	return s[:n]
}

// bytesOffsets returns the offsets of a utf8 or binary array's rows (offset
// i is row i's start, absolute in data) and its whole values buffer.
func bytesOffsets(arr arrow.Array) ([]int32, []byte) {
	var vo []int32
	switch a := arr.(type) {
	case *array.String:
		vo = a.ValueOffsets()
	case *array.Binary:
		vo = a.ValueOffsets()
	default:
		panic(fmt.Sprintf("columnar: key column array type %T is not utf8 or binary", arr))
	}
	var data []byte
	if bufs := arr.Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
		data = bufs[2].Bytes()
	}
	return vo, data
}

// encodeColumn writes key column i of rows [from, from+n) at the cursors and
// advances them.
func (e *KeyEncoder) encodeColumn(d []byte, cur []int, i int, arr arrow.Array, from, n int) {
	c := &e.cols[i]
	var valid []byte
	validOff := arr.Data().Offset()
	if arr.NullN() > 0 {
		valid = arr.NullBitmapBytes()
	}
	isNull := func(row int) bool { return valid != nil && bitutil.BitIsNotSet(valid, validOff+row) }
	inv := invertMask(c.invert)
	switch a := arr.(type) {
	case *array.Int8:
		putFixed(d, cur, a.Int8Values()[from:from+n], valid, validOff+from, c, func(v int8) uint64 { return signedBits(int64(v), 1) ^ inv })
	case *array.Int16:
		putFixed(d, cur, a.Int16Values()[from:from+n], valid, validOff+from, c, func(v int16) uint64 { return signedBits(int64(v), 2) ^ inv })
	case *array.Int32:
		putFixed(d, cur, a.Int32Values()[from:from+n], valid, validOff+from, c, func(v int32) uint64 { return signedBits(int64(v), 4) ^ inv })
	case *array.Date32:
		putFixed(d, cur, a.Date32Values()[from:from+n], valid, validOff+from, c, func(v arrow.Date32) uint64 { return signedBits(int64(v), 4) ^ inv })
	case *array.Int64:
		putFixed(d, cur, a.Int64Values()[from:from+n], valid, validOff+from, c, func(v int64) uint64 { return signedBits(v, 8) ^ inv })
	case *array.Timestamp:
		putFixed(d, cur, a.TimestampValues()[from:from+n], valid, validOff+from, c, func(v arrow.Timestamp) uint64 { return signedBits(int64(v), 8) ^ inv })
	case *array.Uint8:
		putFixed(d, cur, a.Uint8Values()[from:from+n], valid, validOff+from, c, func(v uint8) uint64 { return uint64(v) ^ inv })
	case *array.Uint16:
		putFixed(d, cur, a.Uint16Values()[from:from+n], valid, validOff+from, c, func(v uint16) uint64 { return uint64(v) ^ inv })
	case *array.Uint32:
		putFixed(d, cur, a.Uint32Values()[from:from+n], valid, validOff+from, c, func(v uint32) uint64 { return uint64(v) ^ inv })
	case *array.Uint64:
		putFixed(d, cur, a.Uint64Values()[from:from+n], valid, validOff+from, c, func(v uint64) uint64 { return v ^ inv })
	case *array.Float32:
		putFixed(d, cur, a.Float32Values()[from:from+n], valid, validOff+from, c, func(v float32) uint64 { return uint64(float32Bits(v)) ^ inv })
	case *array.Float64:
		putFixed(d, cur, a.Float64Values()[from:from+n], valid, validOff+from, c, func(v float64) uint64 { return float64Bits(v) ^ inv })
	case *array.Boolean:
		for j := range n {
			p := cur[j]
			if isNull(from + j) {
				d[p], d[p+1] = c.nullMark, 0
			} else {
				var b byte
				if a.Value(from + j) {
					b = 1
				}
				d[p], d[p+1] = markValue, b^c.invert
			}
			cur[j] = p + 2
		}
	case *array.String, *array.Binary:
		vo, data := bytesOffsets(arr)
		for j := range n {
			p, row := cur[j], from+j
			if isNull(row) {
				d[p] = c.nullMark
				cur[j] = p + 1
				continue
			}
			s := data[vo[row]:vo[row+1]]
			l := escapedLen(s)
			d[p] = markValue
			putEscaped(d[p+1:p+1+l], s, c.invert, l-len(s)-2)
			cur[j] = p + 1 + l
		}
	default:
		panic(fmt.Sprintf("columnar: key column %d: array type %T does not match the key's type %s", i, arr, c.typ))
	}
}

// putFixed writes one fixed-width key column: marker, then width bytes of
// enc(v) big-endian (zeros for NULL).
func putFixed[T any](d []byte, cur []int, vals []T, valid []byte, validOff int, c *keyColumn, enc func(T) uint64) {
	w := c.width
	if valid == nil {
		for j, v := range vals {
			p := cur[j]
			d[p] = markValue
			putBigEndian(d[p+1:p+1+w], enc(v), w)
			cur[j] = p + 1 + w
		}
		return
	}
	for j, v := range vals {
		p := cur[j]
		if bitutil.BitIsNotSet(valid, validOff+j) {
			d[p] = c.nullMark
			clear(d[p+1 : p+1+w])
		} else {
			d[p] = markValue
			putBigEndian(d[p+1:p+1+w], enc(v), w)
		}
		cur[j] = p + 1 + w
	}
}
