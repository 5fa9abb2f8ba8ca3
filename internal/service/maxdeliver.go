package service

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// maxDeliveriesSubject is where JetStream announces a message that reached
// its consumer's MaxDeliver: $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>.
const maxDeliveriesSubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"

// maxDeliveriesAdvisory is the part of JetStream's advisory we read.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchMaxDeliveries fails for good the jobs JetStream gives up on: a job
// whose every delivery ended with its worker dead or its lease lost is not
// redelivered after MaxDeliver, and no worker is left to say so. This
// publishes its failed event and dead-letters it, so the scheduler and the
// operator learn of it; the job stays in the stream. Every worker of the
// kind may run it: the event and dead letter are deduplicated by stream
// sequence. It returns when ctx ends.
func (w *JobWorker[J]) WatchMaxDeliveries(ctx context.Context, nc *nats.Conn, stream, consumer string) error {
	subject := fmt.Sprintf("%s.%s.%s", maxDeliveriesSubject, stream, consumer)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
			w.Log.Warn("unreadable max-deliveries advisory", "subject", m.Subject, "err", err)
			return
		}
		w.failUndelivered(ctx, adv)
	})
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	<-ctx.Done()
	return sub.Unsubscribe()
}

func (w *JobWorker[J]) failUndelivered(ctx context.Context, adv maxDeliveriesAdvisory) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, err := w.JS.Stream(ctx, adv.Stream)
	if err != nil {
		w.Log.Warn("max deliveries: stream", "stream", adv.Stream, "err", err)
		return
	}
	raw, err := s.GetMsg(ctx, adv.StreamSeq)
	if err != nil {
		w.Log.Warn("max deliveries: read job", "stream", adv.Stream, "seq", adv.StreamSeq, "err", err)
		return
	}
	reason := fmt.Sprintf("delivered %d times without finishing: every worker died or lost its lease", adv.Deliveries)
	job := w.New()
	if err := messages.Unmarshal(raw.Data, job); err == nil {
		w.Metrics.jobs.WithLabelValues("undelivered").Inc()
		w.Log.Error("job failed: maximum deliveries reached", "job", job.ID(), "stream_seq", adv.StreamSeq, "deliveries", adv.Deliveries)
		ev := &messages.JobEvent{JobID: job.ID(), Operation: w.Operation, Type: messages.EventFailed, Worker: w.Worker,
			Time: time.Now().UnixNano(), Delivery: adv.Deliveries, Reason: reason}
		msgID := fmt.Sprintf("%s.failed.%d.max", job.ID(), adv.StreamSeq)
		if _, err := natsutil.Publish(ctx, w.JS, messages.SubjectEventFailed, msgID, ev); err != nil {
			w.Log.Warn("publish failed event", "job", job.ID(), "err", err)
		}
	}
	dl := natsutil.DeadLetter{Subject: raw.Subject, Data: raw.Data, Reason: reason, Service: w.Rejecter.Service, StreamSeq: adv.StreamSeq, Delivery: adv.Deliveries}
	if err := natsutil.PublishDeadLetter(ctx, w.JS, dl); err != nil {
		w.Log.Warn("dead-letter undelivered job", "stream_seq", adv.StreamSeq, "err", err)
	}
}
