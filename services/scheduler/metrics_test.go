package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

var schedulerMetrics = map[string]dto.MetricType{
	"strata_scheduler_api_requests_total":  dto.MetricType_COUNTER,
	"strata_scheduler_events_total":        dto.MetricType_COUNTER,
	"strata_rejected_messages_total":       dto.MetricType_COUNTER,
	"strata_pool_in_use_bytes":             dto.MetricType_GAUGE,
	"strata_pool_borrowed_bytes":           dto.MetricType_GAUGE,
	"strata_pool_running_jobs":             dto.MetricType_GAUGE,
	"strata_pool_queued_jobs":              dto.MetricType_GAUGE,
	"strata_pool_memorysize_bytes":         dto.MetricType_GAUGE,
	"strata_pool_maxmemorysize_bytes":      dto.MetricType_GAUGE,
	"strata_consumer_lag_messages":         dto.MetricType_GAUGE,
	"strata_consumer_pending_messages":     dto.MetricType_GAUGE,
	"strata_consumer_ack_pending_messages": dto.MetricType_GAUGE,
}

// The scheduler's metrics carry the service label as the workers' do,
// follow the Prometheus conventions, and show the work waiting: the lag of
// every durable consumer, events applied, messages rejected.
func TestSchedulerMetrics(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	catalogKV, _ := js.KeyValue(ctx, messages.BucketCatalog)
	poolsKV, _ := js.KeyValue(ctx, messages.BucketPools)
	s, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, scheduler.Options{
		Strata: scheduler.StrataOptions{Capacity: 4}, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The wiring of main.
	root := prometheus.NewRegistry()
	reg := labelled(root)
	reg.MustRegister(newPoolCollector(s))
	lag := service.NewConsumerLag(root, "scheduler", log)
	api := newAPIServer(s, log, reg)
	sub, err := nc.Subscribe(messages.SubjectAPIAll, api.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	cons, err := js.Consumer(ctx, messages.StreamEvents, messages.ConsumerScheduler)
	if err != nil {
		t.Fatal(err)
	}
	loop := newEventLoop(s, cons, service.NewRejecter("scheduler", js, log, root, messages.SubjectEventsAll), log, reg)
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan error, 1)
	go func() { loopDone <- loop.run(loopCtx) }()
	defer func() { stopLoop(); <-loopDone }()

	if err := lag.Poll(ctx, js, durableConsumers...); err != nil {
		t.Fatal(err)
	}
	fams := metricstest.Check(t, root, "scheduler", schedulerMetrics)
	if n := metricstest.Series(fams, "strata_consumer_lag_messages"); n != len(durableConsumers) {
		t.Errorf("strata_consumer_lag_messages has %d series; want one per durable consumer (%d)", n, len(durableConsumers))
	}
	if n := metricstest.Series(fams, "strata_scheduler_events_total"); n != 4 {
		t.Errorf("strata_scheduler_events_total has %d series before any event; want one per type at 0", n)
	}

	// A load makes a mergeout: one job waiting for a merger.
	req := &messages.RegisterRequest{Table: "t", Projection: "p"}
	for i := range 4 {
		req.Containers = append(req.Containers, messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprintf("c%04d", i), Rows: 10, Bytes: 100})
	}
	data, _ := messages.Marshal(req)
	if _, err := nc.RequestWithContext(ctx, messages.SubjectAPIRegister, data); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, messages.SubjectEventDone, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	accepted := &messages.JobEvent{JobID: "nobody", Operation: messages.OperationMergeout, Type: messages.EventAccepted, Worker: "w1", Delivery: 1}
	if _, err := natsutil.Publish(ctx, js, accepted.Type.Subject(), "", accepted); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := lag.Poll(ctx, js, durableConsumers...); err != nil {
			t.Fatal(err)
		}
		fams = metricstest.Families(t, root)
		if metricstest.Value(fams, "strata_consumer_lag_messages", "stream", messages.StreamJobs, "consumer", messages.ConsumerMerger) == 1 &&
			metricstest.Value(fams, "strata_rejected_messages_total", "subject", messages.SubjectEventDone, "class", "malformed") == 1 &&
			metricstest.Value(fams, "strata_rejected_messages_total", "class", "rejected") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: merger lag %v, rejected malformed %v, rejected claims %v",
				metricstest.Value(fams, "strata_consumer_lag_messages", "stream", messages.StreamJobs, "consumer", messages.ConsumerMerger),
				metricstest.Value(fams, "strata_rejected_messages_total", "class", "malformed"),
				metricstest.Value(fams, "strata_rejected_messages_total", "class", "rejected"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	fams = metricstest.Check(t, root, "scheduler", schedulerMetrics)
	if v := metricstest.Value(fams, "strata_scheduler_api_requests_total", "subject", messages.SubjectAPIRegister, "outcome", "ok"); v != 1 {
		t.Errorf("strata_scheduler_api_requests_total{subject=register,outcome=ok} = %v; want 1", v)
	}
	if v := metricstest.Value(fams, "strata_pool_running_jobs", "pool", "tm"); v != 1 {
		t.Errorf("strata_pool_running_jobs{pool=tm} = %v; want the mergeout", v)
	}
}
