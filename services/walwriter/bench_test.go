package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// BenchmarkUpdatesToWAL measures the walwriter's path end to end: update
// events published to JetStream, consumed, appended with group commit, and
// acked once durable. It reports durable events per second, WAL bytes per
// event and events per fdatasync.
func BenchmarkUpdatesToWAL(b *testing.B) {
	_, _, js := natstest.Start(b, natsutil.Topology{}, jetstream.WithPublishAsyncMaxPending(4096))
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wal, err := walwriter.Open(b.TempDir(), walwriter.Options{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a := &appender{wal: wal, rejecter: service.NewRejecter("walwriter", js, log, reg), log: log,
		appended: prometheus.NewCounter(prometheus.CounterOpts{Name: "appended"}), failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "failed"})}
	cons, err := js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := cons.Consume(a.handle, jetstream.PullMaxMessages(4096))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	cols := []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowText}
	filler := fmt.Sprintf("%84s", "")
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		row, _ := messages.EncodeRow(cols, []any{int64(i % 1000), int64(1), int64(i * 7), filler})
		ev := &messages.UpdateEvent{EventID: fmt.Sprintf("ev-%d", i), Table: "pgbench_accounts", Columns: cols, Key: fmt.Appendf(nil, "%d", i%1000), NewRow: row}
		data, _ := messages.Marshal(ev)
		if _, err := js.PublishAsync(messages.SubjectUpdates(ev.Table), data); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for counterValue(a.appended) < float64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%v of %d events durable after 5 minutes", counterValue(a.appended), b.N)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	st := wal.Stats()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
	b.ReportMetric(float64(st.Bytes)/float64(b.N), "walbytes/event")
	if st.Fsyncs > 0 {
		b.ReportMetric(float64(b.N)/float64(st.Fsyncs), "events/fsync")
	}
	cc.Stop()
	wal.Close()
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.Counter.GetValue()
}
