package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// DurableConsumer names a durable consumer of a stream.
type DurableConsumer struct{ Stream, Consumer string }

// ConsumerLag exports how far durable consumers are behind their streams,
// polled from each consumer's info:
//
//	strata_consumer_pending_messages{stream,consumer}      not yet delivered (NumPending)
//	strata_consumer_ack_pending_messages{stream,consumer}  delivered, not yet acknowledged (NumAckPending)
//	strata_consumer_lag_messages{stream,consumer}          the sum: messages the consumer has not finished
//
// A consumer's lag is the work waiting for its workers: jobs for the
// mergers and windowers, update events for the walwriter, job events for
// the scheduler.
type ConsumerLag struct {
	lag, pending, ackPending *prometheus.GaugeVec
	log                      *slog.Logger
}

// NewConsumerLag registers the gauges in reg, labelled with service.
func NewConsumerLag(reg prometheus.Registerer, service string, log *slog.Logger) *ConsumerLag {
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"service": service}},
			[]string{"stream", "consumer"})
	}
	l := &ConsumerLag{
		lag:        g("strata_consumer_lag_messages", "Messages a durable consumer has not finished: pending delivery plus delivered and not acknowledged."),
		pending:    g("strata_consumer_pending_messages", "Messages of the stream not yet delivered to the durable consumer."),
		ackPending: g("strata_consumer_ack_pending_messages", "Messages delivered by the durable consumer and not yet acknowledged."),
		log:        log,
	}
	reg.MustRegister(l.lag, l.pending, l.ackPending)
	return l
}

// Poll reads each consumer's info once and sets its gauges. A consumer
// whose info cannot be read keeps its last values; the error is logged at
// debug level and returned (the last one).
func (l *ConsumerLag) Poll(ctx context.Context, js jetstream.JetStream, consumers ...DurableConsumer) error {
	var last error
	for _, c := range consumers {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := js.Consumer(cctx, c.Stream, c.Consumer)
		cancel()
		if err != nil {
			l.log.Debug("consumer info for its lag", "stream", c.Stream, "consumer", c.Consumer, "err", err)
			last = err
			continue
		}
		info := cons.CachedInfo()
		pending, ackPending := float64(info.NumPending), float64(info.NumAckPending)
		l.pending.WithLabelValues(c.Stream, c.Consumer).Set(pending)
		l.ackPending.WithLabelValues(c.Stream, c.Consumer).Set(ackPending)
		l.lag.WithLabelValues(c.Stream, c.Consumer).Set(pending + ackPending)
	}
	return last
}

// Watch polls the consumers every interval, and once at once, until ctx
// ends; it returns nil then.
func (l *ConsumerLag) Watch(ctx context.Context, js jetstream.JetStream, every time.Duration, consumers ...DurableConsumer) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_ = l.Poll(ctx, js, consumers...)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
