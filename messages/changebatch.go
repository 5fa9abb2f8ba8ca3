package messages

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxBatchChanges bounds the changes of one ChangeBatch. A batch is also
// bounded by MaxMessageBytes, which usually binds first.
const MaxBatchChanges = 1 << 16

// ChangeBatch is several changes of one table in one message, published on
// SubjectUpdates(Table) like an UpdateEvent: a producer with many changes
// (a CDC feed, a bulk update) pays one publish, one stream entry and one
// ack for the lot instead of one each. Its changes are in order, and they
// share the batch's version (its UPDATES stream sequence), so a key
// changed twice in one batch keeps its last change: the walwriter applies
// the last change of each key and no other. The batch is applied whole or
// not at all: if any change fails the table's checks, the batch is
// dead-lettered with that change's index.
//
// The i-th change's event ID, under which the WAL logs and deduplicates
// it, is ChangeEventID(BatchID, i).
type ChangeBatch struct {
	BatchID string    `msgpack:"batch_id"` // unique per batch; also the Nats-Msg-Id
	Table   string    `msgpack:"table"`
	Columns []RowType `msgpack:"columns"` // the table's column types, in order
	Changes []Change  `msgpack:"changes"`
}

// Change is one change of a ChangeBatch: an UpdateEvent without the
// fields the batch holds once. It travels as a msgpack array
// [op, key, new_row, old_row].
type Change struct {
	_msgpack struct{} `msgpack:",as_array"`
	Op       string   `msgpack:"op"` // OpInsert, OpUpdate, OpDelete; empty: OpUpsert
	Key      []byte   `msgpack:"key"`
	NewRow   []byte   `msgpack:"new_row"` // empty only for a delete
	OldRow   []byte   `msgpack:"old_row"` // optional: the row before the change
}

func (*ChangeBatch) Kind() string { return "change_batch" }

// maxBatchIDBytes leaves room in an event ID (at most 1024 bytes) for the
// change's index.
const maxBatchIDBytes = 1000

// ChangeEventID is the event ID of the i-th change of the batch batchID.
func ChangeEventID(batchID string, i int) string {
	return batchID + "/" + strconv.Itoa(i)
}

// Event returns the batch's i-th change as an update event, with its
// event ID (ChangeEventID). Its slices are the batch's.
func (b *ChangeBatch) Event(i int) *UpdateEvent {
	c := &b.Changes[i]
	return &UpdateEvent{EventID: ChangeEventID(b.BatchID, i), Table: b.Table, Columns: b.Columns,
		Key: c.Key, NewRow: c.NewRow, OldRow: c.OldRow, Op: c.Op}
}

// LastPerKey returns the indexes of the changes a reader applies: the last
// change of each key, in the order of the batch.
func (b *ChangeBatch) LastPerKey() []int {
	last := make(map[string]int, len(b.Changes))
	for i := range b.Changes {
		last[string(b.Changes[i].Key)] = i
	}
	keep := make([]int, 0, len(last))
	for i := range b.Changes {
		if last[string(b.Changes[i].Key)] == i {
			keep = append(keep, i)
		}
	}
	return keep
}

// Validate checks the batch's fields and each change as UpdateEvent.Validate
// does; the error names the first change that fails by its index.
func (b *ChangeBatch) Validate() error {
	if err := b.CheckShape(); err != nil {
		return err
	}
	for i := range b.Changes {
		c := &b.Changes[i]
		if c.Op == OpDelete {
			continue
		}
		if _, err := SplitRow(b.Columns, c.NewRow); err != nil {
			return fmt.Errorf("batch %s: change %d: new_row: %v", b.BatchID, i, err)
		}
		if len(c.OldRow) > 0 {
			if _, err := SplitRow(b.Columns, c.OldRow); err != nil {
				return fmt.Errorf("batch %s: change %d: old_row: %v", b.BatchID, i, err)
			}
		}
	}
	return nil
}

// CheckShape is Validate without decoding the rows, for a reader that
// decodes each row it uses anyway (against its table's types, which is
// stricter): every check but that one.
func (b *ChangeBatch) CheckShape() error {
	switch {
	case b.BatchID == "":
		return errors.New("batch_id is empty")
	case len(b.BatchID) > maxBatchIDBytes:
		return fmt.Errorf("batch %.40q...: batch_id of %d bytes exceeds %d", b.BatchID, len(b.BatchID), maxBatchIDBytes)
	case len(b.Changes) == 0:
		return fmt.Errorf("batch %s: no changes", b.BatchID)
	case len(b.Changes) > MaxBatchChanges:
		return fmt.Errorf("batch %s: %d changes exceed %d", b.BatchID, len(b.Changes), MaxBatchChanges)
	case len(b.Columns) == 0:
		return fmt.Errorf("batch %s: no columns", b.BatchID)
	}
	if err := ValidTable(b.Table); err != nil {
		return fmt.Errorf("batch %s: table: %v", b.BatchID, err)
	}
	for i, c := range b.Columns {
		if !c.Valid() {
			return fmt.Errorf("batch %s: column %d: unknown type %q", b.BatchID, i, c)
		}
	}
	for i := range b.Changes {
		c := &b.Changes[i]
		switch {
		case len(c.Key) == 0:
			return fmt.Errorf("batch %s: change %d: key is empty", b.BatchID, i)
		case c.Op != OpUpsert && c.Op != OpInsert && c.Op != OpUpdate && c.Op != OpDelete:
			return fmt.Errorf("batch %s: change %d: unknown op %.40q (insert, update or delete)", b.BatchID, i, c.Op)
		case c.Op == OpDelete && (len(c.NewRow) > 0 || len(c.OldRow) > 0):
			return fmt.Errorf("batch %s: change %d: a delete carries the key only, not a row", b.BatchID, i)
		case c.Op != OpDelete && len(c.NewRow) == 0:
			return fmt.Errorf("batch %s: change %d: new_row is empty", b.BatchID, i)
		case len(c.NewRow) > MaxRowBytes || len(c.OldRow) > MaxRowBytes:
			return fmt.Errorf("batch %s: change %d: row larger than %d bytes", b.BatchID, i, MaxRowBytes)
		}
	}
	return nil
}

// Batcher packs consecutive update events of one table into change
// batches of at most MaxChanges changes and about MaxBytes encoded bytes
// (an estimate that stays above the encoding's size).
type Batcher struct {
	MaxChanges int
	MaxBytes   int

	cur   *ChangeBatch
	bytes int
}

// PayloadLimit is the most bytes a message may take on a connection
// whose NATS server takes maxPayload (0: not known): MaxMessageBytes at
// most.
func PayloadLimit(maxPayload int64) int {
	if maxPayload > 0 {
		return min(MaxMessageBytes, int(maxPayload))
	}
	return MaxMessageBytes
}

// envelopeHeadroom is what a batch leaves of the payload limit besides
// the Batcher's estimate: the envelope's header.
const envelopeHeadroom = 1024

// NewBatcher returns a Batcher of batches of at most maxChanges changes
// that encode within PayloadLimit(maxPayload).
func NewBatcher(maxChanges int, maxPayload int64) *Batcher {
	return &Batcher{MaxChanges: maxChanges, MaxBytes: PayloadLimit(maxPayload) - envelopeHeadroom}
}

// batchOverheadBytes bounds a batch's bytes besides its changes' slices
// (the envelope and its fields are counted on top), and
// perChangeFrameBytes msgpack's framing of one change.
const (
	batchOverheadBytes  = 64
	perChangeFrameBytes = 24
)

// Add adds ev to the batch being filled. When ev does not fit (another
// table, the batch full by changes or bytes) it first returns the batch
// filled so far, which the caller sends before the next; else nil. The
// batch's ID is its first event's ID and its count of changes
// (ev.EventID + "+" + n), so the same events packed again get the same ID.
func (b *Batcher) Add(ev *UpdateEvent) *ChangeBatch {
	size := len(ev.Key) + len(ev.NewRow) + len(ev.OldRow) + perChangeFrameBytes
	var full *ChangeBatch
	if b.cur != nil && (b.cur.Table != ev.Table || len(b.cur.Changes) >= b.MaxChanges || b.bytes+size > b.MaxBytes) {
		full = b.Flush()
	}
	if b.cur == nil {
		b.cur = &ChangeBatch{BatchID: ev.EventID, Table: ev.Table, Columns: ev.Columns}
		b.bytes = batchOverheadBytes + len(ev.EventID) + len(ev.Table) + 12*len(ev.Columns)
	}
	b.cur.Changes = append(b.cur.Changes, Change{Op: ev.Op, Key: ev.Key, NewRow: ev.NewRow, OldRow: ev.OldRow})
	b.bytes += size
	return full
}

// Len is the number of changes in the batch being filled.
func (b *Batcher) Len() int {
	if b.cur == nil {
		return 0
	}
	return len(b.cur.Changes)
}

// Flush returns the batch being filled (nil if empty), named, and starts
// a new one.
func (b *Batcher) Flush() *ChangeBatch {
	c := b.cur
	b.cur = nil
	if c != nil {
		c.BatchID += "+" + strconv.Itoa(len(c.Changes))
	}
	return c
}
