package walwriter

import (
	"encoding/binary"
	"fmt"
)

// Row is one row: a value per column of its table, in column order. A nil
// value is SQL NULL; an empty non-nil value is an empty string.
type Row [][]byte

// maxColumns bounds the number of columns of a table.
const maxColumns = 4096

// appendRow appends the full image of row: for each value uvarint(0) for
// NULL, else uvarint(len+1) followed by the bytes.
func appendRow(dst []byte, row Row) []byte {
	for _, v := range row {
		if v == nil {
			dst = append(dst, 0)
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(v))+1)
		dst = append(dst, v...)
	}
	return dst
}

// rowImageLen is len(appendRow(nil, row)).
func rowImageLen(row Row) int {
	n := 0
	for _, v := range row {
		if v == nil {
			n++
			continue
		}
		n += uvarintLen(uint64(len(v))+1) + len(v)
	}
	return n
}

// decodeRow decodes a full image of ncols values. The values alias data.
func decodeRow(data []byte, ncols int) (Row, error) {
	row := make(Row, ncols)
	for i := range row {
		h, n := binary.Uvarint(data)
		if n <= 0 {
			return nil, fmt.Errorf("column %d: bad length", i)
		}
		data = data[n:]
		if h == 0 {
			continue
		}
		l := h - 1
		if l > uint64(len(data)) {
			return nil, fmt.Errorf("column %d: %d bytes, only %d left", i, l, len(data))
		}
		row[i] = data[:l:l]
		data = data[l:]
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("%d bytes after the last column", len(data))
	}
	return row, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// cloneRow copies row into one allocation, keeping NULLs nil.
func cloneRow(row Row) Row {
	total := 0
	for _, v := range row {
		total += len(v)
	}
	buf := make([]byte, 0, total)
	out := make(Row, len(row))
	for i, v := range row {
		if v == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, v...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

func equalValue(a, b []byte) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	return string(a) == string(b)
}
