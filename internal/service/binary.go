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

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// Main runs a service binary: it calls run with the command-line arguments
// and exits with the status ExitCode gives, after printing "name: error"
// to stderr for a failure.
func Main(name string, run func(args []string) error) {
	err := run(os.Args[1:])
	code := ExitCode(err)
	if code != 0 {
		fmt.Fprintln(os.Stderr, name+":", err)
	}
	os.Exit(code)
}

// ExitCode is the exit status of a binary whose run returned err: 0 for
// nil, for a request for help (flag.ErrHelp) and for --version
// (ErrVersion); 2 for a usage error (ErrUsage); 1 for any other failure.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.Is(err, ErrVersion):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	return 1
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

	given map[string]bool // flags set on the command line or from the environment

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
// flag.ErrHelp; --version prints Version to stdout and returns ErrVersion;
// a bad flag or a positional argument (a service takes none) is an
// ErrUsage error.
func (b *Binary) Start(args []string) error {
	if err := Parse(b.Flags, args); err != nil {
		return err
	}
	if b.ShowVersion {
		fmt.Fprintln(os.Stdout, Version(b.Name))
		return ErrVersion
	}
	if b.Flags.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q: %s takes only flags (-h lists them)", ErrUsage, b.Flags.Arg(0), b.Name)
	}
	b.given = map[string]bool{}
	b.Flags.Visit(func(f *flag.Flag) { b.given[f.Name] = true })
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

// Connect connects to NATS as the flags describe and adds a "nats" health
// check to the Runner. It waits for the connection however long NATS is
// down (each refusal is logged with its reason); then, if OwnsTopology, it
// ensures the streams, consumers and buckets of the Topology within ctx.
// A worker then gets its consumer with WaitConsumer. On success the caller
// closes NC.
func (b *Binary) Connect(ctx context.Context) error {
	nc, js, err := b.ConnectNATS(b.Log, b.Runner)
	if err != nil {
		return err
	}
	// NATS may be down or refusing us: wait as long as it takes, saying
	// why (the connection logs each refusal), rather than exit.
	if err := waitConnected(nc, b.NATS, b.Log); err != nil {
		nc.Close()
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
// later). For a job consumer it adopts the consumer's lease and delivery
// count, refusing a --job-ack-wait or --job-max-deliver given here that
// disagrees: the scheduler owns them, and one worker's flags must not
// reconfigure the consumer every worker shares.
func (b *Binary) WaitConsumer(ctx context.Context, stream, consumer string) (jetstream.Consumer, error) {
	logged := false
	for {
		actx, cancel := context.WithTimeout(ctx, natsutil.APIAttempt) // a lost request is sent again
		c, err := b.JS.Consumer(actx, stream, consumer)
		cancel()
		if err == nil {
			return c, b.adoptLease(stream, c.CachedInfo().Config)
		}
		waitable := errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || natsutil.Unanswered(ctx, err)
		if !waitable && ctx.Err() == nil {
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

// adoptLease takes a job consumer's AckWait and MaxDeliver as this
// binary's, or refuses a flag given with another value.
func (b *Binary) adoptLease(stream string, cfg jetstream.ConsumerConfig) error {
	if stream != messages.StreamJobs {
		return nil
	}
	for _, c := range []struct {
		flag, given, now string
		adopt            func()
	}{
		{"job-ack-wait", b.JobAckWait.String(), cfg.AckWait.String(), func() { b.JobAckWait = cfg.AckWait }},
		{"job-max-deliver", fmt.Sprint(b.JobMaxDeliver), fmt.Sprint(cfg.MaxDeliver), func() { b.JobMaxDeliver = cfg.MaxDeliver }},
	} {
		if b.given[c.flag] && c.given != c.now {
			return fmt.Errorf("--%s %s disagrees with consumer %s's %s (set by the scheduler, which owns the streams and consumers): "+
				"drop the flag here or give the scheduler the same value", c.flag, c.given, cfg.Durable, c.now)
		}
		c.adopt()
	}
	return nil
}

// Run runs the Runner, serving /metrics and /healthz on the --http address,
// until the first actor returns or a signal stops it.
func (b *Binary) Run() error { return b.Runner.Run(b.HTTPAddr) }

// waitConnected waits until nc is connected, logging every 10 seconds that
// it still waits; it fails only if the connection was closed.
func waitConnected(nc *nats.Conn, urls string, log *slog.Logger) error {
	start := time.Now()
	next := start.Add(10 * time.Second)
	for !nc.IsConnected() {
		if nc.IsClosed() {
			return fmt.Errorf("nats connection to %s closed: %v", urls, nc.LastError())
		}
		if now := time.Now(); now.After(next) {
			next = now.Add(10 * time.Second)
			log.Info("waiting for NATS", "urls", urls, "status", nc.Status().String(), "waited_seconds", now.Sub(start).Round(time.Second).Seconds())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
