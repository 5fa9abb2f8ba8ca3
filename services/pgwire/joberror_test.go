package main

import (
	"fmt"
	"testing"

	"github.com/strata-db/strata/windower"
)

// A window job's failure reaches the client with the SQLSTATE PostgreSQL
// gives the same failure: the engines' errors travel as text (the job's
// reason), so the class is read from it.
func TestJobErrorSQLState(t *testing.T) {
	for _, c := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("%w: sum of select item %q", windower.ErrOverflow, "s"), "22003"},
		{fmt.Errorf("%w: avg of select item %q: value out of range: overflow (double precision)", windower.ErrOverflow, "m"), "22003"},
		{fmt.Errorf("%w: sum of select item %q: value out of range: overflow (real)", windower.ErrOverflow, "r"), "22003"},
		{fmt.Errorf("%w: x / 0", windower.ErrDivisionByZero), "22012"},
		{fmt.Errorf("%w: 8388607 bytes", windower.ErrGrantTooSmall), "53200"},
	} {
		got := jobError(&jobFailedError{reason: c.err.Error()})
		if got.code != c.code {
			t.Errorf("%q: SQLSTATE %s, want %s", c.err, got.code, c.code)
		}
	}
}
