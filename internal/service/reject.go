package service

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// Rejecter disposes of messages a service cannot process: it logs them,
// counts them in strata_rejected_messages_total{service,subject,class},
// republishes them on the dead-letter subject with the reason, and
// terminates them in their consumer so they are not redelivered forever.
//
// The subject label is the subject's kind (SubjectKind), not the subject:
// an update event's subject names its table, and a label must not take as
// many values as there are tables.
type Rejecter struct {
	Service string
	JS      jetstream.JetStream
	Log     *slog.Logger
	count   *prometheus.CounterVec
}

// NewRejecter registers the rejection counter in reg, at zero for every
// class of each of the subjects given (those the service consumes), so
// that a rate or an alert over it has a series before the first rejection.
func NewRejecter(service string, js jetstream.JetStream, log *slog.Logger, reg prometheus.Registerer, subjects ...string) *Rejecter {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "strata_rejected_messages_total",
		Help:        "Messages rejected to the dead-letter stream, by subject kind and reason class (malformed, failed, rejected).",
		ConstLabels: prometheus.Labels{"service": service},
	}, []string{"subject", "class"})
	reg.MustRegister(c)
	for _, s := range subjects {
		for _, class := range []string{ClassMalformed, ClassFailed, ClassRejected} {
			c.WithLabelValues(SubjectKind(s), class)
		}
	}
	return &Rejecter{Service: service, JS: js, Log: log, count: c}
}

// SubjectKind is the value of a metric's subject label for a message on
// subject: the subject itself for the fixed ones (strata.jobs.mergeout,
// strata.events.done, ...), the pattern for the subjects that carry a
// name (strata.updates.* for every table), and "other" for the rest, so
// that a publisher cannot make label values without bound.
func SubjectKind(subject string) string {
	switch subject {
	case messages.SubjectJobMergeout, messages.SubjectJobWindow,
		messages.SubjectEventAccepted, messages.SubjectEventProgress, messages.SubjectEventDone, messages.SubjectEventFailed:
		return subject
	}
	switch {
	case strings.HasPrefix(subject, messages.SubjectUpdatesPrefix) || subject == messages.SubjectUpdatesAll:
		return messages.SubjectUpdatesPrefix + "*"
	case strings.HasPrefix(subject, "strata.events.") || subject == messages.SubjectEventsAll:
		return "strata.events.*"
	case strings.HasPrefix(subject, "strata.jobs.") || subject == messages.SubjectJobsAll:
		return "strata.jobs.*"
	}
	return "other"
}

// Reason classes of a rejection.
const (
	ClassMalformed = "malformed" // could not be decoded or validated
	ClassFailed    = "failed"    // decoded, but failed for good
	ClassRejected  = "rejected"  // a claim refused: from the wrong worker, for a job not in flight, an output that does not verify
)

// Reject dead-letters msg with reason and terminates it. It returns the
// error of publishing the dead letter; the message is then Nak'ed instead, so
// that it is not lost while the dead-letter stream is unreachable.
func (r *Rejecter) Reject(ctx context.Context, msg jetstream.Msg, class, reason string) error {
	dl := natsutil.DeadLetterFromMsg(msg, r.Service, reason)
	dl.Class = class
	r.count.WithLabelValues(SubjectKind(dl.Subject), class).Inc()
	r.Log.Warn("message rejected to dead letter", "subject", dl.Subject, "stream_seq", dl.StreamSeq,
		"delivery", dl.Delivery, "class", class, "reason", reason, "bytes", len(dl.Data))
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := natsutil.PublishDeadLetter(pctx, r.JS, dl); err != nil {
		r.Log.Error("dead-letter publish failed; message left for redelivery", "subject", dl.Subject, "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return err
	}
	return msg.TermWithReason(reason)
}
