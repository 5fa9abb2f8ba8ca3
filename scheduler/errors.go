package scheduler

import (
	"errors"
	"fmt"

	"github.com/strata-db/strata/messages"
)

var (
	// ErrInvalid is returned (wrapped) for a request that makes no sense.
	ErrInvalid = errors.New("scheduler: invalid request")
	// ErrUnknownTable is returned for a table or projection the catalog does not hold.
	ErrUnknownTable = errors.New("scheduler: unknown table")
	// ErrTooManyContainers is returned (as *TooManyContainersError) when a
	// load would leave a projection with more live containers than allowed.
	ErrTooManyContainers = errors.New("scheduler: too many containers")
	// ErrRejected is returned (wrapped) for a job event the scheduler does
	// not take: a claim about a job it has not in flight, from a worker
	// that does not hold the job's latest delivery, or a done claim whose
	// output does not verify. Nothing was changed by it.
	ErrRejected = errors.New("scheduler: event claim rejected")
	// ErrBadOutput is wrapped by a Storage's CheckContainer for a container
	// that is missing or does not verify (as opposed to an I/O error that
	// may pass).
	ErrBadOutput = errors.New("scheduler: output missing or corrupt")
	// ErrFrozen is returned (as *FrozenError) for an apply whose changes
	// reach down to the version a full mergeout froze the table through.
	ErrFrozen = errors.New("scheduler: changes at or below the frozen floor")
	// ErrUnknownJob is returned for a job the scheduler does not know
	// (never made, or its row long gone from the operations table).
	ErrUnknownJob = errors.New("scheduler: unknown job")
)

// FrozenError refuses an apply: its container holds a change of version
// MinVersion, at or below FrozenThrough, the floor through which a full
// mergeout of the table wrote versions as 0. Such a change is a late
// event (acked, or dead-lettered after MaxDeliver, since the floor is the
// walwriter consumer's ack floor) that would beat a newer change frozen
// into its key's row.
type FrozenError struct {
	Table, Projection, Container string
	MinVersion, FrozenThrough    int64
	// Unknown: the container has no change statistics, so its least
	// version is unknown.
	Unknown bool
}

func (e *FrozenError) Error() string {
	if e.Unknown {
		return fmt.Sprintf("apply to %s.%s refused: container %s has no change statistics, and the table was frozen through version %d: write it again with them",
			e.Table, e.Projection, e.Container, e.FrozenThrough)
	}
	return fmt.Sprintf("apply to %s.%s refused: container %s holds changes from version %d, at or below %d, through which the table's folded rows were frozen (late events, past the ack floor): apply the changes above %d only",
		e.Table, e.Projection, e.Container, e.MinVersion, e.FrozenThrough, e.FrozenThrough)
}

func (e *FrozenError) Unwrap() error { return ErrFrozen }

// TooManyContainersError refuses a load into a projection that already has
// too many containers: mergeout is not keeping up, or the load is cut too fine.
type TooManyContainersError struct {
	Table, Projection string
	Live, Adding, Max int
}

func (e *TooManyContainersError) Error() string {
	return fmt.Sprintf("too many containers: projection %s.%s has %d live containers and loading %d more would pass the limit of %d; run `strata mergeout %s`, load fewer larger containers, or raise the limit",
		e.Table, e.Projection, e.Live, e.Adding, e.Max, e.Table)
}

func (e *TooManyContainersError) Unwrap() error { return ErrTooManyContainers }

// APIError converts an error of this package into the error part of an API
// reply, with a stable code; nil for nil.
func APIError(err error) *messages.APIError {
	if err == nil {
		return nil
	}
	code := messages.ErrCodeInternal
	var unknownVersion *messages.UnknownVersionError
	var recorded *messages.APIError
	switch {
	case errors.As(err, &recorded): // an answer recorded before (requests.go)
		return recorded
	case errors.Is(err, ErrTooManyContainers):
		code = messages.ErrCodeTooManyContainers
	case errors.Is(err, ErrFrozen):
		code = messages.ErrCodeFrozen
	case errors.Is(err, ErrUnknownPool), errors.Is(err, ErrUnknownTable), errors.Is(err, ErrUnknownJob):
		code = "not_found"
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNeverFits), errors.Is(err, messages.ErrMalformed),
		errors.As(err, &unknownVersion):
		code = "invalid"
	case errors.Is(err, ErrPoolExists):
		code = "exists"
	case errors.Is(err, ErrConflict):
		code = "conflict"
	}
	return &messages.APIError{Code: code, Message: err.Error()}
}
