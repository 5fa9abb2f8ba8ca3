package walwriter

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"github.com/strata-db/strata/messages"
)

// FormatValue renders a value of type t for people, assuming the canonical
// value encodings of the messages package: integers, timestamps and dates
// big-endian with the sign bit flipped, floats order-preserving IEEE 754
// bits, text as UTF-8. NULL prints as NULL; a value of the wrong width
// prints as hex.
func FormatValue(t messages.RowType, v []byte) string {
	if v == nil {
		return "NULL"
	}
	if w := t.Width(); w != 0 && len(v) != w {
		return "0x" + hex.EncodeToString(v)
	}
	switch t {
	case messages.RowInt64:
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)^1<<63), 10)
	case messages.RowTimestamp:
		us := int64(binary.BigEndian.Uint64(v) ^ 1<<63)
		return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.999999Z")
	case messages.RowDate:
		days := int32(binary.BigEndian.Uint32(v) ^ 1<<31)
		return time.Unix(int64(days)*86400, 0).UTC().Format("2006-01-02")
	case messages.RowFloat64:
		bits := binary.BigEndian.Uint64(v)
		if bits&(1<<63) != 0 {
			bits ^= 1 << 63
		} else {
			bits = ^bits
		}
		return strconv.FormatFloat(math.Float64frombits(bits), 'g', -1, 64)
	case messages.RowBool:
		return strconv.FormatBool(v[0] == 1)
	case messages.RowText:
		return strconv.Quote(string(v))
	}
	return "0x" + hex.EncodeToString(v)
}
