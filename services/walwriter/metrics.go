package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
)

// metrics are the walwriter's own metrics; the WAL's counters are read at
// each scrape by walCollector.
type metrics struct {
	appended, failed                prometheus.Counter
	fsync, batchRecords, batchBytes prometheus.Histogram
	// Applying changes: keys changed in live containers, batches applied,
	// the time to write and apply a batch, and from a change's durability
	// to its visibility.
	applied, applyBatches    prometheus.Counter
	applySeconds, visibleLag prometheus.Histogram
	// droppedFrozen counts the late changes dropped for a table's frozen
	// floor (apply.go, dropFrozen).
	droppedFrozen prometheus.Counter
}

func newMetrics() *metrics {
	cl := prometheus.Labels{"service": "walwriter"}
	return &metrics{
		appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_wal_events_total", Help: "Update events durable in the WAL and acked.", ConstLabels: cl,
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_wal_append_errors_total", Help: "Update events the WAL could not make durable (left for redelivery).", ConstLabels: cl,
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "strata_wal_fsync_duration_seconds", Help: "Time of each fdatasync of a WAL segment (one per group commit).", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50us .. 1.6s
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "strata_wal_batch_records", Help: "Updates made durable by each group commit (one write and fdatasync).", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 .. 8192
		}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_changes_applied_total", Help: "Keys changed (inserted, updated or deleted) by batches made visible.", ConstLabels: cl,
		}),
		droppedFrozen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_changes_dropped_frozen_total", Help: "Late changes (dead-lettered or applied already) dropped because a full mergeout froze their table past their version.", ConstLabels: cl,
		}),
		applyBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_change_batches_total", Help: "Batches of changes made visible (one container and one catalog write each).", ConstLabels: cl,
		}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "strata_change_apply_duration_seconds", Help: "Time to write a batch of changes as a container and make it visible.", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14), // 1ms .. 8s
		}),
		visibleLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "strata_change_apply_lag_seconds", Help: "Time from a batch's oldest change being durable to the batch being visible.", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(1e-2, 2, 14), // 10ms .. 80s
		}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "strata_wal_batch_bytes", Help: "Bytes written by each group commit.", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(256, 4, 9), // 256B .. 16MiB
		}),
	}
}

// onSync is the WAL's Options.OnSync.
func (m *metrics) onSync(s walwriter.SyncStats) {
	m.fsync.Observe(s.Sync.Seconds())
	m.batchBytes.Observe(float64(s.Bytes))
	if s.Records > 0 {
		m.batchRecords.Observe(float64(s.Records))
	}
}

// register registers m, the counters of wal and the updates a holds in
// reg.
func (m *metrics) register(reg prometheus.Registerer, wal *walwriter.WAL, a *appender) {
	reg.MustRegister(m.appended, m.failed, m.fsync, m.batchRecords, m.batchBytes, newWALCollector(wal),
		m.applied, m.applyBatches, m.applySeconds, m.visibleLag, m.droppedFrozen,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strata_wal_pending_updates", Help: "Update events taken from NATS and not yet durable in the WAL (nor acked).",
			ConstLabels: prometheus.Labels{"service": "walwriter"},
		}, func() float64 { return float64(a.pendingCount()) }))
}

// walCollector exports the WAL's counters.
type walCollector struct {
	wal                                             *walwriter.WAL
	records, deltas, bytes, fullBytes, fsyncs, dups *prometheus.Desc
}

func newWALCollector(w *walwriter.WAL) *walCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, prometheus.Labels{"service": "walwriter"})
	}
	return &walCollector{
		wal:       w,
		records:   d("strata_wal_records_total", "Data records written."),
		deltas:    d("strata_wal_delta_records_total", "Data records written as deltas."),
		bytes:     d("strata_wal_bytes_total", "Bytes of records written to WAL segments (data records and the definitions they need)."),
		fullBytes: d("strata_wal_full_image_bytes_total", "Record bytes had every record been a full image."),
		fsyncs:    d("strata_wal_fsyncs_total", "fdatasync calls (one per group commit)."),
		dups:      d("strata_wal_duplicates_total", "Updates dropped because their event ID was already written."),
	}
}

func (c *walCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.records, c.deltas, c.bytes, c.fullBytes, c.fsyncs, c.dups} {
		ch <- d
	}
}

func (c *walCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.wal.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.records, s.Records}, {c.deltas, s.Deltas}, {c.bytes, s.Bytes}, {c.fullBytes, s.FullImageBytes}, {c.fsyncs, s.Fsyncs}, {c.dups, s.Duplicates}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}

// registerArchiveMetrics exports the counters of the WAL's archiver on reg.
func registerArchiveMetrics(reg prometheus.Registerer, a *walarchive.Archiver) {
	cl := prometheus.Labels{"service": "walwriter"}
	counter := func(name, help string, v func(walarchive.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl}, func() float64 { return v(a.Stats()) })
	}
	gauge := func(name, help string, v func(walarchive.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl}, func() float64 { return v(a.Stats()) })
	}
	reg.MustRegister(
		counter("strata_wal_archived_segments_total", "Sealed WAL segments uploaded to the store.", func(s walarchive.Stats) float64 { return float64(s.Segments) }),
		counter("strata_wal_archived_bytes_total", "Bytes of WAL segments uploaded to the store.", func(s walarchive.Stats) float64 { return float64(s.Bytes) }),
		counter("strata_wal_archived_checkpoints_total", "WAL checkpoint files uploaded to the store.", func(s walarchive.Stats) float64 { return float64(s.Checkpoints) }),
		counter("strata_wal_archive_failures_total", "Failed listings, uploads and deletions of the WAL archive (each retried).", func(s walarchive.Stats) float64 { return float64(s.Failures) }),
		gauge("strata_wal_archive_lag_segments", "Sealed WAL segments not yet in the store.", func(s walarchive.Stats) float64 { return float64(s.LagSegments) }),
		gauge("strata_wal_archive_lag_bytes", "Bytes of sealed WAL segments not yet in the store.", func(s walarchive.Stats) float64 { return float64(s.LagBytes) }),
		gauge("strata_wal_archive_stored_segments", "WAL segments the archive in the store holds.", func(s walarchive.Stats) float64 { return float64(s.StoredSegments) }),
		gauge("strata_wal_archive_stored_bytes", "Bytes of the WAL segments the archive in the store holds.", func(s walarchive.Stats) float64 { return float64(s.StoredBytes) }),
		gauge("strata_wal_archive_stored_checkpoints", "Checkpoints the archive in the store holds: the restore points.", func(s walarchive.Stats) float64 { return float64(s.StoredCheckpoints) }),
		counter("strata_wal_archive_deleted_segments_total", "WAL segments retention deleted from the store.", func(s walarchive.Stats) float64 { return float64(s.DeletedSegments) }),
		counter("strata_wal_archive_deleted_checkpoints_total", "Checkpoints retention deleted from the store.", func(s walarchive.Stats) float64 { return float64(s.DeletedCheckpoints) }),
	)
}
