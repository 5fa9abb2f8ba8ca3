package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/strata-db/strata/messages"
)

// HandleEvent applies a job event: accepted and progress update the
// operations table; done swaps a mergeout's inputs for its output (or
// registers a window result) and releases the grant; a final failure
// releases the grant and frees the inputs. Events of jobs the scheduler
// does not hold pending (duplicates, another deployment's) change nothing
// but the operations row, so redelivered events are harmless.
func (s *Scheduler) HandleEvent(ctx context.Context, ev *messages.JobEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("event: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	op := s.ops.get(ev.JobID)
	if op != nil {
		if ev.Worker != "" {
			op.Worker = ev.Worker
		}
		op.Deliveries = max(op.Deliveries, ev.Delivery)
		if ev.RowsTotal > 0 {
			op.Rows = ev.RowsTotal
		}
		if ev.Plan != "" {
			op.Plan = ev.Plan
		}
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.SpilledBytes = max(op.SpilledBytes, ev.SpilledBytes)
	}
	where, pending := s.where[ev.JobID]
	switch ev.Type {
	case messages.EventAccepted, messages.EventProgress:
		return nil
	case messages.EventFailed:
		if op != nil {
			op.Reason = ev.Reason
		}
		if ev.Retryable || !pending {
			return nil // the job is redelivered, or already settled
		}
		return s.finishFailed(ctx, ev.JobID, ev.Reason, ev.PeakBytes, now)
	case messages.EventDone:
		if !pending {
			return nil
		}
		return s.finishDone(ctx, where, ev, now)
	}
	return nil
}

// finishDone settles a finished job.
func (s *Scheduler) finishDone(ctx context.Context, where projKey, ev *messages.JobEvent, now time.Time) error {
	var done PendingJob
	_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
		i, ok := st.pending(ev.JobID)
		if !ok {
			done = PendingJob{}
			return nil // settled by an earlier delivery of this event
		}
		done = st.Pending[i]
		st.Pending = slices.Delete(st.Pending, i, i+1)
		if done.Mergeout == nil {
			return nil
		}
		out := messages.ContainerRef{Table: where.table, Projection: where.projection, ID: done.Mergeout.Output, Rows: ev.RowsTotal, Bytes: ev.Bytes}
		if ev.Output != nil {
			out.Rows, out.Bytes = ev.Output.Rows, ev.Output.Bytes
		}
		for _, id := range done.Inputs {
			if j := st.liveIndex(id); j >= 0 {
				st.Dead = append(st.Dead, st.Live[j])
				st.Live = slices.Delete(st.Live, j, j+1)
			}
		}
		if st.liveIndex(out.ID) < 0 {
			st.Live = append(st.Live, out)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle job %s: %w", ev.JobID, err)
	}
	delete(s.where, ev.JobID)
	delete(s.unpublished, ev.JobID)
	if op := s.ops.get(ev.JobID); op != nil {
		op.Status, op.End = messages.StatusDone, now.UnixNano()
		op.Bytes = ev.Bytes
		if ev.Output != nil {
			op.Rows, op.Bytes = ev.Output.Rows, ev.Output.Bytes
		}
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
	}
	if done.Window != nil && ev.Output != nil {
		s.registerResult(ctx, ev.JobID, *ev.Output, now)
	}
	s.log.Info("job done", "job", ev.JobID, "worker", ev.Worker, "peak", ev.PeakBytes)
	s.granted(ctx, s.adm.Release(ev.JobID, ev.PeakBytes, now), now)
	s.collectDead(ctx, where.table, where.projection)
	s.selectStrata(ctx, where.table, where.projection)
	return nil
}

// finishFailed settles a job that will not complete: its grant is
// released (and the memory given to whoever waits) and its inputs stay
// live. If the catalog cannot be written the job stays pending there and
// the error is returned, so the event is applied again later.
func (s *Scheduler) finishFailed(ctx context.Context, jobID, reason string, peak int64, now time.Time) error {
	s.granted(ctx, s.adm.Release(jobID, peak, now), now)
	where, ok := s.where[jobID]
	if ok {
		_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
			if i, ok := st.pending(jobID); ok {
				st.Pending = slices.Delete(st.Pending, i, i+1)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("settle failed job %s: %w", jobID, err)
		}
	}
	delete(s.where, jobID)
	delete(s.unpublished, jobID)
	if op := s.ops.get(jobID); op != nil {
		op.Status, op.End, op.Reason = messages.StatusFailed, now.UnixNano(), reason
		op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
	}
	s.log.Warn("job failed", "job", jobID, "reason", reason)
	if ok {
		s.collectDead(ctx, where.table, where.projection)
	}
	return nil
}
