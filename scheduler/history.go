package scheduler

import (
	"cmp"
	"slices"
	"time"

	"github.com/strata-db/strata/messages"
)

// The operations and acquisitions tables live in memory. After a restart,
// the rows of jobs still pending come back from the catalog; RestoreJob and
// RestoreEvent bring back the rest from what the JOBS and EVENTS streams
// remember, so `strata ops` shows the history across restarts, and
// RestoreAcquisitions makes the acquisitions rows of those jobs from them.
// They touch only the two tables: the catalog and the grants are the
// catalog's and the EVENTS durable consumer's business.

// RestoreJob adds the operations row of a job read back from JOBS,
// published at the given time, unless the table has it; it returns the
// job's ID if it added the row, else "".
func (s *Scheduler) RestoreJob(job messages.Message, published time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var op messages.Operation
	switch j := job.(type) {
	case *messages.MergeoutJob:
		op = messages.Operation{JobID: j.JobID, Operation: messages.OperationMergeout, Table: j.Table, Projection: j.Projection,
			Stratum: j.Stratum, Inputs: len(j.Inputs), InputIDs: idsOf(j.Inputs), Output: j.Output, Grant: j.Grant, Created: j.Created}
	case *messages.WindowJob:
		op = messages.Operation{JobID: j.JobID, Operation: messages.OperationWindow, Table: j.Query.Table, Inputs: len(j.Inputs),
			InputIDs: idsOf(j.Inputs), Output: j.ResultTable + "/" + j.Output, Grant: j.Grant, Created: j.Created}
		if len(j.Inputs) > 0 {
			op.Projection = j.Inputs[0].Projection
		}
	default:
		return ""
	}
	if s.ops.get(op.JobID) != nil {
		return ""
	}
	op.Status = messages.StatusRunning // until an event says otherwise
	op.Start = published.UnixNano()
	s.ops.upsert(op)
	return op.JobID
}

// RestoreAcquisitions adds the acquisitions rows of restored jobs (the IDs
// RestoreJob took), from their operations rows once their events are
// applied: the grant the job was published with, acquired when it was
// published, released when it ended. They go before the rows made since
// the start, oldest first.
func (s *Scheduler) RestoreAcquisitions(jobIDs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []messages.Acquisition
	for _, id := range jobIDs {
		op := s.ops.get(id)
		if op == nil || op.Grant.Pool == "" {
			continue
		}
		a := messages.Acquisition{Pool: op.Grant.Pool, JobID: id, Status: messages.AcquisitionGranted,
			Target: op.Grant.Target, Grant: op.Grant.Bytes, Peak: op.PeakBytes,
			Queued: op.Created, Acquired: op.Start, Released: op.End}
		if p, ok := s.adm.Pool(op.Grant.Pool); ok {
			a.Borrowed = max(op.Grant.Bytes-p.MemorySize, 0)
		}
		if op.Status == messages.StatusDone || op.Status == messages.StatusFailed {
			a.Status = messages.AcquisitionReleased
		}
		rows = append(rows, a)
	}
	slices.SortStableFunc(rows, func(a, b messages.Acquisition) int { return cmp.Compare(a.Acquired, b.Acquired) })
	s.adm.log.restore(rows)
}

// RestoreEvent applies a past event to the operations row of a job that
// is no longer pending. Events of pending jobs are left to HandleEvent.
func (s *Scheduler) RestoreEvent(ev *messages.JobEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, pending := s.where[ev.JobID]; pending {
		return
	}
	op := s.ops.get(ev.JobID)
	if op == nil {
		if ev.Type != messages.EventFailed {
			return
		}
		// A job the scheduler failed before publishing it (a queue
		// timeout) is known only by its failed event.
		op = s.ops.upsert(messages.Operation{JobID: ev.JobID, Operation: ev.Operation, Created: ev.Time})
	}
	if ev.Worker != "" {
		op.Worker = ev.Worker
	}
	op.Deliveries = max(op.Deliveries, ev.Delivery)
	if ev.Plan != "" {
		op.Plan = ev.Plan
	}
	op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
	op.SpilledBytes = max(op.SpilledBytes, ev.SpilledBytes)
	op.BlocksFetched, op.BytesFetched = max(op.BlocksFetched, ev.BlocksFetched), max(op.BytesFetched, ev.BytesFetched)
	switch ev.Type {
	case messages.EventDone:
		op.Status, op.End = messages.StatusDone, ev.Time
		op.Rows, op.Bytes = ev.RowsTotal, ev.Bytes
		if ev.Output != nil {
			op.Rows, op.Bytes = ev.Output.Rows, ev.Output.Bytes
		}
	case messages.EventFailed:
		op.Reason = ev.Reason
		if !ev.Retryable {
			op.Status, op.End = messages.StatusFailed, ev.Time
		}
	}
	op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
}
