package windower

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidQuery is wrapped by every error about a query that cannot
	// run against the table: unknown column or function, wrong argument
	// types, bad frame offsets.
	ErrInvalidQuery = errors.New("windower: invalid query")
	// ErrUnsupported is wrapped for valid SQL this windower does not run.
	ErrUnsupported = errors.New("windower: unsupported")
	// ErrGrantTooSmall is returned when the memory grant is below MinGrant.
	ErrGrantTooSmall = errors.New("windower: memory grant too small")
	// ErrOverflow is wrapped when an integer result does not fit in
	// int64, or a float sum of finite values is past its type's range.
	ErrOverflow = errors.New("windower: value out of range")
	// ErrDivisionByZero is wrapped for an integer division or modulo by zero.
	ErrDivisionByZero = errors.New("windower: division by zero")
	// ErrInternal is wrapped when the windower finds one of its own
	// invariants broken: a bug, which the same query and input meet again.
	ErrInternal = errors.New("windower: internal error")
)

// QueryError is an invalid-query error that names the select item it is about.
type QueryError struct {
	Item   int    // 1-based select item; 0 for the query as a whole
	Alias  string // the item's alias
	Reason string
}

func (e *QueryError) Error() string {
	if e.Item == 0 {
		return fmt.Sprintf("windower: invalid query: %s", e.Reason)
	}
	return fmt.Sprintf("windower: invalid query: select item %d (%s): %s", e.Item, e.Alias, e.Reason)
}

func (e *QueryError) Unwrap() error { return ErrInvalidQuery }
