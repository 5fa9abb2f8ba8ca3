package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// changePublisher publishes change events with Nats-Msg-Id = event ID,
// up to window messages awaiting JetStream's acknowledgement at once, and
// keeps the stream sequence each was stored at. With a batch size over 1
// it sends consecutive events of one table as change batches
// (messages.ChangeBatch) of up to that many changes: one message, one
// stream entry and one ack for the lot.
type changePublisher struct {
	js         jetstream.JetStream
	window     int
	maxPayload int64
	pending    []pendingPublish // oldest first, from head
	head       int

	batcher      *messages.Batcher // nil: one update event a message
	batchTags    []int             // the tags of the batch being filled
	batchSubject string

	published  int    // changes acknowledged
	duplicates int    // messages JetStream had already stored (the same ID sent before)
	first      uint64 // lowest stream sequence acknowledged
	last       uint64 // highest
	sent       []sentChange
}

type pendingPublish struct {
	fut  jetstream.PubAckFuture
	tags []int
}

// sentChange is where a published message was stored: its stream
// sequence, and the tags of its changes (a changes file's lines, the
// updates generator's event numbers): one for an update event, one per
// change for a change batch.
type sentChange struct {
	seq  uint64
	tags []int
}

// defaultChangeBatch is the changes per message strata changes and strata
// updates send by default: enough that a message's fixed cost (its
// publish, stream entry and ack, about 90µs of CPU in all) is small
// against its changes', and a batch of pgbench rows well under NATS's
// 1MB payload.
const defaultChangeBatch = 1000

func newChangePublisher(js jetstream.JetStream, window int, maxPayload int64, batchSize int) *changePublisher {
	p := &changePublisher{js: js, window: window, maxPayload: maxPayload}
	if batchSize > 1 {
		p.batcher = messages.NewBatcher(batchSize, maxPayload)
	}
	return p
}

// publish sends ev on subject, tagged tag for the acknowledgement's
// record: at once, or with batching as part of the change batch being
// filled, which is sent when full (by changes or bytes), when an event of
// another subject comes, or at flush.
func (p *changePublisher) publish(ctx context.Context, subject string, ev *messages.UpdateEvent, tag int) error {
	if p.batcher == nil {
		data, err := messages.Marshal(ev)
		if err != nil {
			return fmt.Errorf("event %s: %w", ev.EventID, err)
		}
		return p.send(ctx, subject, ev.EventID, data, []int{tag})
	}
	if p.batcher.Len() > 0 && subject != p.batchSubject {
		if err := p.sendBatch(ctx, p.batcher.Flush()); err != nil {
			return err
		}
	}
	if full := p.batcher.Add(ev); full != nil {
		if err := p.sendBatch(ctx, full); err != nil {
			return err
		}
	}
	p.batchTags = append(p.batchTags, tag)
	p.batchSubject = subject
	if p.batcher.Len() >= p.batcher.MaxChanges {
		return p.sendBatch(ctx, p.batcher.Flush())
	}
	return nil
}

// sendBatch sends b, whose tags are the ones gathered since the last.
func (p *changePublisher) sendBatch(ctx context.Context, b *messages.ChangeBatch) error {
	tags := p.batchTags
	p.batchTags = nil
	data, err := messages.Marshal(b)
	if err != nil {
		return fmt.Errorf("change batch %s: %w", b.BatchID, err)
	}
	return p.send(ctx, p.batchSubject, b.BatchID, data, tags)
}

// send publishes one message (an event or a batch) once fewer than
// window publishes await their acknowledgement.
func (p *changePublisher) send(ctx context.Context, subject, id string, data []byte, tags []int) error {
	if p.maxPayload > 0 && int64(len(data)) > p.maxPayload {
		return fmt.Errorf("event %s: %d bytes, more than the NATS server's limit of %d", id, len(data), p.maxPayload)
	}
	for len(p.pending)-p.head >= p.window {
		if err := p.settleOldest(ctx); err != nil {
			return err
		}
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(messages.HeaderMsgID, id)
	fut, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		// Disconnected with a full reconnect buffer, say: publish this
		// one in line, retrying until a server takes it.
		rctx, cancel := context.WithTimeout(ctx, retryFor)
		ack, err := natsutil.PublishRetry(rctx, p.js, msg)
		cancel()
		if err != nil {
			return fmt.Errorf("publish event %s: %w", id, err)
		}
		return p.record(ack, tags, id)
	}
	if p.head > 0 && p.head >= len(p.pending)/2 {
		p.pending = append(p.pending[:0], p.pending[p.head:]...)
		p.head = 0
	}
	p.pending = append(p.pending, pendingPublish{fut: fut, tags: tags})
	return nil
}

// flush sends the batch being filled and waits for every publish still
// awaiting its acknowledgement.
func (p *changePublisher) flush(ctx context.Context) error {
	if p.batcher != nil && p.batcher.Len() > 0 {
		if err := p.sendBatch(ctx, p.batcher.Flush()); err != nil {
			return err
		}
	}
	for p.head < len(p.pending) {
		if err := p.settleOldest(ctx); err != nil {
			return err
		}
	}
	return nil
}

// settleOldest waits for the oldest pending publish's acknowledgement. A
// publish that failed or was not acknowledged within a minute (a node
// lost, a leader being elected) is published again, with its
// Nats-Msg-Id, so the stream stores it once, until it is acknowledged or
// retryFor passes: an event the stream did not store must not pass
// silently.
func (p *changePublisher) settleOldest(ctx context.Context) error {
	pp := p.pending[p.head]
	p.pending[p.head] = pendingPublish{}
	p.head++
	id := pp.fut.Msg().Header.Get(messages.HeaderMsgID)
	var failed error
	select {
	case ack := <-pp.fut.Ok():
		return p.record(ack, pp.tags, id)
	case failed = <-pp.fut.Err():
	case <-time.After(time.Minute):
		failed = errors.New("not acknowledged after a minute")
	case <-ctx.Done():
		return ctx.Err()
	}
	rctx, cancel := context.WithTimeout(ctx, retryFor)
	ack, err := natsutil.PublishRetry(rctx, p.js, pp.fut.Msg())
	cancel()
	if err != nil {
		return fmt.Errorf("publish event %s: %v; again for %v: %w", id, failed, retryFor, err)
	}
	return p.record(ack, pp.tags, id)
}

func (p *changePublisher) record(ack *jetstream.PubAck, tags []int, id string) error {
	if ack.Stream != messages.StreamUpdates {
		return fmt.Errorf("event %s was stored in stream %s, not %s: the deployment's streams are not strata's", id, ack.Stream, messages.StreamUpdates)
	}
	p.published += len(tags)
	if ack.Duplicate {
		p.duplicates += len(tags)
	}
	if p.first == 0 || ack.Sequence < p.first {
		p.first = ack.Sequence
	}
	p.last = max(p.last, ack.Sequence)
	p.sent = append(p.sent, sentChange{seq: ack.Sequence, tags: tags})
	return nil
}

// duplicateNote says how many changes JetStream had already stored.
func (p *changePublisher) duplicateNote() string {
	if p.duplicates == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of them were already in the stream (the same event IDs sent before) and are stored once", p.duplicates)
}

// visibleNotice is how often waitVisible says it is still waiting.
const visibleNotice = 15 * time.Second

// waitVisible waits until the walwriter's consumer has acknowledged every
// event through stream sequence last, which it does once each is visible
// to queries (or dead-lettered), polling the consumer's ack floor every
// 50ms. It says every 15s that it is still waiting and gives up after
// timeout; what names the events in its messages.
func waitVisible(ctx context.Context, js jetstream.JetStream, last uint64, timeout time.Duration, what string) error {
	start := time.Now()
	notice := start.Add(visibleNotice)
	var info *jetstream.ConsumerInfo
	var infoErr error
	state := func() string {
		if info == nil {
			return fmt.Sprintf("the walwriter's consumer could not be read (%v)", infoErr)
		}
		s := fmt.Sprintf("the walwriter has acknowledged the stream through sequence %d, the last of these is %d; "+
			"%d events delivered and not yet acknowledged, %d not yet delivered",
			info.AckFloor.Stream, last, info.NumAckPending, info.NumPending)
		if infoErr != nil {
			s += fmt.Sprintf(" (as last read; reading it now fails: %v)", infoErr)
		}
		return s
	}
	for {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := js.Consumer(ictx, messages.StreamUpdates, messages.ConsumerWalwriter)
		cancel()
		switch {
		case err == nil:
			info, infoErr = c.CachedInfo(), nil
			if info.AckFloor.Stream >= last {
				return nil
			}
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			return fmt.Errorf("no consumer %s on stream %s: the scheduler creates it; is this strata's NATS?", messages.ConsumerWalwriter, messages.StreamUpdates)
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			infoErr = err
		}
		now := time.Now()
		if now.Sub(start) >= timeout {
			return fmt.Errorf("gave up after --wait-timeout %v: %s are stored and not yet visible: %s. "+
				"They stay in the stream and are applied once the walwriter gets to them (is a walwriter running? its log says why it is behind)",
				timeout, what, state())
		}
		if !now.Before(notice) {
			fmt.Fprintf(stderr, "still waiting after %v for %s to be visible: %s\n", now.Sub(start).Round(time.Second), what, state())
			notice = notice.Add(visibleNotice)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deadLetterMark returns the last sequence of the DEADLETTER stream, so
// that the dead letters of events published after it can be found.
func deadLetterMark(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", messages.StreamDeadLetter, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// reportDeadLetters looks in the DEADLETTER stream, after mark, for the
// dead letters of the events sent on subject, says which were rejected
// and why (each named by its tag, a "line" or an "event"), and returns an
// error if any was.
func reportDeadLetters(ctx context.Context, js jetstream.JetStream, mark uint64, subject string, sent []sentChange, tagName string) error {
	bySeq := slices.Clone(sent)
	slices.SortFunc(bySeq, func(a, b sentChange) int { return cmp.Compare(a.seq, b.seq) })
	s, err := js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		fmt.Fprintf(stderr, "could not check the dead letters (stream %s: %v); `strata deadletter --subject %s` lists them\n", messages.StreamDeadLetter, err, subject)
		return nil
	}
	var rejected []string
	n := 0
	for seq := mark + 1; seq <= s.CachedInfo().State.LastSeq; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "could not check the dead letters (message %d: %v); `strata deadletter --subject %s` lists them\n", seq, err, subject)
			return nil
		}
		if msg.Subject != messages.SubjectDeadLetter(subject) && msg.Header.Get(messages.HeaderSubject) != subject {
			continue
		}
		orig, err := strconv.ParseUint(msg.Header.Get(messages.HeaderStreamSeq), 10, 64)
		if err != nil {
			continue
		}
		i, found := slices.BinarySearchFunc(bySeq, orig, func(c sentChange, seq uint64) int { return cmp.Compare(c.seq, seq) })
		if !found {
			continue
		}
		tags := bySeq[i].tags
		n += len(tags)
		if len(rejected) < 10 {
			what := fmt.Sprintf("%s %d", tagName, tags[0])
			if len(tags) > 1 {
				what = batchRefusal(tagName, tags, msg.Header.Get(messages.HeaderReason))
			}
			rejected = append(rejected, fmt.Sprintf("  %s (stream sequence %d): %s", what, orig, msg.Header.Get(messages.HeaderReason)))
		}
	}
	if n == 0 {
		return nil
	}
	fmt.Fprintf(stderr, "dead-lettered, not applied:\n%s\n", strings.Join(rejected, "\n"))
	if n > len(rejected) {
		fmt.Fprintf(stderr, "  ... and %d more\n", n-len(rejected))
	}
	total := 0
	for _, sc := range sent {
		total += len(sc.tags)
	}
	return fmt.Errorf("%d of %d changes were dead-lettered (the others are visible); `strata deadletter --subject %s` lists them", n, total, subject)
}

// batchChangeIndex finds the index of the change a batch's refusal names
// ("batch ID: change 12: ...").
var batchChangeIndex = regexp.MustCompile(`: change (\d+): `)

// batchRefusal names what a dead-lettered batch held: a batch is refused
// whole, for the change its reason names by its index in the batch.
func batchRefusal(tagName string, tags []int, reason string) string {
	what := fmt.Sprintf("the %d %ss of one batch, %d to %d", len(tags), tagName, tags[0], tags[len(tags)-1])
	if m := batchChangeIndex.FindStringSubmatch(reason); m != nil {
		if i, err := strconv.Atoi(m[1]); err == nil && i < len(tags) {
			what += fmt.Sprintf(", for %s %d", tagName, tags[i])
		}
	}
	return what
}
