package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-db/strata/messages"
)

// HandleEvent applies a job event. An event is a worker's claim, and the
// scheduler takes it only for a job it has in flight and only from the
// worker holding the job's latest delivery (recorded from its accepted
// event, or from a progress or done claim of a later delivery, which may
// come first); everything an outcome touches — the output container, the
// inputs it retires, the result table — comes from the scheduler's own
// record of the job, never from the event. A done claim is taken only when
// the output the job named exists and checks out (for a mergeout, with the
// rows of its inputs). A refused claim changes nothing and comes back as
// an error wrapping ErrRejected; events of a job already settled
// (redeliveries, the scheduler's own queue-timeout event) are ignored.
func (s *Scheduler) HandleEvent(ctx context.Context, ev *messages.JobEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("event: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	op := s.ops.get(ev.JobID)
	where, pending := s.where[ev.JobID]
	if !pending {
		if op != nil && (op.Status == messages.StatusDone || op.Status == messages.StatusFailed) {
			return nil // already settled: a redelivery, or a late report of an earlier delivery
		}
		return fmt.Errorf("%w: %s claim for job %s from worker %q: the job is not in flight", ErrRejected, ev.Type, ev.JobID, ev.Worker)
	}
	if ev.Worker == "" {
		return fmt.Errorf("%w: %s claim for job %s names no worker", ErrRejected, ev.Type, ev.JobID)
	}
	holder, held := s.accepted[ev.JobID]
	switch ev.Type {
	case messages.EventAccepted:
		switch {
		case held && ev.Delivery < holder.n:
			return fmt.Errorf("%w: accepted claim for job %s delivery %d from %q: delivery %d is held by %q", ErrRejected, ev.JobID, ev.Delivery, ev.Worker, holder.n, holder.worker)
		case held && ev.Delivery == holder.n && ev.Worker != holder.worker:
			return fmt.Errorf("%w: accepted claim for job %s delivery %d from %q: that delivery is held by %q", ErrRejected, ev.JobID, ev.Delivery, ev.Worker, holder.worker)
		}
		if err := s.recordAccepted(ctx, where, ev); err != nil {
			return err
		}
	case messages.EventProgress, messages.EventDone:
		switch {
		case impliesAccepted(ev, holder, held):
			// The worker's accepted event is still on its way: a
			// scheduler that died holding it unacked gets it back only
			// after the consumer's AckWait. A claim of a later delivery
			// says that delivery was accepted.
			if err := s.recordAccepted(ctx, where, ev); err != nil {
				return err
			}
		case !held || ev.Worker != holder.worker:
			return fmt.Errorf("%w: %s claim for job %s from %q: %s", ErrRejected, ev.Type, ev.JobID, ev.Worker, holderText(holder, held))
		}
	case messages.EventFailed:
		// A worker may fail a job it never accepted (no worker had the
		// memory for its grant), and any worker reports a job whose
		// deliveries ran out (its Delivery is the last one, at least the
		// holder's); otherwise only the holder may. Failing deletes nothing.
		if held && ev.Worker != holder.worker && (ev.Retryable || ev.Delivery < holder.n || ev.Delivery == 0) {
			return fmt.Errorf("%w: failed claim for job %s from %q: %s", ErrRejected, ev.JobID, ev.Worker, holderText(holder, held))
		}
	}
	if op != nil {
		op.Worker = ev.Worker
		op.Deliveries = max(op.Deliveries, ev.Delivery)
		if ev.RowsTotal > 0 && ev.Type != messages.EventDone {
			op.Rows = ev.RowsTotal
		}
		if ev.Plan != "" {
			op.Plan = ev.Plan
		}
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.SpilledBytes = max(op.SpilledBytes, ev.SpilledBytes)
	}
	switch ev.Type {
	case messages.EventFailed:
		if op != nil {
			op.Reason = ev.Reason
		}
		if ev.Retryable {
			return nil // the job is redelivered
		}
		return s.finishFailed(ctx, ev.JobID, ev.Reason, ev.PeakBytes, now)
	case messages.EventDone:
		return s.finishDone(ctx, where, ev, now)
	}
	return nil
}

// impliesAccepted reports whether a progress or done claim is of a
// delivery later than the one held (or of any delivery when none is held),
// so it stands for that delivery's accepted event too. A claim naming no
// delivery implies nothing.
func impliesAccepted(ev *messages.JobEvent, holder delivery, held bool) bool {
	return ev.Delivery > 0 && (!held || ev.Delivery > holder.n)
}

func holderText(h delivery, held bool) string {
	if !held {
		return "no worker has accepted the job"
	}
	return fmt.Sprintf("delivery %d is held by %q", h.n, h.worker)
}

// recordAccepted makes ev's worker the holder of the job, in the catalog
// (so a restarted scheduler knows it) and in memory.
func (s *Scheduler) recordAccepted(ctx context.Context, where projKey, ev *messages.JobEvent) error {
	_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
		if i, ok := st.pending(ev.JobID); ok {
			st.Pending[i].Worker, st.Pending[i].Delivery = ev.Worker, ev.Delivery
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record accepted job %s: %w", ev.JobID, err)
	}
	s.accepted[ev.JobID] = delivery{ev.Worker, ev.Delivery}
	return nil
}

// checkOutput checks the output the pending job named and returns it as the
// catalog will hold it. A missing or corrupt output, or a mergeout output
// whose rows are not its inputs', is an error wrapping ErrBadOutput.
func (s *Scheduler) checkOutput(p *PendingJob) (messages.ContainerRef, error) {
	var out messages.ContainerRef
	var want int64 = -1
	switch {
	case p.Mergeout != nil:
		out = messages.ContainerRef{Table: p.Mergeout.Table, Projection: p.Mergeout.Projection, ID: p.Mergeout.Output}
		want = 0
		for _, in := range p.Mergeout.Inputs {
			want += in.Rows
		}
	case p.Window != nil:
		out = messages.ContainerRef{Table: p.Window.ResultTable, Projection: messages.ResultProjection, ID: p.Window.Output}
	default:
		return out, fmt.Errorf("%w: pending job %s has no job body", ErrBadOutput, p.JobID)
	}
	if s.opts.Data == nil {
		out.Rows = max(want, 0)
		return out, nil
	}
	rows, bytes, err := s.opts.Data.CheckContainer(out.Table, out.Projection, out.ID)
	if err != nil {
		return out, fmt.Errorf("output %s/%s/%s: %w", out.Table, out.Projection, out.ID, err)
	}
	if want >= 0 && rows != want {
		return out, fmt.Errorf("output %s/%s/%s: %w: %d rows, its inputs hold %d", out.Table, out.Projection, out.ID, ErrBadOutput, rows, want)
	}
	out.Rows, out.Bytes = rows, bytes
	return out, nil
}

// finishDone settles a finished job once its output checks out. An output
// that is missing or corrupt fails the job instead (its inputs stay live,
// nothing is deleted) and the claim is rejected; an I/O error checking it
// is returned as is, so the event is applied again later.
func (s *Scheduler) finishDone(ctx context.Context, where projKey, ev *messages.JobEvent, now time.Time) error {
	st, _, err := s.catalog.Get(ctx, where.table, where.projection)
	if err != nil {
		return fmt.Errorf("settle job %s: %w", ev.JobID, err)
	}
	i, ok := st.pending(ev.JobID)
	if !ok {
		return fmt.Errorf("settle job %s: not pending in the catalog", ev.JobID)
	}
	out, err := s.checkOutput(&st.Pending[i])
	if err != nil {
		if !errors.Is(err, ErrBadOutput) {
			return fmt.Errorf("settle job %s: %w", ev.JobID, err)
		}
		reason := "done claim rejected: " + err.Error()
		if ferr := s.finishFailed(ctx, ev.JobID, reason, ev.PeakBytes, now); ferr != nil {
			return ferr
		}
		return fmt.Errorf("%w: done claim for job %s from %q: %v", ErrRejected, ev.JobID, ev.Worker, err)
	}
	var done PendingJob
	_, err = s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
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
	delete(s.accepted, ev.JobID)
	if op := s.ops.get(ev.JobID); op != nil {
		op.Status, op.End = messages.StatusDone, now.UnixNano()
		op.Rows, op.Bytes = out.Rows, out.Bytes
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
	}
	if done.Window != nil {
		s.registerResult(ctx, ev.JobID, out, now)
	}
	s.log.Info("job done", "job", ev.JobID, "worker", ev.Worker, "rows", out.Rows, "peak", ev.PeakBytes)
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
	delete(s.accepted, jobID)
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
