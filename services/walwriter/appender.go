package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// appender turns update events into WAL appends and acks each event when
// its record is durable.
type appender struct {
	wal      *walwriter.WAL
	rejecter *service.Rejecter
	log      *slog.Logger
	appended prometheus.Counter
	failed   prometheus.Counter
}

// handle is called for each delivered event, one at a time. It only queues
// the append; the WAL's commit goroutine acks the event once it is durable,
// so many events share one fdatasync.
func (a *appender) handle(msg jetstream.Msg) {
	ctx := context.Background()
	ev := new(messages.UpdateEvent)
	if err := messages.Unmarshal(msg.Data(), ev); err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	u, table, err := toUpdate(ev)
	if err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	if err := a.wal.RegisterTable(table); err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	err = a.wal.AppendAsync(u, func(_ walwriter.LSN, err error) {
		if err != nil {
			a.failed.Inc()
			a.log.Error("append update event", "event", ev.EventID, "err", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		a.appended.Inc()
		if err := msg.Ack(); err != nil {
			// Durable already; a redelivery is dropped as a duplicate.
			a.log.Warn("ack update event", "event", ev.EventID, "err", err)
		}
	})
	if errors.Is(err, walwriter.ErrRejected) {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	if err != nil {
		a.failed.Inc()
		a.log.Error("append update event", "event", ev.EventID, "err", err)
		_ = msg.NakWithDelay(time.Second)
	}
}

// toUpdate converts an event to a WAL update and the table it belongs to.
func toUpdate(ev *messages.UpdateEvent) (walwriter.Update, walwriter.Table, error) {
	table := walwriter.Table{Name: ev.Table, Columns: make([]walwriter.ColumnType, len(ev.Columns))}
	for i, c := range ev.Columns {
		t, err := walwriter.ParseColumnType(string(c))
		if err != nil {
			return walwriter.Update{}, table, fmt.Errorf("event %s: column %d: %w", ev.EventID, i, err)
		}
		table.Columns[i] = t
	}
	row, err := messages.SplitRow(ev.Columns, ev.NewRow)
	if err != nil {
		return walwriter.Update{}, table, fmt.Errorf("event %s: new_row: %w", ev.EventID, err)
	}
	u := walwriter.Update{EventID: ev.EventID, Table: ev.Table, Key: ev.Key, Row: row}
	if len(ev.OldRow) > 0 {
		old, err := messages.SplitRow(ev.Columns, ev.OldRow)
		if err != nil {
			return walwriter.Update{}, table, fmt.Errorf("event %s: old_row: %w", ev.EventID, err)
		}
		u.Old = old
	}
	return u, table, nil
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
		bytes:     d("strata_wal_bytes_total", "Record bytes written."),
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
