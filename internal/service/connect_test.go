package service

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

// syncBuffer is a log sink safe for the connection's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConnectWaitsForNATS: a service started while NATS is down waits
// (instead of exiting after a minute) and connects when the server comes.
func TestConnectWaitsForNATS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b := NewBinary("scheduler", "")
	b.OwnsTopology = true
	if err := b.Start([]string{"--nats", "nats://127.0.0.1:" + strconv.Itoa(port), "--data", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Connect(context.Background()) }()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("Connect returned with no server: %v", err)
	default:
	}
	natstest.Server(t, natsembed.Options{Port: port})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not connected 30s after the server started")
	}
	b.NC.Close()
}

// TestConnectSaysCredentialsRefused: a wrong password is reported as the
// server refusing the credentials, not as a time-out.
func TestConnectSaysCredentialsRefused(t *testing.T) {
	srv := natstest.Server(t, natsembed.Options{Passwords: map[string]string{natsutil.RoleMerger: "right"}})
	var logs syncBuffer
	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{srv.ClientURL()}, User: natsutil.RoleMerger, Password: "wrong",
		RetryOnFailedConnect: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "refused the credentials") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
