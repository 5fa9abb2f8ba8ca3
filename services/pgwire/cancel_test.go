package main

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// A client that goes away while its query's job runs ends the wait at
// once (so the job is cancelled), without a cancel request.
func TestDisconnectEndsTheWait(t *testing.T) {
	s := startServer(t, nil)
	s.be.block = make(chan struct{})
	ended := make(chan error, 1)
	s.be.onEnd = func(ctx context.Context) { ended <- context.Cause(ctx) }
	c := s.connect(t)
	// The connection taken from pgx, which would send a cancel request
	// when its socket fails: the query sent, then the socket closed, as
	// a killed client's would be.
	hc, err := c.PgConn().Hijack()
	if err != nil {
		t.Fatal(err)
	}
	hc.Frontend.Send(&pgproto3.Query{String: testSQL})
	if err := hc.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := hc.Conn.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-ended:
		if !errors.Is(cause, errDisconnected) {
			t.Fatalf("the wait ended by %v, want the disconnect", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end within 5s of the client going away")
	}
}

// peerClosed tells a closed peer from an open, idle one.
func TestPeerClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if peerClosed(server) {
		t.Fatal("an open idle connection seen closed")
	}
	client.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !peerClosed(server) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection not seen closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
