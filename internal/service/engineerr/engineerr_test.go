package engineerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/windower"
)

func TestPermanent(t *testing.T) {
	corrupt := func(cause error) error {
		return &columnar.CorruptError{Container: "d/t/p/c1", File: "col-0001.arrow", Block: 3, Reason: "read", Err: cause}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unknown", errors.New("something odd"), false},
		{"division by zero", fmt.Errorf("select item 2: %w (row 0)", windower.ErrDivisionByZero), true},
		{"overflow", fmt.Errorf("%w: sum of select item %q", windower.ErrOverflow, "s"), true},
		{"query error", fmt.Errorf("run: %w", &windower.QueryError{Item: 1, Alias: "x", Reason: `column "x" does not exist`}), true},
		{"unsupported query", fmt.Errorf("%w: column type uint64", windower.ErrUnsupported), true},
		{"window grant", windower.ErrGrantTooSmall, true},
		{"window internal", fmt.Errorf("%w: halo", windower.ErrInternal), true},
		{"merge grant", &merger.GrantError{Grant: 1, Minimum: 2}, true},
		{"merge mismatch", fmt.Errorf("%w: sort key", merger.ErrMismatch), true},
		{"merge internal", fmt.Errorf("%w: panic: boom", merger.ErrInternal), true},
		{"merge 2GiB", fmt.Errorf("%w: a block exceeds 2GiB", merger.ErrUnsupported), true},
		{"corrupt block", corrupt(nil), true},
		{"truncated file", corrupt(io.ErrUnexpectedEOF), true},
		{"missing column file", corrupt(&fs.PathError{Op: "open", Path: "col-0001.arrow", Err: syscall.ENOENT}), true},
		{"input gone", fmt.Errorf("input 1: open container d: %w", columnar.ErrNotFound), true},
		{"schema mismatch", fmt.Errorf("write: %w", columnar.ErrSchemaMismatch), true},
		{"unsupported type", columnar.ErrUnsupportedType, true},
		{"read error behind corrupt", corrupt(&fs.PathError{Op: "read", Path: "col-0001.arrow", Err: syscall.EIO}), false},
		{"full disk", fmt.Errorf("write block 3: %w", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), false},
		{"deadline", fmt.Errorf("merge: %w", context.DeadlineExceeded), false},
		{"cancelled", context.Canceled, false},
		{"io deadline", os.ErrDeadlineExceeded, false},
		{"budget", fmt.Errorf("load: %w", columnar.ErrBudgetExceeded), false},
		{"output exists", merger.ErrOutputExists, false},
		{"spill stream", fmt.Errorf("%w: checksum", merger.ErrRowSourceCorrupt), false},
	} {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("%s: Permanent(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
