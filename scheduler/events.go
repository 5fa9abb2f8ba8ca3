package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// rows of its inputs; for a keyed table's, which folds them, at most those
// and its primary key). A refused claim changes nothing and comes back as
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
		op.BlocksFetched, op.BytesFetched = max(op.BlocksFetched, ev.BlocksFetched), max(op.BytesFetched, ev.BytesFetched)
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
// whose rows are not its inputs', is an error wrapping ErrBadOutput. For a
// keyed table (pk, the primary key of the job's projection) a mergeout
// folds its inputs' changes, so its output holds at most their rows, and
// must keep the key.
func (s *Scheduler) checkOutput(j job, pk []string) (messages.ContainerRef, error) {
	out, want := j.output()
	if s.opts.Data == nil {
		out.Rows = max(want, 0)
		return out, nil
	}
	info, err := s.opts.Data.CheckContainer(out.Table, out.Projection, out.ID)
	rows, bytes := info.Rows, info.Bytes
	if err != nil {
		return out, fmt.Errorf("output %s/%s/%s: %w", out.Table, out.Projection, out.ID, err)
	}
	switch keyed := len(pk) > 0; {
	case want < 0:
	case keyed && rows > want:
		return out, fmt.Errorf("output %s/%s/%s: %w: %d rows, more than its inputs' %d", out.Table, out.Projection, out.ID, ErrBadOutput, rows, want)
	case keyed && !slices.Equal(info.PrimaryKey, pk):
		return out, fmt.Errorf("output %s/%s/%s: %w: primary key (%s), the table's is (%s)", out.Table, out.Projection, out.ID, ErrBadOutput,
			strings.Join(info.PrimaryKey, ", "), strings.Join(pk, ", "))
	case !keyed && rows != want:
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
	st, p, j, err := s.pendingJob(ctx, where, ev.JobID)
	if err != nil {
		return fmt.Errorf("settle job %s: %w", ev.JobID, err)
	}
	out, err := s.checkOutput(j, st.PrimaryKey)
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
	ended, err := s.endJob(ctx, where, p.Seq, j, func(st *ProjectionState) { j.settle(st, out) })
	if err != nil {
		return fmt.Errorf("settle job %s: %w", ev.JobID, err)
	}
	delete(s.where, ev.JobID)
	delete(s.unpublished, ev.JobID)
	delete(s.accepted, ev.JobID)
	delete(s.cancels, ev.JobID)
	if op := s.ops.get(ev.JobID); op != nil {
		op.Status, op.End = messages.StatusDone, now.UnixNano()
		op.Rows, op.Bytes = out.Rows, out.Bytes
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
	}
	if ended {
		j.settled(ctx, s, out, now)
	}
	s.log.Info("job done", "job", ev.JobID, "worker", ev.Worker, "rows", out.Rows, "peak", ev.PeakBytes)
	s.granted(ctx, s.adm.Release(ev.JobID, ev.PeakBytes, now), now)
	s.collectDead(ctx, where.table, where.projection)
	s.selectStrata(ctx, where.table, where.projection)
	return nil
}

// pendingJob returns a job pending in its projection's entry, the entry
// and the job's body.
func (s *Scheduler) pendingJob(ctx context.Context, where projKey, jobID string) (*ProjectionState, PendingJob, job, error) {
	st, _, err := s.catalog.Get(ctx, where.table, where.projection)
	if err != nil {
		return nil, PendingJob{}, nil, err
	}
	i, ok := st.pending(jobID)
	if !ok {
		return nil, PendingJob{}, nil, errNotPending
	}
	j, err := s.catalog.Job(ctx, where.table, where.projection, &st.Pending[i])
	if err != nil {
		return nil, PendingJob{}, nil, err
	}
	return st, st.Pending[i], j, nil
}

var errNotPending = errors.New("not pending in the catalog")

// endJob ends pending job j (number seq) in one compare-and-set of its
// projection's entry: the job is dropped, its inputs are no longer counted
// as read, and settle (if any) applies its outcome. Its body is deleted
// after that write, never before. ended is false when an earlier call
// ended the job already.
func (s *Scheduler) endJob(ctx context.Context, where projKey, seq uint64, j job, settle func(*ProjectionState)) (ended bool, err error) {
	_, err = s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
		ended = st.endJob(j)
		if ended && settle != nil {
			settle(st)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if ended {
		if err := s.catalog.DropJob(ctx, where.table, where.projection, seq); err != nil {
			// Named by no entry now: the next start sweeps it.
			s.log.Warn("delete the body of an ended job", "job", j.id(), "err", err)
		}
	}
	return ended, nil
}

// finishFailed settles a job that will not complete: its grant is
// released (and the memory given to whoever waits) and its inputs stay
// live. If the catalog cannot be written the job stays pending there and
// the error is returned, so the event is applied again later.
func (s *Scheduler) finishFailed(ctx context.Context, jobID, reason string, peak int64, now time.Time) error {
	s.granted(ctx, s.adm.Release(jobID, peak, now), now)
	where, ok := s.where[jobID]
	if ok {
		_, p, j, err := s.pendingJob(ctx, where, jobID)
		if err == nil {
			_, err = s.endJob(ctx, where, p.Seq, j, nil)
		}
		if err != nil && !errors.Is(err, errNotPending) {
			s.failing[jobID] = reason // Tick tries again
			return fmt.Errorf("settle failed job %s: %w", jobID, err)
		}
	}
	delete(s.failing, jobID)
	delete(s.where, jobID)
	delete(s.unpublished, jobID)
	delete(s.accepted, jobID)
	delete(s.cancels, jobID)
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
