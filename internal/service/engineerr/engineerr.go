// Package engineerr classes the errors of the engines (columnar, merger,
// windower) for the job workers: Permanent says whether the same job would
// fail the same way at every delivery. It is the one place that knows which
// engine errors are deterministic; the workers pass it to their JobWorker
// (service.JobSpec.Permanent) rather than deciding at each call site.
//
// Rules, in order:
//
//  1. An error caused by the environment is transient, whatever it is wrapped
//     in: a cancelled or expired context, a full disk or quota, an I/O
//     error, too many open files, no memory, a stale file handle, a timeout.
//     A corrupt-container error whose cause is such a read error is
//     transient too: the file may read fine on the next attempt.
//  2. An error wrapping one of the sentinels in permanent is permanent: a
//     user's query error, division by zero, integer overflow, an
//     unsupported type or query, a corrupt or missing input container, a
//     schema or sort-key mismatch, a grant below what any plan needs, an
//     engine's broken invariant.
//  3. Anything else is transient: retried until the consumer's MaxDeliver
//     (default 5), then failed. An engine error that is deterministic must
//     wrap a sentinel listed here, or it costs MaxDeliver deliveries.
//
// Errors marked with service.Permanent and panics (service.ErrPanic) are
// permanent in the JobWorker before this is asked.
package engineerr

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/windower"
)

// permanent are the engines' sentinels of errors that the same job meets
// again at every delivery.
var permanent = []error{
	// The input is what it is.
	columnar.ErrCorrupt,
	columnar.ErrNotFound, // an input gone with no output committed
	columnar.ErrSchemaMismatch,
	columnar.ErrUnsupportedType,
	columnar.ErrNotSorted,
	columnar.ErrOutsideRoot, // a job naming a path outside the data directory
	columnar.ErrClosed,      // use after close: a bug
	merger.ErrNoInputs,
	merger.ErrMismatch,
	merger.ErrGrantTooSmall,
	merger.ErrUnsupported,
	merger.ErrInternal,
	// The query is the user's.
	windower.ErrInvalidQuery,
	windower.ErrUnsupported,
	windower.ErrGrantTooSmall,
	windower.ErrOverflow,
	windower.ErrDivisionByZero,
	windower.ErrInternal,
}

// Not listed, so retried: columnar.ErrExists and merger.ErrOutputExists
// (another delivery committed the output; the next one finds it and reports
// done), columnar.ErrBudgetExceeded (a plan's parallelism depends on the
// worker's cores, so another worker may fit), merger.ErrRowSourceCorrupt
// (the stream is the merge's own spill, written again by the next
// delivery).

// transient are causes in the environment: another attempt, later or on
// another worker, may succeed.
var transient = []error{
	context.Canceled,
	context.DeadlineExceeded,
	os.ErrDeadlineExceeded,
	syscall.ENOSPC,
	syscall.EDQUOT,
	syscall.EIO,
	syscall.EMFILE,
	syscall.ENFILE,
	syscall.ENOMEM,
	syscall.ESTALE,
	syscall.ETIMEDOUT,
	syscall.EINTR,
	syscall.EAGAIN,
}

// Permanent reports whether err, returned by a job's engine, would be
// returned again by every delivery of the job.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	for _, t := range transient {
		if errors.Is(err, t) {
			return false
		}
	}
	for _, p := range permanent {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}
