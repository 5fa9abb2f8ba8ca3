package walwriter

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/strata-db/strata/messages"
)

// Record is one data or checkpoint record as a reader returns it.
type Record struct {
	LSN     LSN
	Kind    RecordKind // KindFull, KindDelta, KindDelete or KindCheckpoint
	Version uint64     // the change's version; 0 when it was logged without one
	EventID string     // empty for checkpoints
	Table   string
	Key     []byte
	Row     Row                // the full new row, deltas applied; nil for checkpoints and when rows are not decoded
	Columns []messages.RowType // the table's column types
	Segment string
	Offset  int64 // of the record in its segment
	Size    int   // encoded bytes of the record
}

// segmentDecoder decodes the records of one segment in order, keeping the
// state they share. With images set it applies deltas against, and records
// into, the latest image of every key since the last checkpoint.
type segmentDecoder struct {
	prevLSN   LSN
	tables    []*Table
	producers []*decodedProducer
	images    *imageStore // nil: rows are not decoded
	maxRow    int
}

// imageStore is a reader's latest image of every key since the last
// checkpoint, by table name and key. A checkpoint empties it, since no
// delta after a checkpoint refers to an image before it.
type imageStore struct {
	tables map[string]map[string]Row
}

func newImageStore() *imageStore { return &imageStore{tables: make(map[string]map[string]Row)} }

func (s *imageStore) reset() { clear(s.tables) }

// errNoBase marks a delta whose base image the reader never saw: it
// precedes the first checkpoint of a WAL whose older segments are gone.
var errNoBase = errors.New("delta without a base image")

type decodedProducer struct {
	prefix  string
	lastSeq uint64
}

func newSegmentDecoder(first LSN, images *imageStore, maxRow int) *segmentDecoder {
	return &segmentDecoder{prevLSN: first - 1, images: images, maxRow: maxRow}
}

// decode decodes one record body into rec. It returns false for a
// definition record, which only changes the decoder's state.
func (d *segmentDecoder) decode(body []byte, rec *Record) (bool, error) {
	r := byteReader{b: body}
	kb := r.byte1("kind")
	kind := RecordKind(kb & kindMask)
	data := kind == KindFull || kind == KindDelta || kind == KindDelete
	if kb&^(kindMask|flagCompactID|flagVersion) != 0 || (kb&(flagCompactID|flagVersion) != 0 && !data) ||
		(kind == KindDelete && kb&flagVersion == 0) {
		return false, fmt.Errorf("bad kind byte %#x", kb)
	}
	switch kind {
	case KindTable:
		id := r.uvarint("table id")
		name := r.bytes("table name", maxTableName)
		n := r.uvarint("column count")
		if r.err == nil && (n == 0 || n > maxColumns || n > uint64(len(r.b))) {
			r.err = fmt.Errorf("table %q: %d columns", name, n)
		}
		if r.err != nil {
			return false, r.err
		}
		if id != uint64(len(d.tables)) {
			return false, fmt.Errorf("table %q defined as id %d, want %d", name, id, len(d.tables))
		}
		t := &Table{Name: string(name), Columns: make([]messages.RowType, n)}
		for i := range t.Columns {
			var ok bool
			if t.Columns[i], ok = columnType(r.b[i]); !ok {
				return false, fmt.Errorf("table %q: column %d: unknown type code %d", name, i, r.b[i])
			}
		}
		r.b = r.b[n:]
		if err := t.validate(); err != nil {
			return false, err
		}
		d.tables = append(d.tables, t)
		return false, r.trailing()
	case KindProducer:
		id := r.uvarint("producer id")
		prefix := r.bytes("producer prefix", maxEventIDBytes)
		if r.err != nil {
			return false, r.err
		}
		if id != uint64(len(d.producers)) {
			return false, fmt.Errorf("producer %q defined as id %d, want %d", prefix, id, len(d.producers))
		}
		d.producers = append(d.producers, &decodedProducer{prefix: string(prefix)})
		return false, r.trailing()
	case KindCheckpoint:
		*rec = Record{Kind: kind}
		if err := d.lsn(&r, rec); err != nil {
			return false, err
		}
		if d.images != nil {
			d.images.reset()
		}
		return true, r.trailing()
	case KindFull, KindDelta, KindDelete:
	default:
		return false, fmt.Errorf("unknown record kind %d", kind)
	}
	*rec = Record{Kind: kind}
	if err := d.lsn(&r, rec); err != nil {
		return false, err
	}
	if kb&flagCompactID != 0 {
		id := r.uvarint("producer id")
		delta := r.uvarint("sequence")
		if r.err != nil {
			return false, r.err
		}
		if id >= uint64(len(d.producers)) {
			return false, fmt.Errorf("undefined producer id %d", id)
		}
		p := d.producers[id]
		p.lastSeq += uint64(unzigzag(delta))
		rec.EventID = p.prefix + strconv.FormatUint(p.lastSeq, 10)
	} else {
		rec.EventID = string(r.bytes("event id", maxEventIDBytes))
	}
	tid := r.uvarint("table id")
	key := r.bytes("key", maxKeyBytes)
	if kb&flagVersion != 0 {
		rec.Version = r.uvarint("version")
	}
	if r.err != nil {
		return false, r.err
	}
	if tid >= uint64(len(d.tables)) {
		return false, fmt.Errorf("undefined table id %d", tid)
	}
	t := d.tables[tid]
	rec.Table = t.Name
	rec.Columns = t.Columns
	rec.Key = append([]byte(nil), key...)
	if d.images == nil {
		return true, nil
	}
	images := d.images.tables[t.Name]
	if kind == KindDelete {
		delete(images, string(key))
		return true, r.trailing()
	}
	var row Row
	var err error
	if kind == KindFull {
		row, err = decodeRow(r.b, len(t.Columns))
		if err == nil {
			row = cloneRow(row)
		}
	} else {
		old, ok := images[string(key)]
		if !ok {
			return false, fmt.Errorf("event %q: key %x of table %q: %w", rec.EventID, key, t.Name, errNoBase)
		}
		if len(old) != len(t.Columns) {
			return false, fmt.Errorf("event %q: delta against a %d-column image for a %d-column table", rec.EventID, len(old), len(t.Columns))
		}
		row, err = applyDelta(old, r.b, d.maxRow)
	}
	if err != nil {
		return false, fmt.Errorf("event %q: row: %w", rec.EventID, err)
	}
	if err := t.checkRow(row); err != nil {
		return false, fmt.Errorf("event %q: row does not fit table %q: %v", rec.EventID, t.Name, err)
	}
	if images == nil {
		images = make(map[string]Row)
		d.images.tables[t.Name] = images
	}
	images[string(key)] = row
	rec.Row = row
	return true, nil
}

func (d *segmentDecoder) lsn(r *byteReader, rec *Record) error {
	delta := r.uvarint("lsn")
	if r.err != nil {
		return r.err
	}
	if delta > 1<<62 {
		return fmt.Errorf("lsn delta %d", delta)
	}
	rec.LSN = d.prevLSN + 1 + LSN(delta)
	d.prevLSN = rec.LSN
	return nil
}

func (r *byteReader) trailing() error {
	if r.err == nil && len(r.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return r.err
}

// frameReader reads framed record bodies from a segment file.
type frameReader struct {
	r       *bufio.Reader
	name    string
	off     int64 // offset of the next record
	body    []byte
	maxBody int
}

// next returns the next record's body (valid until the following call) and
// its framed size. It returns io.EOF at the end of the data: the end of the
// file or a zero length (preallocated space). Anything else that is not a
// whole record with a matching checksum is a *CorruptError.
func (f *frameReader) next() ([]byte, int, error) {
	corrupt := func(format string, args ...any) ([]byte, int, error) {
		return nil, 0, &CorruptError{Segment: f.name, Offset: f.off, Reason: fmt.Sprintf(format, args...)}
	}
	first, err := f.r.ReadByte()
	if err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, fmt.Errorf("walwriter: read segment %s at %d: %w", f.name, f.off, err)
	}
	if first == 0 {
		return nil, 0, io.EOF
	}
	f.r.UnreadByte()
	n, err := binary.ReadUvarint(f.r)
	if err != nil {
		return corrupt("torn record length: %v", err)
	}
	if n > uint64(f.maxBody) {
		return corrupt("record length %d exceeds %d", n, f.maxBody)
	}
	lw := uvarintLen(n)
	var crcb [recordCRCBytes]byte
	if _, err := io.ReadFull(f.r, crcb[:]); err != nil {
		return corrupt("torn record checksum: %v", err)
	}
	if cap(f.body) < int(n) {
		f.body = make([]byte, n)
	}
	body := f.body[:n]
	if _, err := io.ReadFull(f.r, body); err != nil {
		return corrupt("torn record: %d-byte body: %v", n, err)
	}
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(crcb[:]); got != want {
		return corrupt("checksum mismatch (%08x, want %08x)", got, want)
	}
	size := lw + recordCRCBytes + int(n)
	f.off += int64(size)
	return body, size, nil
}

// errIsCorrupt reports whether err is a corruption (as opposed to I/O).
func errIsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
