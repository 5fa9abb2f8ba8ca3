package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-db/strata/messages"
)

// Cancelling a job.
//
// A queued job (waiting for memory) is failed at once: it leaves its
// pool's queue, its inputs stay live, and a failed event tells whoever
// waits for it. A running job (granted and published) is marked in its
// catalog entry (PendingJob.Cancel) and its worker is told to stop by a
// CancelNotice on messages.SubjectCancel; the worker cancels the job's
// context, which ends the engine and frees its memory and spill, and
// reports the job failed with the cancel's reason, not to be retried.
// That failed event settles the job as any other does, releasing its
// grant: the grant is released when the worker has let go of the memory,
// not before. Until then the notice is sent again every Tick (a worker
// given the job later learns it is cancelled); a job whose worker has
// not reported within cancelGrace (dead, or the job still waiting in the
// consumer for a worker) is failed by the scheduler itself. A job that
// ended is left as it ended.

// cancelGrace is how long a cancelled running job's worker has to report
// it stopped before the scheduler fails the job itself.
const cancelGrace = 30 * time.Second

// cancelling is a running job told to stop: the reason and when.
type cancelling struct {
	reason string
	at     time.Time
}

// Cancel cancels the job req names. A request with an ID is recorded with
// its answer in the catalog entry of the job's projection, so a resend
// gets the first answer (Repeat set) and changes nothing more.
func (s *Scheduler) Cancel(ctx context.Context, req *messages.CancelRequest) (*messages.CancelReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("cancel: %w: %v", ErrInvalid, err)
	}
	return once(ctx, s, requestCancel, req.RequestID, func() (*messages.CancelReply, error) { return s.cancel(ctx, req) })
}

func (s *Scheduler) cancel(ctx context.Context, req *messages.CancelRequest) (*messages.CancelReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	reason := messages.CancelledPrefix + req.Reason
	if req.Reason == "" {
		reason = messages.CancelledPrefix + "by request"
	}
	where, pending := s.where[req.JobID]
	op := s.ops.get(req.JobID)
	if !pending {
		if op == nil {
			return s.cancelUnknown(ctx, req)
		}
		where = projKey{op.Table, op.Projection}
	}
	var rep *messages.CancelReply
	var recorded bool
	_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
		rep, recorded = nil, false
		if rec := st.request(requestCancel, req.RequestID); rec != nil {
			r := new(messages.CancelReply)
			if err := rec.answer(r, &r.Error); err != nil {
				return err
			}
			rep, recorded = r, true
			return nil
		}
		rep = &messages.CancelReply{JobID: req.JobID}
		i, ok := st.pending(req.JobID)
		switch {
		case ok && st.Pending[i].Cancel != "":
			rep.State, rep.Reason = messages.CancelRunning, st.Pending[i].Cancel // cancelled before, still stopping
		case ok && !st.Pending[i].Granted:
			rep.State, rep.Reason = messages.CancelQueued, reason
			st.Pending[i].Cancel = reason // a restart before it is failed fails it
		case ok:
			rep.State, rep.Reason = messages.CancelRunning, reason
			st.Pending[i].Cancel = reason
		case op != nil && op.Status == messages.StatusDone:
			rep.State = messages.CancelDone
		case op != nil && op.Status == messages.StatusFailed:
			rep.State, rep.Reason = messages.CancelFailed, op.Reason
		default:
			// Pending in memory but not in the entry: being settled now.
			rep.State, rep.Reason = messages.CancelFailed, "ended"
		}
		return st.recordRequest(requestCancel, req.RequestID, now, rep)
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", req.JobID, err)
	}
	if recorded {
		rep.Repeat = true
		s.log.Info("cancel request sent again; same answer", "request", req.RequestID, "job", req.JobID, "state", rep.State)
		return rep, nil
	}
	switch rep.State {
	case messages.CancelQueued:
		s.failCancelled(ctx, req.JobID, rep.Reason, now)
	case messages.CancelRunning:
		if _, ok := s.cancels[req.JobID]; !ok {
			s.cancels[req.JobID] = cancelling{reason: rep.Reason, at: now}
		}
		s.notifyCancel(ctx, req.JobID, rep.Reason, now)
		s.log.Info("job cancelled; its worker is told to stop", "job", req.JobID, "reason", rep.Reason)
	}
	return rep, nil
}

// cancelUnknown answers a cancel of a job the scheduler does not know:
// a resend of a request answered before (after a restart, the job's row
// gone from the operations table) gets that answer; any other is
// refused as not found.
func (s *Scheduler) cancelUnknown(ctx context.Context, req *messages.CancelRequest) (*messages.CancelReply, error) {
	if req.RequestID != "" {
		states, err := s.catalog.List(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("cancel job %s: %w", req.JobID, err)
		}
		for _, st := range states {
			if rec := st.request(requestCancel, req.RequestID); rec != nil {
				r := new(messages.CancelReply)
				if err := rec.answer(r, &r.Error); err != nil {
					return nil, err
				}
				r.Repeat = true
				return r, nil
			}
		}
	}
	return nil, fmt.Errorf("cancel job %s: %w", req.JobID, ErrUnknownJob)
}

// failCancelled fails a cancelled job and tells whoever waits for it by a
// failed event, as a queue timeout does.
func (s *Scheduler) failCancelled(ctx context.Context, jobID, reason string, now time.Time) {
	where, ok := s.where[jobID]
	if err := s.finishFailed(ctx, jobID, reason, 0, now); err != nil {
		// Its grant is gone; Tick settles the catalog again.
		s.log.Error("fail cancelled job", "job", jobID, "err", err)
	}
	ev := &messages.JobEvent{JobID: jobID, Type: messages.EventFailed, Worker: "scheduler", Time: now.UnixNano(), Reason: reason}
	if op := s.ops.get(jobID); op != nil {
		ev.Operation = op.Operation
	}
	if err := s.pub.PublishEvent(ctx, ev); err != nil {
		s.log.Error("publish cancelled job's failure", "job", jobID, "err", err)
	}
	if ok {
		s.collectDead(ctx, where.table, where.projection)
	}
}

// notifyCancel tells the workers to stop a job.
func (s *Scheduler) notifyCancel(ctx context.Context, jobID, reason string, now time.Time) {
	if err := s.pub.PublishCancel(ctx, &messages.CancelNotice{JobID: jobID, Reason: reason, Time: now.UnixNano()}); err != nil {
		s.log.Warn("publish cancel notice; will retry", "job", jobID, "err", err)
	}
}

// tickCancels sends the notices of the jobs still stopping again and
// fails those whose worker has not reported within cancelGrace.
func (s *Scheduler) tickCancels(ctx context.Context, now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(s.cancels)) {
		c := s.cancels[id]
		if _, ok := s.where[id]; !ok {
			delete(s.cancels, id)
			continue
		}
		if now.Sub(c.at) < cancelGrace {
			s.notifyCancel(ctx, id, c.reason, now)
			continue
		}
		s.log.Warn("cancelled job's worker did not report it stopped; failing it", "job", id, "grace", cancelGrace)
		s.failCancelled(ctx, id, c.reason+" (no worker reported it stopped within "+cancelGrace.String()+")", now)
		delete(s.cancels, id)
	}
}
