package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// appender turns update events into WAL appends and acks each event when
// its record is durable.
//
// Every event taken from NATS ends in exactly one of: acked once its record
// is durable (or is a duplicate of one that is), dead-lettered and
// terminated when it fails for good (it does not decode, or the WAL rejects
// it), or left un-acked for redelivery (the WAL was closed before it could
// write it, or the dead letter could not be published). Nothing is acked
// otherwise.
//
// While the WAL cannot write (a full or failing disk), consume stops taking
// events, so they wait in the stream without spending deliveries, and the
// events already taken wait in the WAL, kept from redelivery by
// heartbeat's InProgress calls, until it writes again.
type appender struct {
	wal      *walwriter.WAL
	rejecter *service.Rejecter
	log      *slog.Logger
	appended prometheus.Counter
	failed   prometheus.Counter
	// tables and apply, when set, apply the changes of keyed tables:
	// an event is acked once its change is visible (apply.go). Without
	// them (--apply=false) every valid event is logged and acked once
	// durable, and nothing is applied.
	tables *tableCache
	apply  *changeApplier

	mu      sync.Mutex
	pending map[uint64]pendingMsg // events handed to the WAL, not yet durable
	nextID  uint64
	paused  atomic.Bool // not taking events because the WAL cannot write
}

type pendingMsg struct {
	msg   jetstream.Msg
	since time.Time
}

func (a *appender) track(msg jetstream.Msg) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = make(map[uint64]pendingMsg)
	}
	a.nextID++
	a.pending[a.nextID] = pendingMsg{msg, time.Now()}
	return a.nextID
}

// pendingCount is how many events wait for the WAL.
func (a *appender) pendingCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

func (a *appender) untrack(id uint64) {
	a.mu.Lock()
	delete(a.pending, id)
	a.mu.Unlock()
}

// heartbeat tells NATS every interval that the events waiting longer than
// interval for the WAL are still being worked on, so their AckWait does not
// run out (which would redeliver them and spend a delivery) while the disk
// is full. It returns when stop is closed.
func (a *appender) heartbeat(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		a.mu.Lock()
		var late []jetstream.Msg
		for _, p := range a.pending {
			if time.Since(p.since) >= interval {
				late = append(late, p.msg)
			}
		}
		a.mu.Unlock()
		for _, m := range late {
			_ = m.InProgress()
		}
		if len(late) > 0 {
			a.log.Debug("events waiting for the WAL kept in progress", "events", len(late))
		}
	}
}

// health is the "wal" check of /healthz: the WAL's failure while it cannot
// write, which is also while no events are taken.
func (a *appender) health() error {
	if err := a.wal.Health(); err != nil {
		return fmt.Errorf("not taking update events: %w", err)
	}
	return nil
}

// pullMaxBytes bounds the bytes of one pull request for events. The
// client buffers at most two requests' worth, which must stay under its
// subscription's pending limit (64MB by default: past it, messages are
// dropped as a slow consumer's and wait out their AckWait to come again)
// and at least one message of the largest size (messages.MaxMessageBytes).
// 4096 change batches in flight would otherwise be a gigabyte.
const pullMaxBytes = 16 << 20

// consume takes events from cons while the WAL can write, and stops taking
// them (draining the ones already fetched into the WAL) while it cannot. It
// returns when stop is closed, after draining, or with an error if the
// consumer closes by itself.
func (a *appender) consume(stop <-chan struct{}, cons jetstream.Consumer, inFlight int, poll time.Duration) error {
	var cc jetstream.ConsumeContext
	pause := func() {
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-time.After(drainTimeout):
			a.log.Warn("updates consumer did not drain; unacknowledged events will be redelivered", "waited", drainTimeout)
			cc.Stop()
		}
		cc = nil
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		werr := a.wal.Health()
		switch {
		case werr == nil && cc == nil:
			var err error
			if cc, err = cons.Consume(a.handle, jetstream.PullMaxMessagesWithBytesLimit(inFlight, pullMaxBytes)); err != nil {
				return fmt.Errorf("consume updates: %w", err)
			}
			if a.paused.Swap(false) {
				a.log.Info("WAL writes again; taking update events")
			}
		case werr != nil && cc != nil:
			a.paused.Store(true)
			a.log.Error("WAL cannot write; stopped taking update events until it can", "err", werr)
			pause()
		}
		var closed <-chan struct{}
		if cc != nil {
			closed = cc.Closed()
		}
		select {
		case <-stop:
			// Take no more events; hand the buffered ones to the WAL. A
			// drain needs the server: without one, give up after
			// drainTimeout (the events not acked are redelivered, and
			// deduplicated by the WAL).
			if cc != nil {
				pause()
			}
			return nil
		case <-closed:
			return errors.New("updates consumer closed")
		case <-t.C:
		}
	}
}

// handle is called for each delivered event, one at a time. It only queues
// the append; the WAL's commit goroutine acks the event once it is durable,
// so many events share one fdatasync.
func (a *appender) handle(msg jetstream.Msg) {
	ctx := context.Background()
	if kind, _, err := messages.PeekKind(msg.Data()); err == nil && kind == changeBatchKind {
		a.handleBatch(ctx, msg)
		return
	}
	ev := new(messages.UpdateEvent)
	if err := messages.Unmarshal(msg.Data(), ev); err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	if a.apply != nil {
		a.handleChange(ctx, msg, ev)
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
	id := a.track(msg)
	err = a.wal.AppendAsync(u, func(_ walwriter.LSN, err error) {
		a.untrack(id)
		if err != nil {
			// Only when the WAL was closed before it could write the
			// record: the event is redelivered (to this walwriter after
			// a restart, or to another).
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
	if err != nil {
		a.untrack(id)
	}
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

// handleChange logs a change of a keyed table with its version and hands
// it, once durable, to the applier, which acks the event once the change
// is visible. An event that cannot be applied (its table unknown or
// without a primary key, its columns or key not the table's) is
// dead-lettered with the reason; one whose table could not be looked up
// (the scheduler did not answer) is delivered again.
func (a *appender) handleChange(ctx context.Context, msg jetstream.Msg, ev *messages.UpdateEvent) {
	what := "event " + ev.EventID
	t, version, ok := a.keyedTarget(ctx, msg, ev.Table, what)
	if !ok {
		return
	}
	c, err := t.Change(ev)
	if err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassFailed, fmt.Sprintf("%s: %v", what, err))
		return
	}
	c.Version = version
	if err := a.wal.RegisterTable(walwriter.Table{Name: ev.Table, Columns: slices.Clone(ev.Columns)}); err != nil {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	id := a.track(msg)
	u := walwriter.Update{EventID: ev.EventID, Table: ev.Table, Key: ev.Key, Row: c.Row, Version: c.Version, Delete: c.Delete}
	err = a.wal.AppendAsync(u, func(lsn walwriter.LSN, err error) {
		if err != nil {
			a.untrack(id)
			a.failed.Inc()
			a.log.Error("append change event", "event", ev.EventID, "err", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		// A duplicate (an event delivered again) comes with its first
		// record's LSN, and is applied again: harmless, and its ack then
		// waits for its change to be visible.
		a.apply.add(t, c, lsn, pendingChange{msg: msg, trackID: id})
	})
	if err != nil {
		a.untrack(id)
	}
	if errors.Is(err, walwriter.ErrRejected) {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error())
		return
	}
	if err != nil {
		a.failed.Inc()
		a.log.Error("append change event", "event", ev.EventID, "err", err)
		_ = msg.NakWithDelay(time.Second)
	}
}

// keyedTarget looks up the keyed table a change message (an event or a
// batch, named what in errors) changes, and the version its changes take:
// the message's stream sequence. When it cannot, ok is false and msg is
// settled: dead-lettered for a table without a primary key or a message
// without a stream sequence, delivered again for a table it could not
// look up (the scheduler did not answer).
func (a *appender) keyedTarget(ctx context.Context, msg jetstream.Msg, table, what string) (t *applier.Table, version uint64, ok bool) {
	lookup, cancel := context.WithTimeout(ctx, 30*time.Second)
	t, err := a.tables.get(lookup, table)
	cancel()
	if errors.Is(err, errNotKeyed) {
		_ = a.rejecter.Reject(ctx, msg, service.ClassFailed, fmt.Sprintf("%s: %v", what, err))
		return nil, 0, false
	}
	if err != nil {
		a.log.Warn("table of a change not known yet; delivering it again", "message", what, "table", table, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return nil, 0, false
	}
	meta, err := msg.Metadata()
	if err != nil || meta.Sequence.Stream == 0 {
		_ = a.rejecter.Reject(ctx, msg, service.ClassMalformed, fmt.Sprintf("%s: no stream sequence to version it by: %v", what, err))
		return nil, 0, false
	}
	return t, meta.Sequence.Stream, true
}

// ackApplied acks an event whose change is visible.
func (a *appender) ackApplied(ev pendingChange) {
	a.untrack(ev.trackID)
	a.appended.Add(float64(max(1, ev.changes)))
	if err := ev.msg.Ack(); err != nil {
		// Visible already; a redelivery is applied again, harmlessly.
		a.log.Warn("ack change event", "err", err)
	}
}

// toUpdate converts an event to a WAL update and the table it belongs to.
func toUpdate(ev *messages.UpdateEvent) (walwriter.Update, walwriter.Table, error) {
	table := walwriter.Table{Name: ev.Table, Columns: slices.Clone(ev.Columns)}
	for i, c := range ev.Columns {
		if !c.Valid() {
			return walwriter.Update{}, table, fmt.Errorf("event %s: column %d: unknown column type %q", ev.EventID, i, c)
		}
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

// maxDeliveriesSubject is where JetStream announces an update event that
// reached the walwriter consumer's MaxDeliver.
var maxDeliveriesSubject = fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", messages.StreamUpdates, messages.ConsumerWalwriter)

// watchMaxDeliveries dead-letters the update events JetStream stops
// delivering after MaxDeliver, so that none is dropped without a trace even
// when no delivery could write it or dead-letter it (a walwriter that died
// each time, a dead-letter stream that was unreachable). The event stays in
// UPDATES too. Every walwriter may run it: the dead letter is deduplicated
// by stream sequence. It returns when stop is closed.
func (a *appender) watchMaxDeliveries(stop <-chan struct{}, nc *nats.Conn, js jetstream.JetStream) error {
	sub, err := nc.Subscribe(maxDeliveriesSubject, func(m *nats.Msg) {
		var adv struct {
			StreamSeq  uint64 `json:"stream_seq"`
			Deliveries uint64 `json:"deliveries"`
		}
		if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
			a.log.Warn("unreadable max-deliveries advisory", "subject", m.Subject, "err", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, messages.StreamUpdates)
		if err != nil {
			a.log.Error("max deliveries: stream", "stream_seq", adv.StreamSeq, "err", err)
			return
		}
		raw, err := s.GetMsg(ctx, adv.StreamSeq)
		if err != nil {
			a.log.Error("max deliveries: read update event", "stream_seq", adv.StreamSeq, "err", err)
			return
		}
		reason := fmt.Sprintf("delivered %d times without being acked (it may still be in the WAL if only its ack was lost)", adv.Deliveries)
		a.log.Error("update event ran out of deliveries; dead-lettering it", "stream_seq", adv.StreamSeq, "deliveries", adv.Deliveries)
		dl := natsutil.DeadLetter{Subject: raw.Subject, Data: raw.Data, Reason: reason, Service: a.rejecter.Service, StreamSeq: adv.StreamSeq, Delivery: adv.Deliveries}
		if err := natsutil.PublishDeadLetter(ctx, js, dl); err != nil {
			a.log.Error("dead-letter an update event that ran out of deliveries", "stream_seq", adv.StreamSeq, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", maxDeliveriesSubject, err)
	}
	<-stop
	return sub.Unsubscribe()
}
