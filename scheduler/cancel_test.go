package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// cancelHarness has table t loaded and a pool "solo" that runs one job
// at a time.
func cancelHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	cfg := messages.PoolConfig{Name: "solo", MemorySize: 1 << 30, MaxMemorySize: 1 << 30, PlannedConcurrency: 1, MaxConcurrency: 1}
	if _, err := h.s.CreatePool(h.ctx, &messages.CreatePoolRequest{Pool: cfg}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) window(pool string) *messages.WindowReply {
	h.t.Helper()
	rep, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Pool: pool, Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

func (h *harness) cancelJob(id, reqID, reason string) *messages.CancelReply {
	h.t.Helper()
	rep, err := h.s.Cancel(h.ctx, &messages.CancelRequest{JobID: id, RequestID: reqID, Reason: reason})
	if err != nil {
		h.t.Fatalf("cancel %s (request %s): %v", id, reqID, err)
	}
	return rep
}

func (h *harness) pool(name string) messages.PoolStatus {
	h.t.Helper()
	for _, p := range h.s.Pools().Pools {
		if p.Config.Name == name {
			return p
		}
	}
	h.t.Fatalf("no pool %s", name)
	return messages.PoolStatus{}
}

func (h *harness) op(jobID string) messages.Operation {
	h.t.Helper()
	rep, err := h.s.Operations(&messages.OperationsRequest{JobID: jobID})
	if err != nil || len(rep.Operations) != 1 {
		h.t.Fatalf("operation %s: %+v %v", jobID, rep, err)
	}
	return rep.Operations[0]
}

// TestCancel: a queued job is failed at once and leaves its queue; a
// running one is told to stop and keeps its grant until its worker
// reports it failed; an ended one is left as it ended; every answer is
// the same for a request sent again, across a restart.
func TestCancel(t *testing.T) {
	h := cancelHarness(t)
	running := h.window("solo").Job
	queued := h.window("solo").Job
	if running.Queued || !queued.Queued {
		t.Fatalf("running %+v, queued %+v", running, queued)
	}

	// Queued: failed now, with a failed event for whoever waits.
	rep := h.cancelJob(queued.JobID, "c-queued", "client went away")
	if rep.State != messages.CancelQueued || rep.Reason != "cancelled: client went away" || rep.Repeat {
		t.Fatalf("cancel queued: %+v", rep)
	}
	if p := h.pool("solo"); p.Queued != 0 || p.Running != 1 {
		t.Fatalf("pool after cancelling the queued job: %+v", p)
	}
	if op := h.op(queued.JobID); op.Status != messages.StatusFailed || op.Reason != rep.Reason {
		t.Fatalf("queued job's operation: %+v", op)
	}
	ev := h.pub.events[len(h.pub.events)-1]
	if ev.JobID != queued.JobID || ev.Type != messages.EventFailed || ev.Retryable || ev.Reason != rep.Reason {
		t.Fatalf("event of the cancelled queued job: %+v", ev)
	}
	if again := h.cancelJob(queued.JobID, "c-queued", "client went away"); again.State != messages.CancelQueued || !again.Repeat {
		t.Fatalf("queued cancel sent again: %+v", again)
	}
	if len(h.state("t").Pending) != 1 {
		t.Fatalf("pending after the queued cancel: %+v", h.state("t").Pending)
	}

	// Running: the workers are told; the grant is held until the worker reports.
	rep = h.cancelJob(running.JobID, "c-running", "")
	if rep.State != messages.CancelRunning || rep.Reason != "cancelled: by request" {
		t.Fatalf("cancel running: %+v", rep)
	}
	if len(h.pub.cancels) != 1 || h.pub.cancels[0].JobID != running.JobID || h.pub.cancels[0].Reason != rep.Reason {
		t.Fatalf("cancel notices %+v", h.pub.cancels)
	}
	if p := h.pool("solo"); p.Running != 1 || p.InUse == 0 {
		t.Fatalf("pool while the worker stops: %+v", p)
	}
	if again := h.cancelJob(running.JobID, "c-running", "other"); again.State != messages.CancelRunning || !again.Repeat || again.Reason != rep.Reason {
		t.Fatalf("running cancel sent again: %+v", again)
	}
	if other := h.cancelJob(running.JobID, "c-running-2", "other"); other.State != messages.CancelRunning || other.Repeat || other.Reason != rep.Reason {
		t.Fatalf("second cancel of a stopping job: %+v", other)
	}
	// Restart while it stops: the notice goes out again at the next tick.
	h.start()
	h.s.Tick(h.ctx)
	if n := h.pub.cancels[len(h.pub.cancels)-1]; n.JobID != running.JobID || n.Reason != rep.Reason {
		t.Fatalf("notices after a restart: %+v", h.pub.cancels)
	}
	h.event(&messages.JobEvent{JobID: running.JobID, Operation: messages.OperationWindow, Type: messages.EventFailed,
		Worker: "windower-1", Delivery: 1, Reason: rep.Reason, PeakBytes: 5 << 20})
	if p := h.pool("solo"); p.Running != 0 || p.InUse != 0 {
		t.Fatalf("pool after the worker stopped: %+v", p)
	}
	if op := h.op(running.JobID); op.Status != messages.StatusFailed || op.Reason != rep.Reason {
		t.Fatalf("running job's operation: %+v", op)
	}
	if again := h.cancelJob(running.JobID, "c-running", ""); !again.Repeat || again.State != messages.CancelRunning {
		t.Fatalf("running cancel sent again after it ended: %+v", again)
	}
	if late := h.cancelJob(running.JobID, "c-late", ""); late.State != messages.CancelFailed || late.Reason != rep.Reason || late.Repeat {
		t.Fatalf("cancel of a failed job: %+v", late)
	}

	// Done: nothing to cancel.
	done := h.window("solo").Job
	w := h.pub.windows[len(h.pub.windows)-1]
	out := messages.ContainerRef{Table: w.ResultTable, Projection: messages.ResultProjection, ID: w.Output, Rows: 200}
	h.mkdir(out)
	h.event(&messages.JobEvent{JobID: done.JobID, Operation: messages.OperationWindow, Type: messages.EventDone, Output: &out})
	if rep := h.cancelJob(done.JobID, "c-done", ""); rep.State != messages.CancelDone {
		t.Fatalf("cancel of a done job: %+v", rep)
	}
	if op := h.op(done.JobID); op.Status != messages.StatusDone {
		t.Fatalf("done job after a cancel: %+v", op)
	}

	// Unknown and invalid.
	if _, err := h.s.Cancel(h.ctx, &messages.CancelRequest{JobID: "window.t.p.99"}); !errors.Is(err, ErrUnknownJob) || APIError(err).Code != "not_found" {
		t.Fatalf("cancel of an unknown job: %v", err)
	}
	if _, err := h.s.Cancel(h.ctx, &messages.CancelRequest{JobID: "../x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cancel of a bad job ID: %v", err)
	}
	if _, err := h.s.Cancel(h.ctx, &messages.CancelRequest{JobID: "x", Reason: strings.Repeat("r", messages.MaxCancelReason+1)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cancel with a long reason: %v", err)
	}
	h.checkConsistent("t")
}

// TestCancelWorkerSilent: a cancelled running job whose worker never
// reports is told again at every tick, then failed by the scheduler
// after cancelGrace, its grant released.
func TestCancelWorkerSilent(t *testing.T) {
	h := cancelHarness(t)
	job := h.window("solo").Job
	next := h.window("solo").Job
	rep := h.cancelJob(job.JobID, "", "stop")
	if rep.State != messages.CancelRunning {
		t.Fatalf("cancel: %+v", rep)
	}
	h.clock.Advance(time.Second)
	h.s.Tick(h.ctx)
	if len(h.pub.cancels) != 2 {
		t.Fatalf("notices after a tick: %d, want 2", len(h.pub.cancels))
	}
	h.clock.Advance(cancelGrace)
	h.s.Tick(h.ctx)
	if op := h.op(job.JobID); op.Status != messages.StatusFailed || !strings.HasPrefix(op.Reason, "cancelled: stop") {
		t.Fatalf("operation after the grace: %+v", op)
	}
	// Its memory went to the job that waited.
	if op := h.op(next.JobID); op.Status != messages.StatusRunning {
		t.Fatalf("the queued job after the grace: %+v", op)
	}
	h.s.Tick(h.ctx)
	if len(h.pub.cancels) != 2 {
		t.Fatalf("notices after the job ended: %d, want 2", len(h.pub.cancels))
	}
	// The worker's late failed report changes nothing.
	if err := h.claim(&messages.JobEvent{JobID: job.JobID, Type: messages.EventFailed, Worker: "windower-1", Reason: rep.Reason}); err != nil {
		t.Fatalf("late report: %v", err)
	}
}

// TestCancelQueuedAcrossRestart: a queued job whose cancel was recorded
// but not yet carried out when the scheduler stopped is failed at start,
// not queued again.
func TestCancelQueuedAcrossRestart(t *testing.T) {
	h := cancelHarness(t)
	h.window("solo")
	queued := h.window("solo").Job
	_, err := h.s.catalog.Update(h.ctx, "t", "p", func(st *ProjectionState) error {
		i, _ := st.pending(queued.JobID)
		st.Pending[i].Cancel = "cancelled: before the crash"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	if op := h.op(queued.JobID); op.Status != messages.StatusFailed || op.Reason != "cancelled: before the crash" {
		t.Fatalf("after the restart: %+v", op)
	}
	if p := h.pool("solo"); p.Queued != 0 || p.Running != 1 {
		t.Fatalf("pool after the restart: %+v", p)
	}
	h.checkConsistent("t")
}
