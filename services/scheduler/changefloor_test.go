package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"
)

// TestWalwriterAckFloor: the scheduler's change floor is the walwriter
// consumer's ack floor on UPDATES: 0 before any ack, then the stream
// sequence through which every event is acked (an event acked past an
// unacked one does not raise it).
func TestWalwriterAckFloor(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	floor := walwriterAckFloor(js)
	if f, err := floor(ctx); err != nil || f != 0 {
		t.Fatalf("before any event: floor %d, %v; want 0", f, err)
	}
	for i := range 4 {
		if _, err := js.Publish(ctx, messages.SubjectUpdates("t"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for m := range batch.Messages() {
		n++
		if n == 3 {
			continue // the third stays unacked
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n != 4 {
		t.Fatalf("fetched %d events, want 4", n)
	}
	if f, err := floor(ctx); err != nil || f != 2 {
		t.Fatalf("events 1, 2 and 4 acked: floor %d, %v; want 2", f, err)
	}
	nc.Close()
	if f, err := floor(ctx); err == nil {
		t.Fatalf("connection closed: floor %d and no error", f)
	}
}
