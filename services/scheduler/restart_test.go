package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// runningScheduler is the scheduler's wiring started in-process.
type runningScheduler struct {
	s    *scheduler.Scheduler
	stop func()
}

func startScheduler(t *testing.T, ctx context.Context, nc *nats.Conn, js jetstream.JetStream, opts scheduler.Options) *runningScheduler {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	opts.Logger = log
	catalogKV, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	poolsKV, err := js.KeyValue(ctx, messages.BucketPools)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := restoreHistory(ctx, js, s, 1000, log); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	sub, err := nc.Subscribe(messages.SubjectAPIAll, newAPIServer(s, log, reg).handle)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, messages.StreamEvents, messages.ConsumerScheduler)
	if err != nil {
		t.Fatal(err)
	}
	loop := newEventLoop(s, cons, service.NewRejecter("scheduler", js, log, reg), log, reg)
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loop.run(loopCtx) }()
	return &runningScheduler{s: s, stop: func() {
		sub.Unsubscribe()
		cancel()
		<-done
	}}
}

// TestRestartMidMergeoutOverNATS stops the scheduler while two mergeouts
// run and a third waits for memory, lets one finish while it is down
// (its done event waits in EVENTS, twice: a worker redelivery), starts a
// new scheduler on the same buckets and streams, and plays the workers to
// the end: every operation completes once and the catalog names each row
// once.
func TestRestartMidMergeoutOverNATS(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := scheduler.Options{Strata: scheduler.StrataOptions{Capacity: 2}}
	first := startScheduler(t, ctx, nc, js, opts)

	req := &messages.RegisterRequest{Table: "t", Projection: "p"}
	for i := range 6 {
		req.Containers = append(req.Containers, messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprintf("c%04d", i), Rows: 10, Bytes: 100})
	}
	if _, err := first.s.Register(ctx, req); err != nil {
		t.Fatal(err)
	}
	jobs, err := js.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err != nil {
		t.Fatal(err)
	}
	next := func() *messages.MergeoutJob {
		t.Helper()
		m, err := jobs.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("next job: %v", err)
		}
		j := new(messages.MergeoutJob)
		if err := messages.Unmarshal(m.Data(), j); err != nil {
			t.Fatal(err)
		}
		m.Ack()
		return j
	}
	finish := func(j *messages.MergeoutJob, times int) {
		t.Helper()
		var rows int64
		for _, in := range j.Inputs {
			rows += in.Rows
		}
		out := messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output, Rows: rows, Bytes: rows * 10}
		accepted := &messages.JobEvent{JobID: j.JobID, Operation: messages.OperationMergeout, Type: messages.EventAccepted, Worker: "w", Delivery: 1}
		if _, err := natsutil.Publish(ctx, js, accepted.Type.Subject(), "", accepted); err != nil {
			t.Fatal(err)
		}
		for d := range times {
			ev := &messages.JobEvent{JobID: j.JobID, Operation: messages.OperationMergeout, Type: messages.EventDone,
				Worker: "w", Delivery: uint64(d + 1), Output: &out, RowsTotal: rows}
			if _, err := natsutil.Publish(ctx, js, ev.Type.Subject(), "", ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := next(), next()
	first.stop() // the scheduler dies with a and b running and a third queued

	finish(a, 2)
	second := startScheduler(t, ctx, nc, js, opts)
	defer second.stop()
	finish(b, 1)
	// The queued job starts once a grant comes back; the outputs cascade.
	for range 3 {
		finish(next(), 1)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cat, err := second.s.Catalog(ctx, &messages.CatalogRequest{Table: "t"})
		if err != nil {
			t.Fatal(err)
		}
		p := cat.Projections[0]
		// The merged containers are dropped from Dead once removed, after
		// the last merge's output is live: wait for both.
		if len(p.Live) == 1 && len(p.Running) == 0 && len(p.Dead) == 0 {
			if p.Live[0].Rows != 60 {
				t.Fatalf("final catalog %+v: want one container of all 60 rows", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never settled: %+v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ops, _ := second.s.Operations(&messages.OperationsRequest{})
	seen := map[string]bool{}
	for _, op := range ops.Operations {
		if op.Status != messages.StatusDone || seen[op.JobID] {
			t.Fatalf("operation %+v: want every one done once", op)
		}
		seen[op.JobID] = true
	}
	if len(seen) != 5 {
		t.Fatalf("%d operations, want 5: %+v", len(seen), ops.Operations)
	}
	for _, p := range second.s.Pools().Pools {
		if p.InUse != 0 || p.Running != 0 || p.Queued != 0 {
			t.Fatalf("pool %s holds grants after all ended: %+v", p.Config.Name, p)
		}
	}
}
