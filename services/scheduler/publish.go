package main

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// jsPublisher publishes the scheduler's jobs and events on JetStream with
// Nats-Msg-Id set to the job ID, so a job published again (after a
// restart) is stored once within the duplicate window.
type jsPublisher struct {
	js jetstream.JetStream
}

func (p jsPublisher) PublishJob(ctx context.Context, subject, jobID string, job messages.Message) error {
	_, err := natsutil.Publish(ctx, p.js, subject, jobID, job)
	return err
}

// PublishCancel sends a cancel notice to the workers, plain NATS: the
// scheduler sends it again every tick until the job ends.
func (p jsPublisher) PublishCancel(_ context.Context, n *messages.CancelNotice) error {
	data, err := messages.Marshal(n)
	if err != nil {
		return err
	}
	return p.js.Conn().Publish(messages.SubjectCancel, data)
}

func (p jsPublisher) PublishEvent(ctx context.Context, ev *messages.JobEvent) error {
	_, err := natsutil.Publish(ctx, p.js, ev.Type.Subject(), ev.JobID+"."+string(ev.Type), ev)
	return err
}
