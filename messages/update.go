package messages

import (
	"errors"
	"fmt"
)

// MaxRowBytes bounds an encoded row in an update event.
const MaxRowBytes = 256 << 10

// The operations of a change event. An event without one (every event
// before operations existed) is an upsert.
const (
	OpUpsert = ""       // the key's row becomes NewRow, whether or not it had one
	OpInsert = "insert" // as upsert: a key that has a row gets the new one (a CDC stream replayed)
	OpUpdate = "update" // as upsert: a key without a row gets one
	OpDelete = "delete" // the key has no row; the event carries the key only
)

// UpdateEvent is one change of a row by key, published on
// SubjectUpdates(Table). Rows are in the canonical row encoding (EncodeRow)
// of the table's column types, which travel with the event so the
// walwriter can check them against the table it knows. For a table with a
// primary key, Key is the canonical row encoding of the key columns' values
// (in the key's order), and NewRow's key columns must encode to it.
type UpdateEvent struct {
	EventID string    `msgpack:"event_id"` // unique per event; also the Nats-Msg-Id
	Table   string    `msgpack:"table"`
	Columns []RowType `msgpack:"columns"` // the table's column types, in order
	Key     []byte    `msgpack:"key"`
	OldRow  []byte    `msgpack:"old_row,omitempty"` // the row before the update; empty for an insert
	NewRow  []byte    `msgpack:"new_row,omitempty"` // empty only for a delete
	Op      string    `msgpack:"op,omitempty"`      // OpInsert, OpUpdate, OpDelete; empty: OpUpsert
}

// IsDelete reports whether the event deletes its key's row.
func (e *UpdateEvent) IsDelete() bool { return e.Op == OpDelete }

func (*UpdateEvent) Kind() string { return "update_event" }

// Validate checks the event's fields and that its rows decode to its columns.
func (e *UpdateEvent) Validate() error {
	switch {
	case e.EventID == "":
		return errors.New("event_id is empty")
	case len(e.EventID) > 1024:
		return fmt.Errorf("event %.40q...: event_id of %d bytes exceeds 1024", e.EventID, len(e.EventID))
	case len(e.Key) == 0:
		return fmt.Errorf("event %s: key is empty", e.EventID)
	case len(e.Columns) == 0:
		return fmt.Errorf("event %s: no columns", e.EventID)
	case e.Op != OpUpsert && e.Op != OpInsert && e.Op != OpUpdate && e.Op != OpDelete:
		return fmt.Errorf("event %s: unknown op %.40q (insert, update or delete)", e.EventID, e.Op)
	case e.Op == OpDelete && (len(e.NewRow) > 0 || len(e.OldRow) > 0):
		return fmt.Errorf("event %s: a delete carries the key only, not a row", e.EventID)
	case len(e.NewRow) > MaxRowBytes || len(e.OldRow) > MaxRowBytes:
		return fmt.Errorf("event %s: row larger than %d bytes", e.EventID, MaxRowBytes)
	}
	if err := ValidTable(e.Table); err != nil {
		return fmt.Errorf("event %s: table: %v", e.EventID, err)
	}
	for i, c := range e.Columns {
		if !c.Valid() {
			return fmt.Errorf("event %s: column %d: unknown type %q", e.EventID, i, c)
		}
	}
	if e.Op == OpDelete {
		return nil
	}
	if _, err := SplitRow(e.Columns, e.NewRow); err != nil {
		return fmt.Errorf("event %s: new_row: %v", e.EventID, err)
	}
	if len(e.OldRow) > 0 {
		if _, err := SplitRow(e.Columns, e.OldRow); err != nil {
			return fmt.Errorf("event %s: old_row: %v", e.EventID, err)
		}
	}
	return nil
}
