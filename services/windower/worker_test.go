package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/internal/service/jobtest"
	"github.com/strata-db/strata/messages"
)

// workerEnv runs w's handler under a JobWorker, as the windower binary does.
func workerEnv(t *testing.T, w *windowJob, wrap func(run jobRun) jobRun) *jobtest.Env[*messages.WindowJob] {
	run := jobRun(w.run)
	if wrap != nil {
		run = wrap(run)
	}
	return jobtest.Start(t, service.JobSpec[*messages.WindowJob]{
		Operation: messages.OperationWindow,
		Consumer:  messages.ConsumerWindower,
		New:       func() *messages.WindowJob { return new(messages.WindowJob) },
		Run:       run,
		Permanent: engineerr.Permanent,
	}, messages.SubjectJobWindow)
}

type jobRun = func(ctx context.Context, job *messages.WindowJob, p *service.Progress) (service.Outcome, error)

func TestWindowDivisionByZeroFailsAtFirstDelivery(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, sum(k0 / 0) OVER () AS s FROM t")
	env := workerEnv(t, w, nil)
	env.Publish(t, job)
	evs := env.ServeUntilSettled(t, job.JobID)
	f := jobtest.Final(evs, job.JobID)
	if f.Type != messages.EventFailed || f.Delivery != 1 {
		t.Fatalf("final event %+v, want a failure at delivery 1", f)
	}
	t.Logf("reason: %s", f.Reason)
	if !strings.Contains(f.Reason, "division by zero in k0 / 0") {
		t.Errorf("reason %q does not say division by zero", f.Reason)
	}
	if n := jobtest.Count(evs, job.JobID, messages.EventAccepted); n != 1 {
		t.Errorf("accepted %d times, want once", n)
	}
	if p, ap := env.Pending(t, messages.ConsumerWindower); p != 0 || ap != 0 {
		t.Errorf("job left in the consumer: %d pending, %d unacknowledged", p, ap)
	}
	if _, err := os.Stat(filepath.Join(w.dataDir, job.ResultTable)); !os.IsNotExist(err) {
		t.Errorf("a failed query left a result: %v", err)
	}
}

func TestWindowWriteErrorIsRetried(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
	// The result table's directory is taken by a file: the result cannot
	// be written until it is gone, as after a full or failing disk.
	block := filepath.Join(w.dataDir, job.ResultTable)
	if err := os.WriteFile(block, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	env := workerEnv(t, w, func(run jobRun) jobRun {
		return func(ctx context.Context, j *messages.WindowJob, p *service.Progress) (service.Outcome, error) {
			out, err := run(ctx, j, p)
			if runs.Add(1) == 1 {
				os.Remove(block)
			}
			return out, err
		}
	})
	env.Publish(t, job)
	evs := env.ServeUntilSettled(t, job.JobID)
	f := jobtest.Final(evs, job.JobID)
	if f.Type != messages.EventDone || f.Delivery != 2 || f.RowsTotal != 500 {
		t.Fatalf("final event %+v, want done at delivery 2", f)
	}
	var retried []*messages.JobEvent
	for _, ev := range evs {
		if ev.Type == messages.EventFailed {
			retried = append(retried, ev)
		}
	}
	if len(retried) > 0 {
		t.Logf("retried: %s", retried[0].Reason)
	}
	if len(retried) != 1 || !retried[0].Retryable || retried[0].Delivery != 1 {
		t.Errorf("failed events %+v, want one retryable failure at delivery 1", retried)
	}
}

func TestWindowEngineFailureLeavesTheWorkerServing(t *testing.T) {
	// An ORDER BY over an input its WHERE empties: whatever the engine
	// makes of it (a result of no rows, or a failure), the job settles at
	// its first delivery and the worker takes the next job.
	w, empty := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t WHERE k0 < -9000000000000000000")
	_, next := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
	next.Inputs = empty.Inputs // the same data directory
	next.JobID, next.Output = "w2", "w2"
	env := workerEnv(t, w, nil)
	env.Publish(t, empty)
	env.Publish(t, next)
	evs := env.ServeUntilSettled(t, next.JobID)
	f := jobtest.Final(evs, empty.JobID)
	switch {
	case f == nil:
		t.Fatalf("first job not settled; events %+v", evs)
	case f.Type == messages.EventDone && f.RowsTotal != 0:
		t.Errorf("first job: %d rows, want none", f.RowsTotal)
	case f.Type == messages.EventFailed && f.Delivery != 1:
		t.Errorf("first job failed at delivery %d, want 1: %s", f.Delivery, f.Reason)
	}
	t.Logf("first job: %s %s", f.Type, f.Reason)
	if d := jobtest.Final(evs, next.JobID); d.Type != messages.EventDone || d.RowsTotal != 500 {
		t.Errorf("next job: %+v, want done with 500 rows", d)
	}
}
