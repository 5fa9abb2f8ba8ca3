package natsutil

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"
)

// Publish encodes m and publishes it to subject on JetStream, waiting for
// the stream's acknowledgement. A non-empty msgID is sent as Nats-Msg-Id, so
// publishing the same message twice within the stream's duplicate window
// stores it once.
func Publish(ctx context.Context, js jetstream.JetStream, subject, msgID string, m messages.Message) (*jetstream.PubAck, error) {
	data, err := messages.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("natsutil: publish %s to %s: %w", m.Kind(), subject, err)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	if msgID != "" {
		msg.Header.Set(messages.HeaderMsgID, msgID)
	}
	ack, err := publishOnce(ctx, js, msg, msgID != "")
	if err != nil {
		return nil, fmt.Errorf("natsutil: publish %s to %s: %w", m.Kind(), subject, err)
	}
	return ack, nil
}

// publishOnce publishes msg, with PublishRetry when it carries a message ID
// (a retry is then stored once), else in a single attempt.
func publishOnce(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, deduplicated bool) (*jetstream.PubAck, error) {
	if deduplicated {
		return PublishRetry(ctx, js, msg)
	}
	return js.PublishMsg(ctx, msg)
}

// publishAttempt bounds one attempt of PublishRetry, so that an attempt
// lost in a leader election leaves time for the next.
const publishAttempt = 5 * time.Second

// PublishRetry publishes msg, which must carry a Nats-Msg-Id (so a retry
// of a publish that was stored but not acknowledged is stored once), and
// retries with backoff on the errors a node loss, a leader election or a
// reconnect give (time-outs, no responders, disconnected) until it is
// acknowledged or ctx ends. Other errors (a closed connection, a refused
// subject) return at once.
func PublishRetry(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	if msg.Header.Get(messages.HeaderMsgID) == "" {
		return nil, fmt.Errorf("natsutil: publish to %s: a retried publish needs a %s", msg.Subject, messages.HeaderMsgID)
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, publishAttempt)
		ack, err := js.PublishMsg(actx, msg)
		cancel()
		if err == nil {
			return ack, nil
		}
		if !Unanswered(ctx, err) {
			if attempt > 1 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt)
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (after %d attempts; last: %v)", ctx.Err(), attempt, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// DeadLetter describes a message a service rejected.
type DeadLetter struct {
	Subject   string // the subject it arrived on
	Data      []byte // its payload, unchanged
	Reason    string // why it was rejected
	Class     string // the reason's class (malformed, failed, rejected); may be empty
	Service   string // the service that rejected it
	StreamSeq uint64 // its sequence in the original stream; 0 if not from a stream
	Delivery  uint64 // the delivery attempt that was rejected; 0 if unknown
}

// PublishDeadLetter republishes a rejected message on
// strata.deadletter.<subject> with the reason in its headers. Messages from
// a stream are deduplicated by stream sequence, so rejecting a redelivered
// message twice stores one dead letter.
func PublishDeadLetter(ctx context.Context, js jetstream.JetStream, dl DeadLetter) error {
	msg := &nats.Msg{
		Subject: messages.SubjectDeadLetter(dl.Subject),
		Data:    dl.Data,
		Header:  nats.Header{},
	}
	msg.Header.Set(messages.HeaderReason, dl.Reason)
	if dl.Class != "" {
		msg.Header.Set(messages.HeaderClass, dl.Class)
	}
	msg.Header.Set(messages.HeaderSubject, dl.Subject)
	msg.Header.Set(messages.HeaderService, dl.Service)
	if dl.StreamSeq > 0 {
		seq := strconv.FormatUint(dl.StreamSeq, 10)
		msg.Header.Set(messages.HeaderStreamSeq, seq)
		msg.Header.Set(messages.HeaderMsgID, "deadletter-"+dl.Subject+"-"+seq)
	}
	if dl.Delivery > 0 {
		msg.Header.Set(messages.HeaderDelivery, strconv.FormatUint(dl.Delivery, 10))
	}
	if _, err := publishOnce(ctx, js, msg, dl.StreamSeq > 0); err != nil {
		return fmt.Errorf("natsutil: dead-letter message from %s: %w", dl.Subject, err)
	}
	return nil
}

// DeadLetterFromMsg fills a DeadLetter from a message delivered by a
// JetStream consumer.
func DeadLetterFromMsg(msg jetstream.Msg, service, reason string) DeadLetter {
	dl := DeadLetter{Subject: msg.Subject(), Data: msg.Data(), Reason: reason, Service: service}
	if md, err := msg.Metadata(); err == nil {
		dl.StreamSeq = md.Sequence.Stream
		dl.Delivery = md.NumDelivered
	}
	return dl
}
