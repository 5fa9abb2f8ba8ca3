package walwriter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// LSN is a log sequence number: data and checkpoint records are numbered
// 1, 2, 3, ... without gaps across segments.
type LSN uint64

// RecordKind is the kind of a record, the low 4 bits of its first body byte.
type RecordKind uint8

const (
	KindFull       RecordKind = 1 // a data record carrying the full row image
	KindDelta      RecordKind = 2 // a data record carrying a delta against the key's previous image
	KindTable      RecordKind = 3 // defines a segment-local table id
	KindProducer   RecordKind = 4 // defines a segment-local event ID prefix id
	KindCheckpoint RecordKind = 5 // a checkpoint
	KindDelete     RecordKind = 6 // a data record deleting its key: no payload
)

func (k RecordKind) String() string {
	switch k {
	case KindFull:
		return "full"
	case KindDelta:
		return "delta"
	case KindTable:
		return "table"
	case KindProducer:
		return "producer"
	case KindCheckpoint:
		return "checkpoint"
	case KindDelete:
		return "delete"
	}
	return fmt.Sprintf("RecordKind(%d)", uint8(k))
}

const (
	kindMask       = 0x0f
	flagCompactID  = 0x10 // the event ID is (producer id, sequence delta)
	flagVersion    = 0x20 // a version uvarint follows the key
	recordCRCBytes = 4
	// maxRecordHeader bounds the framing: a length uvarint and the CRC.
	maxRecordHeader = binary.MaxVarintLen64 + recordCRCBytes
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginRecord reserves room for the framing of a record whose body will be
// appended to dst; finishRecord fills it in. The length uvarint is written
// in a fixed width chosen from sizeHint's upper bound, so a body is never
// moved.
func beginRecord(dst []byte, maxBody int) ([]byte, int) {
	return append(dst, make([]byte, uvarintLen(uint64(maxBody))+recordCRCBytes)...), len(dst)
}

// finishRecord frames the body that follows the reserved header at start.
// When the body is shorter than the reserved length width it is moved down.
func finishRecord(dst []byte, start, reserved int) []byte {
	bodyStart := start + reserved
	body := dst[bodyStart:]
	lw := uvarintLen(uint64(len(body)))
	hdr := lw + recordCRCBytes
	if hdr < reserved {
		copy(dst[start+hdr:], body)
		dst = dst[:start+hdr+len(body)]
		body = dst[start+hdr:]
	}
	binary.PutUvarint(dst[start:], uint64(len(body)))
	binary.LittleEndian.PutUint32(dst[start+lw:], crc32.Checksum(body, castagnoli))
	return dst
}

// CorruptError reports a record or segment that fails its checks.
type CorruptError struct {
	Segment string // file name
	Offset  int64  // of the record within the segment
	Reason  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("walwriter: corrupt WAL: segment %s offset %d: %s", e.Segment, e.Offset, e.Reason)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// eventID is an event ID split for the compact form.
type eventID struct {
	prefix  string
	seq     uint64
	compact bool // the ID is prefix + FormatUint(seq)
}

func parseEventID(id string) eventID {
	prefix, seq, ok := splitEventID(id)
	return eventID{prefix, seq, ok}
}

// splitEventID splits id into a prefix and a trailing decimal sequence when
// id has that shape canonically (no leading zeros), so that
// prefix+FormatUint(seq) == id.
func splitEventID(id string) (prefix string, seq uint64, ok bool) {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	digits := id[i:]
	if digits == "" || len(digits) > 19 || (digits[0] == '0' && len(digits) > 1) {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return id[:i], seq, true
}

// zigzag maps signed to unsigned so small magnitudes stay small.
func zigzag(x int64) uint64   { return uint64(x<<1) ^ uint64(x>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// byteReader decodes a record body, remembering the first error.
type byteReader struct {
	b   []byte
	err error
}

func (r *byteReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *byteReader) bytes(what string, max int) []byte {
	l := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if l > uint64(len(r.b)) || l > uint64(max) {
		r.err = fmt.Errorf("%s: %d bytes, %d left, at most %d", what, l, len(r.b), max)
		return nil
	}
	v := r.b[:l:l]
	r.b = r.b[l:]
	return v
}

func (r *byteReader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New(what + ": missing")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}
