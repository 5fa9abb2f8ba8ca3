package merger

import (
	"errors"
	"fmt"

	"github.com/strata-db/strata/internal/bytesize"
)

var (
	// ErrNoInputs is returned by Merge when given no input containers.
	ErrNoInputs = errors.New("merger: no input containers")
	// ErrMismatch is returned when inputs differ in schema or sort key.
	ErrMismatch = errors.New("merger: inputs do not match")
	// ErrGrantTooSmall is wrapped by *GrantError.
	ErrGrantTooSmall = errors.New("merger: memory grant below the minimum any plan needs")
	// ErrRowSourceCorrupt is returned when a row-source stream fails to decode.
	ErrRowSourceCorrupt = errors.New("merger: corrupt row-source stream")
	// ErrOutputExists is returned when the output container already exists.
	ErrOutputExists = errors.New("merger: output container already exists")
	// ErrUnsupported is wrapped for input the merger cannot write, such as
	// a block of variable-width values beyond Arrow's 2GiB offsets.
	ErrUnsupported = errors.New("merger: unsupported input")
	// ErrInternal is wrapped when the merger finds one of its own
	// invariants broken, or when one of its goroutines panicked: a bug,
	// which the same inputs and grant meet again.
	ErrInternal = errors.New("merger: internal error")
)

// GrantError reports a grant too small for the merge, with the figures the
// planner used, before anything is written.
type GrantError struct {
	Grant   int64  // the grant asked for
	Minimum int64  // the least the cheapest plan needs
	Inputs  int    // K
	Columns int    // columns of the projection
	Need    string // what the minimum is made of
}

func (e *GrantError) Error() string {
	return fmt.Sprintf("merger: grant %s (%d bytes) is below the minimum %s (%d bytes) for %d inputs of %d columns: %s",
		bytesize.Format(e.Grant), e.Grant, bytesize.Format(e.Minimum), e.Minimum, e.Inputs, e.Columns, e.Need)
}

func (e *GrantError) Unwrap() error { return ErrGrantTooSmall }
