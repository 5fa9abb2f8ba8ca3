package integration

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

// badPayloads are messages no service may act on: not msgpack, a wrong
// shape, an unknown version, a message of the wrong kind, and invalid, a
// message of the subject's own kind that fails validation.
func badPayloads(t *testing.T, wrong, invalid messages.Message) map[string][]byte {
	t.Helper()
	wrongKind, err := messages.Marshal(wrong)
	if err != nil {
		t.Fatal(err)
	}
	invalidJob := encode(t, invalid)
	return map[string][]byte{
		"garbage":         []byte("this is not msgpack"),
		"empty":           {},
		"unknown version": {0x93, 0x63, 0xac, 'm', 'e', 'r', 'g', 'e', 'o', 'u', 't', '_', 'j', 'o', 'b', 0x80},
		"wrong kind":      wrongKind,
		"invalid":         invalidJob,
	}
}

// encode marshals m; Marshal does not validate, so an invalid message
// encodes and only the receiving service rejects it.
func encode(t *testing.T, m messages.Message) []byte {
	t.Helper()
	b, err := messages.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMalformedMessagesAreDeadLettered: garbage on every subject a service
// consumes is logged, counted, dead-lettered with a reason, and the service
// stays up and keeps working.
func TestMalformedMessagesAreDeadLettered(t *testing.T) {
	d := newDeployment(t)
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 4, Containers: 2, RowsPerContainer: 1000, Seed: 4})
	type target struct {
		service  string
		subject  string
		payloads map[string][]byte
		proc     *proc
	}
	event := &messages.JobEvent{JobID: "x", Type: messages.EventDone}
	job := &messages.MergeoutJob{JobID: "bad", Table: "t", Projection: "p", Output: "../escape",
		Inputs: []messages.ContainerRef{{ID: "c0000"}}, Grant: messages.Grant{Bytes: 1 << 20}}
	targets := []*target{
		{service: "merger", subject: messages.SubjectJobMergeout, payloads: badPayloads(t, event, job)},
		{service: "windower", subject: messages.SubjectJobWindow, payloads: badPayloads(t, job, &messages.WindowJob{JobID: "bad", ResultTable: "r", Output: "o"})},
		{service: "walwriter", subject: messages.SubjectUpdates("accounts"), payloads: badPayloads(t, job, &messages.UpdateEvent{EventID: "e", Table: "accounts"})},
		{service: "scheduler", subject: messages.SubjectEventDone, payloads: badPayloads(t, job, &messages.JobEvent{JobID: "x", Type: "exploded"})},
	}
	var tested []*target
	for _, tg := range targets {
		if !haveBinary(tg.service) {
			t.Logf("service %s not built: its subject is not tested", tg.service)
			continue
		}
		tg.proc = d.start(tg.service, tg.service+"-1")
		tested = append(tested, tg)
		for _, p := range tg.payloads {
			d.publishRaw(tg.subject, p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dl, err := d.js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tested {
		waitFor(t, 30*time.Second, tg.service+" rejections counted", func() bool {
			return tg.proc.metric(t, "strata_rejected_messages_total", `subject="`+service.SubjectKind(tg.subject)+`"`) == float64(len(tg.payloads))
		})
		// Every payload is in the dead-letter stream with a reason.
		cons, err := dl.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{messages.SubjectDeadLetter(tg.subject)}})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < len(tg.payloads) {
			msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
			if err != nil {
				t.Fatalf("%s: %d of %d dead letters: %v", tg.service, got, len(tg.payloads), err)
			}
			if msg.Headers().Get(messages.HeaderReason) == "" || msg.Headers().Get(messages.HeaderService) != tg.service {
				t.Errorf("%s: dead letter without reason or service: %v", tg.service, msg.Headers())
			}
			got++
		}
		if !tg.proc.alive() {
			t.Errorf("%s died on malformed input", tg.service)
		}
		tg.proc.waitHealthy(t)
	}
	// The merger still works after the garbage.
	if haveBinary("merger") {
		ev := d.watchEvents()
		d.publish(messages.SubjectJobMergeout, "after-garbage", mergeoutJob("after-garbage", "m-after", 64<<20, ms))
		ev.waitDone(t, 30*time.Second, "after-garbage")
	}
	// Nothing is left pending for redelivery.
	for _, c := range []struct{ stream, name string }{
		{messages.StreamJobs, messages.ConsumerMerger}, {messages.StreamUpdates, messages.ConsumerWalwriter},
	} {
		cons, err := d.js.Consumer(ctx, c.stream, c.name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 0 || info.NumPending != 0 {
			t.Errorf("consumer %s: %d pending, %d awaiting ack", c.name, info.NumPending, info.NumAckPending)
		}
	}
}
