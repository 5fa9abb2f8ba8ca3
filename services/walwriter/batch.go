package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// handleBatch logs the changes of a change batch (messages.ChangeBatch):
// the last change of each key, each a WAL record under its own event ID,
// all with the batch's version. The batch is one unit: every change is
// checked (against the table and the WAL's limits) before any is logged,
// a failed check dead-letters the whole batch, and the message is acked
// once all of its changes are visible (once durable, with --apply=false).
func (a *appender) handleBatch(ctx context.Context, msg jetstream.Msg) {
	// Each row is decoded once, below: against the table's types
	// (applier.Table.Change), or the batch's own (toUpdate).
	b := new(messages.ChangeBatch)
	err := messages.UnmarshalUnvalidated(msg.Data(), b)
	if err == nil {
		err = b.CheckShape()
	}
	if err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, fmt.Sprintf("change batch: %v", err))
		return
	}
	keep := b.LastPerKey()
	var (
		t       *applier.Table
		changes []applier.Change
		updates = make([]walwriter.Update, len(keep))
	)
	if a.apply != nil {
		var version uint64
		var ok bool
		if t, version, ok = a.keyedTarget(ctx, msg, b.Table, "batch "+b.BatchID); !ok {
			return
		}
		changes = make([]applier.Change, len(keep))
		for j, i := range keep {
			ev := b.Event(i)
			c, err := t.Change(ev)
			if err != nil {
				_ = a.rejecter.Reject(ctx, msg, service.ClassFailed, fmt.Sprintf("batch %s: change %d: %v", b.BatchID, i, err))
				return
			}
			c.Version = version
			changes[j] = c
			updates[j] = walwriter.Update{EventID: ev.EventID, Table: b.Table, Key: c.Key, Row: c.Row, Version: c.Version, Delete: c.Delete}
		}
	} else {
		for j, i := range keep {
			u, _, err := toUpdate(b.Event(i))
			if err != nil {
				_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, fmt.Sprintf("batch %s: change %d: %v", b.BatchID, i, err))
				return
			}
			updates[j] = u
		}
	}
	if err := a.wal.RegisterTable(walwriter.Table{Name: b.Table, Columns: slices.Clone(b.Columns)}); err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	for j := range updates {
		if err := a.wal.Check(updates[j]); err != nil {
			_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, fmt.Sprintf("batch %s: change %d: %v", b.BatchID, keep[j], err))
			return
		}
	}

	// Queue every change; the last callback (the WAL's commit goroutine
	// calls them one at a time, in order) settles the message.
	id := a.track(msg)
	lsns := make([]walwriter.LSN, len(updates))
	var left atomic.Int64
	var failed atomic.Pointer[error]
	left.Store(int64(len(updates)))
	settle := func() {
		if errp := failed.Load(); errp != nil {
			a.untrack(id)
			a.failed.Inc()
			a.log.Error("append change batch", "batch", b.BatchID, "err", *errp)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		if a.apply == nil {
			a.untrack(id)
			a.appended.Add(float64(len(updates)))
			if err := msg.Ack(); err != nil {
				a.log.Warn("ack change batch", "batch", b.BatchID, "err", err)
			}
			return
		}
		// A duplicate (a batch delivered again) comes with its first
		// records' LSNs and is applied again: harmless.
		a.apply.addAll(t, changes, lsns, pendingChange{msg: msg, trackID: id, changes: len(changes)})
	}
	for j := range updates {
		err := a.wal.AppendAsync(updates[j], func(lsn walwriter.LSN, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			lsns[j] = lsn
			if left.Add(-1) == 0 {
				settle()
			}
		})
		if err != nil {
			// Only a closed WAL, after the checks above: the batch is
			// delivered again, and the changes queued are deduplicated.
			failed.CompareAndSwap(nil, &err)
			if left.Add(-int64(len(updates)-j)) == 0 {
				settle()
			}
			return
		}
	}
}

var changeBatchKind = (*messages.ChangeBatch)(nil).Kind()
