package walwriter

import (
	"encoding/binary"
)

// Per-segment bounds on event ID prefixes ("producers").
const (
	maxProducers  = 4096 // defined prefixes per segment
	maxCandidates = 8192 // prefixes seen once, waiting for a second sighting
)

// segmentEncoder appends records to a segment and holds the state that
// records of one segment share: the last LSN, table and producer ids.
type segmentEncoder struct {
	prevLSN    LSN
	tableIDs   map[string]uint64
	producers  map[string]*producerState
	candidates map[string]struct{}
	delta      deltaEncoder
}

type producerState struct {
	id      uint64
	lastSeq uint64
}

func newSegmentEncoder(first LSN) *segmentEncoder {
	return &segmentEncoder{
		prevLSN:    first - 1,
		tableIDs:   make(map[string]uint64),
		producers:  make(map[string]*producerState),
		candidates: make(map[string]struct{}),
	}
}

// dataRecordBound is an upper bound of the bytes appendData appends.
func dataRecordBound(u *Update, t *Table, imageLen int) int {
	defs := 2*maxRecordHeader + 3 + 2*binary.MaxVarintLen64 + len(u.EventID) + len(t.Name) + len(t.Columns)
	body := 1 + 3*binary.MaxVarintLen64 + len(u.EventID) + len(u.Key) + binary.MaxVarintLen64 + imageLen
	return defs + maxRecordHeader + body
}

// appended describes a data record appendData wrote.
type appended struct {
	kind         RecordKind
	defBytes     int // definition records written before the data record
	recordBytes  int // the data record
	fullImageLen int // what the data record would have cost as a full image
}

// appendData appends the data record of u at lsn, preceded by the
// definitions it needs. old is the key's previous image in this segment, or
// nil; imageLen is rowImageLen(u.Row).
func (s *segmentEncoder) appendData(dst []byte, lsn LSN, u *Update, id eventID, t *Table, old Row, imageLen int) ([]byte, appended) {
	start := len(dst)
	tableID, ok := s.tableIDs[t.Name]
	if !ok {
		tableID = uint64(len(s.tableIDs))
		s.tableIDs[t.Name] = tableID
		dst = appendTableDef(dst, tableID, t)
	}
	var prod *producerState
	prefix, seq := id.prefix, id.seq
	if id.compact {
		prod = s.producers[prefix]
		if prod == nil {
			_, seen := s.candidates[prefix]
			switch {
			case seen && len(s.producers) < maxProducers:
				delete(s.candidates, prefix)
				prod = &producerState{id: uint64(len(s.producers))}
				s.producers[prefix] = prod
				dst = appendProducerDef(dst, prod.id, prefix)
			case !seen && len(s.candidates) < maxCandidates:
				s.candidates[prefix] = struct{}{}
			}
		}
	}
	fullPayload := imageLen
	maxBody := 1 + 3*binary.MaxVarintLen64 + len(u.EventID) + len(u.Key) + binary.MaxVarintLen64 + imageLen
	dst, rec := beginRecord(dst, maxBody)
	reserved := len(dst) - rec
	kindAt := len(dst)
	dst = append(dst, 0) // the kind byte, known once the payload is
	dst = binary.AppendUvarint(dst, uint64(lsn-s.prevLSN-1))
	s.prevLSN = lsn
	if prod != nil {
		dst = binary.AppendUvarint(dst, prod.id)
		dst = binary.AppendUvarint(dst, zigzag(int64(seq-prod.lastSeq)))
		prod.lastSeq = seq
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(u.EventID)))
		dst = append(dst, u.EventID...)
	}
	dst = binary.AppendUvarint(dst, tableID)
	dst = binary.AppendUvarint(dst, uint64(len(u.Key)))
	dst = append(dst, u.Key...)
	if u.Version != 0 || u.Delete {
		dst = binary.AppendUvarint(dst, u.Version)
	}
	headerLen := len(dst) - rec - reserved
	// The payload is encoded in place: the delta first, replaced by the
	// full image when it is not smaller.
	payloadAt := len(dst)
	kind := KindFull
	if u.Delete {
		kind = KindDelete
	} else if old != nil {
		dst = s.delta.appendDelta(dst, old, u.Row)
		if len(dst)-payloadAt < imageLen {
			kind = KindDelta
		} else {
			dst = dst[:payloadAt]
		}
	}
	if kind == KindFull {
		dst = appendRow(dst, u.Row)
	}
	payloadLen := len(dst) - payloadAt
	dst[kindAt] = byte(kind)
	if u.Version != 0 || u.Delete {
		dst[kindAt] |= flagVersion
	}
	if prod != nil {
		dst[kindAt] |= flagCompactID
	}
	dst = finishRecord(dst, rec, reserved)
	recLen := len(dst) - rec
	fullRecord := recLen - payloadLen + fullPayload
	fullRecord += uvarintLen(uint64(headerLen+fullPayload)) - uvarintLen(uint64(headerLen+payloadLen))
	return dst, appended{kind: kind, defBytes: rec - start, recordBytes: recLen, fullImageLen: fullRecord}
}

// appendCheckpoint appends a checkpoint record at lsn.
func (s *segmentEncoder) appendCheckpoint(dst []byte, lsn LSN) []byte {
	dst, rec := beginRecord(dst, 1+binary.MaxVarintLen64)
	reserved := len(dst) - rec
	dst = append(dst, byte(KindCheckpoint))
	dst = binary.AppendUvarint(dst, uint64(lsn-s.prevLSN-1))
	s.prevLSN = lsn
	return finishRecord(dst, rec, reserved)
}

func appendTableDef(dst []byte, id uint64, t *Table) []byte {
	dst, rec := beginRecord(dst, 1+3*binary.MaxVarintLen64+len(t.Name)+len(t.Columns))
	reserved := len(dst) - rec
	dst = append(dst, byte(KindTable))
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(t.Name)))
	dst = append(dst, t.Name...)
	dst = binary.AppendUvarint(dst, uint64(len(t.Columns)))
	for _, c := range t.Columns {
		dst = append(dst, columnCode(c))
	}
	return finishRecord(dst, rec, reserved)
}

func appendProducerDef(dst []byte, id uint64, prefix string) []byte {
	dst, rec := beginRecord(dst, 1+2*binary.MaxVarintLen64+len(prefix))
	reserved := len(dst) - rec
	dst = append(dst, byte(KindProducer))
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendUvarint(dst, uint64(len(prefix)))
	dst = append(dst, prefix...)
	return finishRecord(dst, rec, reserved)
}
