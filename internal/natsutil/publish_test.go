package natsutil_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

// TestPublishRetryAcrossRestart: a publish made while the server is down
// is acknowledged once the server is back, and stored once.
func TestPublishRetryAcrossRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	srv := natstest.Server(t, natsembed.Options{DataDir: dir, Port: port})
	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{srv.ClientURL()}, Name: "publish-retry-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()

	msg := &nats.Msg{Subject: messages.SubjectUpdates("t"), Data: []byte("event"), Header: nats.Header{}}
	msg.Header.Set(messages.HeaderMsgID, "e-1")
	done := make(chan error, 1)
	go func() {
		_, err := natsutil.PublishRetry(ctx, js, msg)
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond) // attempts fail meanwhile
	select {
	case err := <-done:
		t.Fatalf("publish returned while the server was down: %v", err)
	default:
	}
	natstest.Server(t, natsembed.Options{DataDir: dir, Port: port})
	if err := <-done; err != nil {
		t.Fatalf("publish across the restart: %v", err)
	}
	if _, err := natsutil.PublishRetry(ctx, js, msg); err != nil { // again: stored once
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, messages.StreamUpdates)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("%d messages stored, want 1", info.State.Msgs)
	}
}

// TestPublishRetryNeedsMsgID: without a Nats-Msg-Id a retry could store a
// message twice, so PublishRetry refuses it.
func TestPublishRetryNeedsMsgID(t *testing.T) {
	_, js := startTestServer(t)
	_, err := natsutil.PublishRetry(context.Background(), js, &nats.Msg{Subject: "x", Header: nats.Header{}})
	if err == nil {
		t.Fatal("published without a message ID")
	}
}
