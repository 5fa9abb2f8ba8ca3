package columnar

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns for one of these
// conditions wraps the matching sentinel, so callers test with errors.Is.
var (
	// ErrCorrupt marks data that fails a checksum or does not decode. The
	// concrete error is a *CorruptError naming the container, file and block.
	ErrCorrupt = errors.New("columnar: corrupt container")
	// ErrSchemaMismatch marks data whose schema or sort key differs from
	// the one expected (a record written to the wrong writer, inputs of a
	// merge that disagree).
	ErrSchemaMismatch = errors.New("columnar: schema mismatch")
	// ErrNotFound marks a container directory or manifest that does not exist.
	ErrNotFound = errors.New("columnar: container not found")
	// ErrExists marks a container directory that already exists at commit.
	ErrExists = errors.New("columnar: container already exists")
	// ErrUnsupportedType marks an Arrow type containers cannot store.
	ErrUnsupportedType = errors.New("columnar: unsupported column type")
	// ErrBudgetExceeded marks a reservation that would take a Budget over
	// its limit.
	ErrBudgetExceeded = errors.New("columnar: memory budget exceeded")
	// ErrNotSorted marks rows that are not in the container's sort-key order.
	ErrNotSorted = errors.New("columnar: rows not in sort-key order")
	// ErrClosed marks use of a writer or reader after Close, Commit or Abort.
	ErrClosed = errors.New("columnar: use after close")
)

// NoBlock is the Block of a CorruptError that concerns a whole file or the
// manifest rather than one block.
const NoBlock = -1

// CorruptError reports data that fails a checksum or does not decode.
// It wraps ErrCorrupt, and the underlying cause if there is one.
type CorruptError struct {
	Container string // container directory
	File      string // file name inside the container ("manifest.json", "col-0003.arrow")
	Block     int    // block index within the file, or NoBlock
	Reason    string // what is wrong, in words
	Err       error  // underlying cause, may be nil
}

func (e *CorruptError) Error() string {
	where := e.File
	if e.Block != NoBlock {
		where = fmt.Sprintf("%s block %d", e.File, e.Block)
	}
	msg := fmt.Sprintf("columnar: corrupt container %s: %s: %s", e.Container, where, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrCorrupt and the cause, so errors.Is works for both.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

func corruptf(container, file string, block int, err error, format string, args ...any) *CorruptError {
	return &CorruptError{Container: container, File: file, Block: block, Reason: fmt.Sprintf(format, args...), Err: err}
}
