// Package natstest starts an in-process NATS server with JetStream for
// tests, with strata's streams, consumers and buckets made.
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

// Start starts an embedded server on a free port with its store in a
// temporary directory, connects to it, and ensures topo (its zero fields
// take the defaults). Server and connection stop at the test's end.
func Start(t testing.TB, topo natsutil.Topology, opts ...jetstream.JetStreamOpt) (*natsembed.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{DataDir: t.TempDir(), Port: natsembed.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
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
