package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// eventLoop follows the EVENTS stream with the scheduler's durable consumer
// and feeds every job event to the scheduler. An event is acked only after
// the scheduler applied it (catalog written), so after a crash the events
// it never acked are delivered again; applying one twice changes nothing.
type eventLoop struct {
	s        *scheduler.Scheduler
	cons     jetstream.Consumer
	rejecter *service.Rejecter
	log      *slog.Logger
	events   *prometheus.CounterVec
}

func newEventLoop(s *scheduler.Scheduler, cons jetstream.Consumer, rej *service.Rejecter, log *slog.Logger, reg prometheus.Registerer) *eventLoop {
	l := &eventLoop{s: s, cons: cons, rejecter: rej, log: log,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_scheduler_events_total",
			Help: "Job events applied, by type.",
		}, []string{"type"}),
	}
	reg.MustRegister(l.events)
	for _, t := range []messages.EventType{messages.EventAccepted, messages.EventProgress, messages.EventDone, messages.EventFailed} {
		l.events.WithLabelValues(string(t))
	}
	return l
}

func (l *eventLoop) run(ctx context.Context) error {
	cc, err := l.cons.Consume(func(msg jetstream.Msg) { l.handle(ctx, msg) })
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Drain()
	<-cc.Closed()
	return nil
}

func (l *eventLoop) handle(ctx context.Context, msg jetstream.Msg) {
	ev := new(messages.JobEvent)
	if err := messages.Unmarshal(msg.Data(), ev); err != nil {
		if rerr := l.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error()); rerr != nil {
			l.log.Error("dead-letter malformed event", "subject", msg.Subject(), "err", rerr)
		}
		return
	}
	if err := l.s.HandleEvent(ctx, ev); err != nil {
		if errors.Is(err, scheduler.ErrInvalid) {
			if rerr := l.rejecter.Reject(ctx, msg, service.ClassMalformed, err.Error()); rerr != nil {
				l.log.Error("dead-letter event", "subject", msg.Subject(), "err", rerr)
			}
			return
		}
		if errors.Is(err, scheduler.ErrRejected) {
			// A claim the scheduler does not take: kept with its reason.
			if rerr := l.rejecter.Reject(ctx, msg, service.ClassRejected, err.Error()); rerr != nil {
				l.log.Error("dead-letter rejected claim", "subject", msg.Subject(), "err", rerr)
			}
			return
		}
		// The catalog could not be written: try again shortly.
		l.log.Error("apply job event; will retry", "job", ev.JobID, "type", ev.Type, "err", err)
		if nerr := msg.NakWithDelay(2 * time.Second); nerr != nil {
			l.log.Warn("nak event", "job", ev.JobID, "err", nerr)
		}
		return
	}
	l.events.WithLabelValues(string(ev.Type)).Inc()
	if err := msg.Ack(); err != nil {
		l.log.Warn("ack event", "job", ev.JobID, "err", err)
	}
}
