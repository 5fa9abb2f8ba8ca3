package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Main runs a service binary: it calls run with the command-line arguments
// and, when run fails, prints "name: error" to stderr and exits with status
// 1. A request for help (-h, which run returns as flag.ErrHelp) exits 0.
func Main(name string, run func(args []string) error) {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Binary is what every service binary starts with: its flag set holding the
// Common flags, and, after Start, its logger and Runner; after Connect, its
// NATS connection.
//
// A binary adds its own flags to Flags, calls Start, then Connect:
//
//	b := service.NewBinary("walwriter", "127.0.0.1:9104")
//	walDir := b.Flags.String("wal", "", "WAL directory")
//	if err := b.Start(args); err != nil {
//		return err
//	}
type Binary struct {
	Common
	Flags *flag.FlagSet

	// OwnsTopology makes Connect ensure the streams, consumers and buckets
	// (the scheduler's job). Other binaries only wait for what they use:
	// their NATS users may not change the topology.
	OwnsTopology bool

	// LogWorker adds the --worker name to every log record, for binaries
	// that run as one of many interchangeable workers.
	LogWorker bool

	Log    *slog.Logger
	Runner *Runner
	NC     *nats.Conn
	JS     jetstream.JetStream
}

// NewBinary returns a Binary whose flag set holds the Common flags.
// defaultHTTP is the default listen address for /metrics and /healthz.
func NewBinary(name, defaultHTTP string) *Binary {
	b := &Binary{Flags: flag.NewFlagSet(name, flag.ContinueOnError)}
	b.Common.Register(b.Flags, name, defaultHTTP)
	return b
}

// Start parses args (and the environment, see Parse) and makes the logger,
// which tags every record with the service name (and the worker name if
// LogWorker is set), and the Runner. A request for help returns
// flag.ErrHelp.
func (b *Binary) Start(args []string) error {
	if err := Parse(b.Flags, args); err != nil {
		return err
	}
	log, err := NewLogger(os.Stderr, b.LogFormat, b.LogLevel)
	if err != nil {
		return err
	}
	log = log.With("service", b.Name)
	if b.LogWorker {
		log = log.With("worker", b.Worker)
	}
	b.Log = log
	if FlagInArgs(args, "nats-password") {
		log.Warn(PasswordFlagWarning)
	}
	b.Runner = NewRunner(b.Name, log)
	return nil
}

// Connect connects to NATS as the flags describe, adds a "nats" health
// check to the Runner, and, if OwnsTopology, ensures the streams,
// consumers and buckets of the Topology within ctx. On success the caller
// closes NC.
func (b *Binary) Connect(ctx context.Context) error {
	nc, js, err := b.ConnectNATS(b.Log, b.Runner)
	if err != nil {
		return err
	}
	if b.OwnsTopology {
		if err := b.Topology().Ensure(ctx, js); err != nil {
			nc.Close()
			return err
		}
	}
	b.NC, b.JS = nc, js
	return nil
}

// WaitConsumer returns the durable consumer of stream, waiting within ctx
// while it does not exist yet (the scheduler, which creates it, may start
// later).
func (b *Binary) WaitConsumer(ctx context.Context, stream, consumer string) (jetstream.Consumer, error) {
	logged := false
	for {
		c, err := b.JS.Consumer(ctx, stream, consumer)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
			return nil, err
		}
		if !logged {
			b.Log.Info("waiting for the scheduler to create the consumer", "stream", stream, "consumer", consumer, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("consumer %s on stream %s: %w (is the scheduler running?)", consumer, stream, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Run runs the Runner, serving /metrics and /healthz on the --http address,
// until the first actor returns or a signal stops it.
func (b *Binary) Run() error { return b.Runner.Run(b.HTTPAddr) }
