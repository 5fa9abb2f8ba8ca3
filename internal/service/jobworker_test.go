package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

type workerEnv struct {
	js      jetstream.JetStream
	worker  *JobWorker[*messages.MergeoutJob]
	rejects *Rejecter
}

func newWorkerEnv(t testing.TB, run func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error)) *workerEnv {
	t.Helper()
	topo := natsutil.DefaultTopology()
	topo.JobMaxDeliver = 3
	_, _, js := natstest.Start(t, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := NewLogger(io.Discard, "text", "error")
	reg := prometheus.NewRegistry()
	rej := NewRejecter("merger", js, log, reg)
	w := &JobWorker[*messages.MergeoutJob]{
		Consumer: cons, JS: js, Operation: "mergeout", Worker: "w1", Memory: 100 << 20,
		Heartbeat: 50 * time.Millisecond, MaxDeliver: 3, StopGrace: 50 * time.Millisecond,
		GrantRetryDelay: 10 * time.Millisecond, Log: log, Rejecter: rej, Metrics: NewJobMetrics(reg, "merger"),
		New: func() *messages.MergeoutJob { return new(messages.MergeoutJob) }, Run: run,
	}
	return &workerEnv{js: js, worker: w, rejects: rej}
}

func job(id string, grant int64) *messages.MergeoutJob {
	return &messages.MergeoutJob{JobID: id, Table: "t", Projection: "p", Output: "m" + id,
		Inputs: []messages.ContainerRef{{ID: "c1"}, {ID: "c2"}}, Grant: messages.Grant{Pool: "tm", Bytes: grant}}
}

// events returns the events published so far, by type.
func (e *workerEnv) events(t *testing.T) map[messages.EventType][]*messages.JobEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.js.OrderedConsumer(ctx, messages.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[messages.EventType][]*messages.JobEvent{}
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return out
		}
		ev := new(messages.JobEvent)
		if err := messages.Unmarshal(msg.Data(), ev); err != nil {
			t.Fatal(err)
		}
		out[ev.Type] = append(out[ev.Type], ev)
	}
}

func (e *workerEnv) serveUntil(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.worker.Serve(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("condition not reached within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func publishJob(t *testing.T, js jetstream.JetStream, data []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), messages.SubjectJobMergeout, data); err != nil {
		t.Fatal(err)
	}
}

func TestJobWorkerRunsJobAndRejectsMalformed(t *testing.T) {
	var ran atomic.Int32
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		ran.Add(1)
		p.Report(5, 10)
		return Outcome{Output: &messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output, Rows: 10}, Plan: "horizontal", RowsTotal: 10, PeakBytes: 1234}, nil
	})
	publishJob(t, env.js, []byte("not msgpack at all"))
	data, _ := messages.Marshal(job("j1", 10<<20))
	publishJob(t, env.js, data)
	env.serveUntil(t, func() bool { return value(env.worker.Metrics.jobs.WithLabelValues("done")) == 1 })

	if ran.Load() != 1 {
		t.Errorf("job ran %d times", ran.Load())
	}
	if got := value(env.rejects.count.WithLabelValues(messages.SubjectJobMergeout, ClassMalformed)); got != 1 {
		t.Errorf("malformed count %v, want 1", got)
	}
	evs := env.events(t)
	if len(evs[messages.EventAccepted]) != 1 || len(evs[messages.EventDone]) != 1 {
		t.Fatalf("events: %d accepted, %d done", len(evs[messages.EventAccepted]), len(evs[messages.EventDone]))
	}
	if d := evs[messages.EventDone][0]; d.Output == nil || d.Output.ID != "mj1" || d.PeakBytes != 1234 || d.Plan != "horizontal" {
		t.Errorf("done event %+v", d)
	}
	s, _ := env.js.Stream(context.Background(), messages.StreamDeadLetter)
	dl, err := s.GetLastMsgForSubject(context.Background(), messages.SubjectDeadLetter(messages.SubjectJobMergeout))
	if err != nil {
		t.Fatal(err)
	}
	if dl.Header.Get(messages.HeaderReason) == "" || string(dl.Data) != "not msgpack at all" {
		t.Errorf("dead letter: reason %q, payload %q", dl.Header.Get(messages.HeaderReason), dl.Data)
	}
	// The job stays in JOBS (history) but is acked: nothing pending.
	cons, _ := env.js.Consumer(context.Background(), messages.StreamJobs, messages.ConsumerMerger)
	info, _ := cons.Info(context.Background())
	if info.NumPending != 0 || info.NumAckPending != 0 {
		t.Errorf("consumer: %d pending, %d ack pending", info.NumPending, info.NumAckPending)
	}
}

func TestJobWorkerRetriesThenFails(t *testing.T) {
	var ran atomic.Int32
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		ran.Add(1)
		return Outcome{}, errors.New("disk on fire")
	})
	data, _ := messages.Marshal(job("j2", 10<<20))
	publishJob(t, env.js, data)
	env.serveUntil(t, func() bool { return value(env.worker.Metrics.jobs.WithLabelValues("failed")) == 1 })
	if ran.Load() != 3 {
		t.Errorf("job ran %d times, want MaxDeliver=3", ran.Load())
	}
	if got := value(env.worker.Metrics.jobs.WithLabelValues("retried")); got != 2 {
		t.Errorf("retried %v, want 2", got)
	}
	evs := env.events(t)
	last := evs[messages.EventFailed][len(evs[messages.EventFailed])-1]
	if last.Retryable || last.Reason != "disk on fire" {
		t.Errorf("final failed event %+v", last)
	}
}

func TestJobWorkerFailsPanickingJobAtOnceAndGoesOn(t *testing.T) {
	ran := map[string]*atomic.Int32{"boom": new(atomic.Int32), "next": new(atomic.Int32)}
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		ran[j.JobID].Add(1)
		if j.JobID == "boom" {
			empty := j.Inputs[:0]
			_ = empty[len(j.Inputs)] // index out of range, as an engine bug would
		}
		return Outcome{Output: &messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output}, RowsTotal: 1}, nil
	})
	for _, id := range []string{"boom", "next"} {
		data, _ := messages.Marshal(job(id, 10<<20))
		publishJob(t, env.js, data)
	}
	env.serveUntil(t, func() bool {
		return value(env.worker.Metrics.jobs.WithLabelValues("failed")) == 1 && value(env.worker.Metrics.jobs.WithLabelValues("done")) == 1
	})
	if ran["boom"].Load() != 1 || ran["next"].Load() != 1 {
		t.Errorf("runs: boom %d, next %d; want 1 each", ran["boom"].Load(), ran["next"].Load())
	}
	if got := value(env.worker.Metrics.panics); got != 1 {
		t.Errorf("panics %v, want 1", got)
	}
	if got := value(env.worker.Metrics.jobs.WithLabelValues("retried")); got != 0 {
		t.Errorf("a panicked job was retried %v times", got)
	}
	evs := env.events(t)
	f := evs[messages.EventFailed]
	if len(f) != 1 || f[0].JobID != "boom" || f[0].Retryable || f[0].Delivery != 1 {
		t.Fatalf("failed events %+v, want one final failure of boom at delivery 1", f)
	}
	t.Logf("reason: %s", f[0].Reason)
	if !strings.HasPrefix(f[0].Reason, "panic: runtime error: index out of range") || !strings.Contains(f[0].Reason, "jobworker_test.go") {
		t.Errorf("reason %q, want the panic's message and where it was raised", f[0].Reason)
	}
	if d := evs[messages.EventDone]; len(d) != 1 || d[0].JobID != "next" {
		t.Errorf("done events %+v, want the next job done", d)
	}
	s, _ := env.js.Stream(context.Background(), messages.StreamDeadLetter)
	dl, err := s.GetLastMsgForSubject(context.Background(), messages.SubjectDeadLetter(messages.SubjectJobMergeout))
	if err != nil {
		t.Fatal(err)
	}
	if dl.Header.Get(messages.HeaderReason) != f[0].Reason {
		t.Errorf("dead letter reason %q, want %q", dl.Header.Get(messages.HeaderReason), f[0].Reason)
	}
	// Terminated, not left for redelivery.
	cons, _ := env.js.Consumer(context.Background(), messages.StreamJobs, messages.ConsumerMerger)
	info, _ := cons.Info(context.Background())
	if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Errorf("consumer: %d pending, %d ack pending, %d redelivered", info.NumPending, info.NumAckPending, info.NumRedelivered)
	}
}

func TestJobWorkerFailsClassedPermanentErrorAtOnce(t *testing.T) {
	errDeterministic := errors.New("engine: division by zero")
	var ran atomic.Int32
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		ran.Add(1)
		return Outcome{}, fmt.Errorf("select item 2: %w", errDeterministic)
	})
	env.worker.Permanent = func(err error) bool { return errors.Is(err, errDeterministic) }
	data, _ := messages.Marshal(job("j5", 10<<20))
	publishJob(t, env.js, data)
	env.serveUntil(t, func() bool { return value(env.worker.Metrics.jobs.WithLabelValues("failed")) == 1 })
	if ran.Load() != 1 {
		t.Errorf("job ran %d times, want 1", ran.Load())
	}
	f := env.events(t)[messages.EventFailed]
	if len(f) != 1 || f[0].Retryable || f[0].Delivery != 1 || f[0].Reason != "select item 2: engine: division by zero" {
		t.Fatalf("failed events %+v", f)
	}
}

func TestJobWorkerHandsBackOversizedGrant(t *testing.T) {
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		t.Error("a job larger than the worker's memory ran")
		return Outcome{}, nil
	})
	data, _ := messages.Marshal(job("j3", 1<<40))
	publishJob(t, env.js, data)
	env.serveUntil(t, func() bool { return value(env.worker.Metrics.jobs.WithLabelValues("failed")) == 1 })
	if got := value(env.worker.Metrics.deferred); got != 3 {
		t.Errorf("deferred %v, want 3", got)
	}
}

func TestJobWorkerReleasesJobOnStop(t *testing.T) {
	started := make(chan struct{}, 4)
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		started <- struct{}{}
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	})
	data, _ := messages.Marshal(job("j4", 10<<20))
	publishJob(t, env.js, data)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- env.worker.Serve(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("job did not start")
	}
	cancel()
	<-served
	if got := value(env.worker.Metrics.jobs.WithLabelValues("released")); got != 1 {
		t.Errorf("released %v, want 1", got)
	}
	cons, _ := env.js.Consumer(context.Background(), messages.StreamJobs, messages.ConsumerMerger)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("released job not redelivered: %v", err)
	}
	if md, _ := msg.Metadata(); md.NumDelivered != 2 {
		t.Errorf("redelivery number %d, want 2", md.NumDelivered)
	}
}

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func TestWatchMaxDeliveriesFailsAbandonedJob(t *testing.T) {
	env := newWorkerEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A consumer with a short lease, whose "workers" take the job and die.
	topo := natsutil.DefaultTopology()
	topo.JobAckWait = 300 * time.Millisecond
	topo.JobMaxDeliver = 2
	if err := topo.Ensure(ctx, env.js); err != nil {
		t.Fatal(err)
	}
	nc := env.js.Conn()
	watch, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		watched <- env.worker.WatchMaxDeliveries(watch, nc, messages.StreamJobs, messages.ConsumerMerger)
	}()
	time.Sleep(100 * time.Millisecond) // let the subscription reach the server
	data, _ := messages.Marshal(job("abandoned", 10<<20))
	publishJob(t, env.js, data)
	cons, _ := env.js.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	for i := 0; i < 2; i++ {
		if _, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for value(env.worker.Metrics.jobs.WithLabelValues("undelivered")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no failure reported for a job past MaxDeliver")
		}
		// Workers keep pulling; the server decides on redeliveries as it
		// serves pulls, and announces the job it gives up on.
		if msg, err := cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond)); err == nil {
			t.Fatalf("job delivered again past MaxDeliver: %s", msg.Subject())
		}
	}
	stopWatch()
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	evs := env.events(t)
	if f := evs[messages.EventFailed]; len(f) != 1 || f[0].JobID != "abandoned" || f[0].Retryable || f[0].Delivery != 2 {
		t.Fatalf("failed events %+v", f)
	}
	s, _ := env.js.Stream(ctx, messages.StreamDeadLetter)
	dl, err := s.GetLastMsgForSubject(ctx, messages.SubjectDeadLetter(messages.SubjectJobMergeout))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dl.Header.Get(messages.HeaderReason), "delivered 2 times") {
		t.Errorf("dead letter reason %q", dl.Header.Get(messages.HeaderReason))
	}
}

// BenchmarkJobWorkerOverhead measures what the job protocol costs per job
// (fetch, accepted event, done event, double ack) with a handler that does
// nothing: the floor under every mergeout and window job.
func BenchmarkJobWorkerOverhead(b *testing.B) {
	var done atomic.Int64
	env := newWorkerEnv(b, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		done.Add(1)
		return Outcome{Output: &messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output}}, nil
	})
	data, _ := messages.Marshal(job("bench", 1<<20))
	for i := 0; i < b.N; i++ {
		if _, err := env.js.Publish(context.Background(), messages.SubjectJobMergeout, data); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	go env.worker.Serve(ctx)
	for done.Load() < int64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// TestJobWorkerAcksOnlyAfterOutcomeStored is the reproduction of a done
// event lost across a NATS outage with the job acked anyway (and stuck
// running): while the done event cannot be stored the job stays
// unacknowledged, its lease kept; once it is stored the job is acked.
func TestJobWorkerAcksOnlyAfterOutcomeStored(t *testing.T) {
	release := make(chan struct{})
	e := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		<-release
		return Outcome{Output: &messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output}, RowsTotal: 10}, nil
	})
	ctx := context.Background()
	data, _ := messages.Marshal(job("1", 1<<20))
	publishJob(t, e.js, data)
	cons, err := e.js.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err != nil {
		t.Fatal(err)
	}
	ackPending := func() int {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.NumAckPending
	}
	events, err := e.js.Stream(ctx, messages.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cfg := events.CachedInfo().Config
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- e.worker.Serve(sctx) }()
	defer func() { cancel(); <-served }()
	waitUntil(t, func() bool { return ackPending() == 1 })
	// The events stream is gone (a NATS outage, as far as publishes go)
	// when the job ends.
	if err := e.js.DeleteStream(ctx, messages.StreamEvents); err != nil {
		t.Fatal(err)
	}
	close(release)
	time.Sleep(time.Second)
	if n := ackPending(); n != 1 {
		t.Fatalf("job acked (%d pending) though its done event was not stored", n)
	}
	if _, err := e.js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return ackPending() == 0 })
	if got := e.events(t)[messages.EventDone]; len(got) != 1 {
		t.Fatalf("%d done events stored, want 1", len(got))
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJobWorkerAfterJob: the collection between jobs runs once a job has
// ended, after its done event and its ack, and not for a message that
// never ran.
func TestJobWorkerAfterJob(t *testing.T) {
	env := newWorkerEnv(t, func(ctx context.Context, j *messages.MergeoutJob, p *Progress) (Outcome, error) {
		return Outcome{Output: &messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output, Rows: 1}, RowsTotal: 1}, nil
	})
	var calls atomic.Int32
	var ackPending atomic.Int64
	env.worker.AfterJob = func() {
		cons, err := env.js.Consumer(context.Background(), messages.StreamJobs, messages.ConsumerMerger)
		if err != nil {
			t.Error(err)
			return
		}
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		ackPending.Store(int64(info.NumAckPending))
		calls.Add(1)
	}
	publishJob(t, env.js, []byte("not msgpack at all"))
	data, _ := messages.Marshal(job("j1", 10<<20))
	publishJob(t, env.js, data)
	env.serveUntil(t, func() bool { return calls.Load() == 1 })
	if n := value(env.worker.Metrics.jobs.WithLabelValues("done")); n != 1 {
		t.Errorf("AfterJob ran with %v jobs done, want 1", n)
	}
	if ackPending.Load() != 0 {
		t.Errorf("AfterJob ran with %d messages unacked, want it after the ack", ackPending.Load())
	}
	if got := len(env.events(t)[messages.EventDone]); got != 1 {
		t.Errorf("%d done events, want 1", got)
	}
	if calls.Load() != 1 {
		t.Errorf("AfterJob called %d times, want once (not for the malformed message)", calls.Load())
	}
}

// A NATS server restarted before it stored a job's delivery count hands
// the job out again as delivery 1, so two workers can each hold delivery
// 1 of one job (the chaos suite's kill-nats-node round did). The
// scheduler takes the outcome only from the worker whose claim it holds;
// if that worker's done event is dropped as a duplicate of the other's,
// the job stays running for ever. Each worker's events are its own, and
// a worker's retry of its own event is still one event.
func TestJobEventsOfTwoWorkersOfOneDelivery(t *testing.T) {
	e := newWorkerEnv(t, nil)
	for _, w := range []string{"merger-2", "merger-1", "merger-1"} {
		r := &jobRun{js: e.js, log: e.worker.Log, operation: "mergeout", worker: w, jobID: "mergeout.c6.p.1", streamSeq: 7, delivery: 1}
		for _, typ := range []messages.EventType{messages.EventAccepted, messages.EventDone, messages.EventFailed} {
			r.publish(typ, nil)
		}
	}
	events := e.events(t)
	for _, typ := range []messages.EventType{messages.EventAccepted, messages.EventDone, messages.EventFailed} {
		by := map[string]int{}
		for _, ev := range events[typ] {
			by[ev.Worker]++
		}
		if by["merger-1"] != 1 || by["merger-2"] != 1 {
			t.Errorf("%s events stored by worker %v, want one of each", typ, by)
		}
	}
}
