// Package jobtest runs a worker's job handler under a real service.JobWorker
// on an embedded NATS server, for the workers' tests: publish jobs, serve
// until a job settles, read the events it left.
package jobtest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

// MaxDeliver is the job consumers' MaxDeliver in an Env.
const MaxDeliver = 3

// Env is an embedded NATS server with the strata topology and a JobWorker
// for one spec.
type Env[J service.Job] struct {
	JS     jetstream.JetStream
	Worker *service.JobWorker[J]
	// Registry holds the worker's metrics.
	Registry *prometheus.Registry
	subject  string
}

// Start starts the server and builds the worker of spec, whose jobs are
// published on subject. Everything stops at the test's end.
func Start[J service.Job](t testing.TB, spec service.JobSpec[J], subject string) *Env[J] {
	t.Helper()
	topo := natsutil.DefaultTopology()
	topo.JobMaxDeliver = MaxDeliver
	_, _, js := natstest.Start(t, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, messages.StreamJobs, spec.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := service.NewLogger(io.Discard, "text", "error")
	reg := prometheus.NewRegistry()
	w := &service.JobWorker[J]{
		Consumer: cons, JS: js, Operation: spec.Operation, Worker: "w1", Memory: 1 << 30,
		Heartbeat: 50 * time.Millisecond, MaxDeliver: MaxDeliver, StopGrace: 50 * time.Millisecond,
		GrantRetryDelay: 10 * time.Millisecond, Log: log,
		Rejecter: service.NewRejecter(spec.Consumer, js, log, reg, subject), Metrics: service.NewJobMetrics(reg, spec.Consumer),
		New: spec.New, Run: spec.Run, Permanent: spec.Permanent,
	}
	return &Env[J]{JS: js, Worker: w, Registry: reg, subject: subject}
}

// Publish publishes job.
func (e *Env[J]) Publish(t testing.TB, job J) {
	t.Helper()
	data, err := messages.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.JS.Publish(context.Background(), e.subject, data); err != nil {
		t.Fatal(err)
	}
}

// Events returns every job event published so far, oldest first.
func (e *Env[J]) Events(t testing.TB) []*messages.JobEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.JS.OrderedConsumer(ctx, messages.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*messages.JobEvent
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(200 * time.Millisecond))
		if err != nil {
			return out
		}
		ev := new(messages.JobEvent)
		if err := messages.Unmarshal(msg.Data(), ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// Final returns the event that settled jobID, a done or a final failed
// event, or nil.
func Final(events []*messages.JobEvent, jobID string) *messages.JobEvent {
	for _, ev := range events {
		if ev.JobID == jobID && (ev.Type == messages.EventDone || ev.Type == messages.EventFailed && !ev.Retryable) {
			return ev
		}
	}
	return nil
}

// Count returns how many events of jobID are of type typ.
func Count(events []*messages.JobEvent, jobID string, typ messages.EventType) int {
	n := 0
	for _, ev := range events {
		if ev.JobID == jobID && ev.Type == typ {
			n++
		}
	}
	return n
}

// ServeUntilSettled runs the worker until jobID is done or failed for
// good (at most 30s), stops it, and returns every event so far.
func (e *Env[J]) ServeUntilSettled(t testing.TB, jobID string) []*messages.JobEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.Worker.Serve(ctx) }()
	stop := func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := e.Events(t)
		if Final(evs, jobID) != nil {
			stop()
			return e.Events(t)
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("job %s not settled within 30s; events %+v", jobID, evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pending returns the consumer's undelivered and unacknowledged job counts:
// both zero once every job was acked or terminated.
func (e *Env[J]) Pending(t testing.TB, consumer string) (pending uint64, ackPending int) {
	t.Helper()
	cons, err := e.JS.Consumer(context.Background(), messages.StreamJobs, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumPending, info.NumAckPending
}
