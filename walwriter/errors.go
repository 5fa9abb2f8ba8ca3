package walwriter

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by calls on a closed WAL.
	ErrClosed = errors.New("walwriter: WAL closed")
	// ErrFailed wraps the error of a failed write, sync or segment
	// creation (Health returns it while the WAL retries), and is what
	// appends still pending get when the WAL is closed before it could
	// write them.
	ErrFailed = errors.New("walwriter: WAL failed")
	// ErrCorrupt is wrapped by every *CorruptError.
	ErrCorrupt = errors.New("walwriter: corrupt WAL")
	// ErrRejected is wrapped by every *RejectError.
	ErrRejected = errors.New("walwriter: update rejected")
)

// Reasons an update is rejected, as RejectError.Reason and Stats.Rejected keys.
const (
	ReasonUnknownTable = "unknown_table" // the table was never registered
	ReasonColumns      = "columns"       // a row does not match the table's columns
	ReasonOversized    = "oversized"     // row, key or event ID larger than the limits
	ReasonInvalid      = "invalid"       // empty event ID or key
)

// RejectError reports an update the WAL refused. Nothing of it was written.
type RejectError struct {
	Reason  string // one of the Reason constants
	EventID string
	Table   string
	Detail  string
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("walwriter: reject event %q of table %q: %s: %s", e.EventID, e.Table, e.Reason, e.Detail)
}

func (e *RejectError) Unwrap() error { return ErrRejected }
