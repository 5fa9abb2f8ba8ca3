package main

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

var walwriterMetrics = map[string]dto.MetricType{
	"strata_wal_events_total":           dto.MetricType_COUNTER,
	"strata_wal_append_errors_total":    dto.MetricType_COUNTER,
	"strata_wal_records_total":          dto.MetricType_COUNTER,
	"strata_wal_delta_records_total":    dto.MetricType_COUNTER,
	"strata_wal_bytes_total":            dto.MetricType_COUNTER,
	"strata_wal_full_image_bytes_total": dto.MetricType_COUNTER,
	"strata_wal_fsyncs_total":           dto.MetricType_COUNTER,
	"strata_wal_duplicates_total":       dto.MetricType_COUNTER,
	"strata_wal_fsync_duration_seconds": dto.MetricType_HISTOGRAM,
	"strata_wal_batch_records":          dto.MetricType_HISTOGRAM,
	"strata_wal_batch_bytes":            dto.MetricType_HISTOGRAM,
	"strata_wal_pending_updates":        dto.MetricType_GAUGE,
	"strata_rejected_messages_total":    dto.MetricType_COUNTER,
}

// The walwriter's metrics follow the Prometheus conventions and move with
// the updates it writes: bytes, fsyncs and their latency, group-commit
// sizes; a rejected event is counted under its subject's kind, not its
// table.
func TestWalwriterMetrics(t *testing.T) {
	h := startHarness(t, walwriter.Options{})
	defer h.close()
	fams := metricstest.Check(t, h.reg, "walwriter", walwriterMetrics)
	if metricstest.Series(fams, "strata_rejected_messages_total") != 3 {
		t.Errorf("strata_rejected_messages_total has %d series before any rejection; want one per class at 0",
			metricstest.Series(fams, "strata_rejected_messages_total"))
	}
	const n = 500
	publishUpdates(t, h.js, 0, n)
	if _, err := h.js.Publish(context.Background(), messages.SubjectUpdates("some_table"), []byte("not an update event")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams = metricstest.Families(t, h.reg)
		if metricstest.Value(fams, "strata_wal_events_total") == n && metricstest.Value(fams, "strata_rejected_messages_total") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %v events durable, %v rejected", metricstest.Value(fams, "strata_wal_events_total"), metricstest.Value(fams, "strata_rejected_messages_total"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	fams = metricstest.Check(t, h.reg, "walwriter", walwriterMetrics)
	fsyncs := metricstest.Value(fams, "strata_wal_fsyncs_total")
	if fsyncs < 1 || metricstest.Value(fams, "strata_wal_fsync_duration_seconds") < fsyncs {
		t.Errorf("%v fsyncs, %v fsync latencies observed", fsyncs, metricstest.Value(fams, "strata_wal_fsync_duration_seconds"))
	}
	if v := metricstest.Value(fams, "strata_wal_bytes_total"); v < n*100 {
		t.Errorf("strata_wal_bytes_total = %v after %d updates of 100+ bytes", v, n)
	}
	var batched float64
	for _, m := range fams["strata_wal_batch_records"].GetMetric() {
		batched = m.GetHistogram().GetSampleSum()
	}
	if batched != n {
		t.Errorf("group commits made %v updates durable; want %d", batched, n)
	}
	if v := metricstest.Value(fams, "strata_wal_pending_updates"); v != 0 {
		t.Errorf("strata_wal_pending_updates = %v once every event is durable", v)
	}
	if v := metricstest.Value(fams, "strata_rejected_messages_total", "subject", "strata.updates.*", "class", "malformed"); v != 1 {
		t.Errorf("strata_rejected_messages_total{subject=strata.updates.*,class=malformed} = %v; want 1", v)
	}
	if s := metricstest.Series(fams, "strata_rejected_messages_total"); s != 3 {
		t.Errorf("strata_rejected_messages_total has %d series; want 3 (the table is not a label value)", s)
	}
}
