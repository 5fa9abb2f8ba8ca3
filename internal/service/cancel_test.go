package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// A running job named by a cancel notice is stopped (its context ends,
// with the notice as the cause), reported failed with the notice's
// reason, not retried, and its message terminated; a job delivered after
// its notice fails without running.
func TestJobWorkerCancelsJob(t *testing.T) {
	started := make(chan struct{}, 4)
	stoppedBy := make(chan error, 4)
	var runs atomic.Int32
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		runs.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		stoppedBy <- context.Cause(ctx)
		return Outcome{}, ctx.Err()
	})
	env.worker.Cancels = NewCancels(env.worker.Log)
	sub, err := env.worker.Cancels.Subscribe(env.js.Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	data, _ := messages.Marshal(job("j-run", 10<<20))
	publishJob(t, env.js, data)

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- env.worker.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("job did not start")
	}
	notice, _ := messages.Marshal(&messages.CancelNotice{JobID: "j-run", Reason: "cancelled: client went away", Time: time.Now().UnixNano()})
	at := time.Now()
	if err := env.js.Conn().Publish(messages.SubjectCancel, notice); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-stoppedBy:
		if ce, ok := cause.(*CancelledError); !ok || ce.Reason != "cancelled: client went away" {
			t.Fatalf("job's context ended by %v", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not stop")
	}
	waitUntil(t, func() bool { return value(env.worker.Metrics.jobs.WithLabelValues("cancelled")) == 1 })
	if d := time.Since(at); d > 5*time.Second {
		t.Errorf("stopped %v after the notice", d)
	}
	evs := env.events(t)
	if len(evs[messages.EventFailed]) != 1 {
		t.Fatalf("failed events %+v", evs[messages.EventFailed])
	}
	if ev := evs[messages.EventFailed][0]; ev.Retryable || ev.Reason != "cancelled: client went away" || ev.JobID != "j-run" {
		t.Fatalf("failed event %+v", ev)
	}
	if got := value(env.worker.Metrics.jobs.WithLabelValues("retried")) + value(env.worker.Metrics.jobs.WithLabelValues("failed")); got != 0 {
		t.Errorf("retried or failed %v, want 0", got)
	}

	// A delivery after the notice: failed without running.
	data, _ = messages.Marshal(job("j-late", 10<<20))
	env.worker.Cancels.Notify(&messages.CancelNotice{JobID: "j-late", Reason: "cancelled: early"})
	publishJob(t, env.js, data)
	waitUntil(t, func() bool { return value(env.worker.Metrics.jobs.WithLabelValues("cancelled")) == 2 })
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
	cons, _ := env.js.Consumer(context.Background(), messages.StreamJobs, messages.ConsumerMerger)
	waitUntil(t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// The notices kept are bounded in number.
func TestCancelsBounded(t *testing.T) {
	c := NewCancels(nil)
	for i := range cancelMax + 10 {
		c.Notify(&messages.CancelNotice{JobID: "j" + string(rune('a'+i%26)) + time.Duration(i).String(), Reason: "r"})
	}
	if len(c.recent) != cancelMax || len(c.order) != cancelMax {
		t.Fatalf("%d notices kept (%d in order), want %d", len(c.recent), len(c.order), cancelMax)
	}
	var nilCancels *Cancels
	if _, ok := nilCancels.Cancelled("x"); ok {
		t.Fatal("a nil Cancels has a notice")
	}
	nilCancels.Notify(&messages.CancelNotice{JobID: "x"})
	nilCancels.track("x", func(string) {})()
}
