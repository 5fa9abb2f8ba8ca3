// Package natstest starts in-process NATS servers with JetStream for tests:
// Server a bare one (any of natsembed's options: passwords, TLS, a fixed
// port or store), Start one with strata's streams, consumers and buckets
// made and a connection to it.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
)

// Server starts an embedded server with opts, by default on a free port
// (Port 0 here means natsembed.RandomPort) with its store in a temporary
// directory, and nothing on it. It stops at the test's end; stopping it
// sooner (to restart it on the same port and store) is fine.
func Server(t testing.TB, opts natsembed.Options) *natsembed.Server {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Port == 0 {
		opts.Port = natsembed.RandomPort
	}
	srv, err := natsembed.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// Start starts a Server with the default options, connects to it, and
// ensures topo (its zero fields take the defaults). Server and connection
// stop at the test's end.
func Start(t testing.TB, topo natsutil.Topology, opts ...jetstream.JetStreamOpt) (*natsembed.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv := Server(t, natsembed.Options{})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	return srv, nc, js
}
