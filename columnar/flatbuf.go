package columnar

import (
	"encoding/binary"
	"fmt"
)

// Arrow's IPC loader trusts the vector lengths in a message's flatbuffer
// metadata and allocates by them, so metadata of a damaged block could ask
// for gigabytes before any bounds check. checkRecordBatchMeta walks the few
// fields of the Message and RecordBatch tables that carry lengths and
// rejects any that do not fit in the metadata bytes. Field numbers follow
// Arrow's Message.fbs and Schema.fbs.
const (
	fbMessageHeaderType     = 1
	fbMessageHeader         = 2
	fbMessageBodyLength     = 3
	fbMessageCustomMetadata = 4
	fbRecordBatchLength     = 0
	fbRecordBatchNodes      = 1
	fbRecordBatchBuffers    = 2
	fbRecordBatchCompress   = 3
	fbRecordBatchVariadic   = 4
	fbHeaderRecordBatch     = 3 // MessageHeader union tag of RecordBatch
)

type fbTable struct {
	buf    []byte
	pos    int // table start
	vtable int
	vtSize int
}

func fbU32(b []byte, pos int) (int, error) {
	if pos < 0 || pos+4 > len(b) {
		return 0, fmt.Errorf("offset %d outside %d-byte metadata", pos, len(b))
	}
	return int(binary.LittleEndian.Uint32(b[pos:])), nil
}

func fbTableAt(b []byte, pos int) (fbTable, error) {
	if pos < 0 || pos+4 > len(b) {
		return fbTable{}, fmt.Errorf("table at %d outside %d-byte metadata", pos, len(b))
	}
	vt := pos - int(int32(binary.LittleEndian.Uint32(b[pos:])))
	if vt < 0 || vt+4 > len(b) {
		return fbTable{}, fmt.Errorf("vtable at %d outside %d-byte metadata", vt, len(b))
	}
	size := int(binary.LittleEndian.Uint16(b[vt:]))
	if size < 4 || vt+size > len(b) {
		return fbTable{}, fmt.Errorf("vtable of %d bytes at %d outside %d-byte metadata", size, vt, len(b))
	}
	return fbTable{buf: b, pos: pos, vtable: vt, vtSize: size}, nil
}

// field returns the absolute position of field i, or 0 if absent.
func (t fbTable) field(i int) int {
	slot := 4 + 2*i
	if slot+2 > t.vtSize {
		return 0
	}
	off := int(binary.LittleEndian.Uint16(t.buf[t.vtable+slot:]))
	if off == 0 {
		return 0
	}
	return t.pos + off
}

// vector checks the vector in field i has elements of elem bytes inside
// the buffer and returns its length (0 if absent).
func (t fbTable) vector(i, elem int) (int, error) {
	_, n, err := t.vectorAt(i, elem)
	return n, err
}

// vectorAt is vector that also returns the position of element 0.
func (t fbTable) vectorAt(i, elem int) (pos, n int, err error) {
	p := t.field(i)
	if p == 0 {
		return 0, 0, nil
	}
	rel, err := fbU32(t.buf, p)
	if err != nil {
		return 0, 0, err
	}
	v := p + rel
	n, err = fbU32(t.buf, v)
	if err != nil {
		return 0, 0, err
	}
	if n > (len(t.buf)-v-4)/elem {
		return 0, 0, fmt.Errorf("vector of %d elements of %d bytes outside %d-byte metadata", n, elem, len(t.buf))
	}
	return v + 4, n, nil
}

// int64Field returns scalar field i as an int64 (def if absent).
func (t fbTable) int64Field(i int, def int64) (int64, error) {
	p := t.field(i)
	if p == 0 {
		return def, nil
	}
	if p+8 > len(t.buf) {
		return 0, fmt.Errorf("field %d outside %d-byte metadata", i, len(t.buf))
	}
	return int64(binary.LittleEndian.Uint64(t.buf[p:])), nil
}

// byteField returns scalar field i as a byte (def if absent).
func (t fbTable) byteField(i int, def byte) (byte, error) {
	p := t.field(i)
	if p == 0 {
		return def, nil
	}
	if p >= len(t.buf) {
		return 0, fmt.Errorf("field %d outside %d-byte metadata", i, len(t.buf))
	}
	return t.buf[p], nil
}

// subTable returns the table referenced by field i.
func (t fbTable) subTable(i int) (fbTable, bool, error) {
	p := t.field(i)
	if p == 0 {
		return fbTable{}, false, nil
	}
	rel, err := fbU32(t.buf, p)
	if err != nil {
		return fbTable{}, false, err
	}
	st, err := fbTableAt(t.buf, p+rel)
	return st, true, err
}

// checkRecordBatchMeta checks that meta is a Message flatbuffer holding a
// RecordBatch whose vectors fit in meta, with no custom metadata.
func checkRecordBatchMeta(meta []byte) error {
	root, err := fbU32(meta, 0)
	if err != nil {
		return err
	}
	msg, err := fbTableAt(meta, root)
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	if p := msg.field(fbMessageHeaderType); p == 0 || p >= len(meta) || meta[p] != fbHeaderRecordBatch {
		return fmt.Errorf("message is not a record batch")
	}
	if n, err := msg.vector(fbMessageCustomMetadata, 4); err != nil {
		return fmt.Errorf("message custom metadata: %w", err)
	} else if n != 0 {
		return fmt.Errorf("message has %d custom metadata entries; blocks have none", n)
	}
	rb, ok, err := msg.subTable(fbMessageHeader)
	if err != nil || !ok {
		return fmt.Errorf("record batch header missing or bad: %v", err)
	}
	if _, err := rb.vector(fbRecordBatchNodes, 16); err != nil {
		return fmt.Errorf("record batch nodes: %w", err)
	}
	if _, err := rb.vector(fbRecordBatchBuffers, 16); err != nil {
		return fmt.Errorf("record batch buffers: %w", err)
	}
	if _, err := rb.vector(fbRecordBatchVariadic, 8); err != nil {
		return fmt.Errorf("record batch variadic counts: %w", err)
	}
	if _, _, err := rb.subTable(fbRecordBatchCompress); err != nil {
		return fmt.Errorf("record batch compression: %w", err)
	}
	return nil
}
