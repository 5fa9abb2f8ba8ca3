// Command scheduler decides what strata runs: it keeps the catalog of live
// containers in the strata_catalog bucket, chooses mergeouts by strata,
// grants memory from resource pools (strata_pools bucket), publishes
// mergeout and window jobs on JOBS (Nats-Msg-Id = job ID), follows EVENTS
// with its durable consumer to swap containers and release grants, and
// answers the strata.api.* requests of the strata CLI.
//
// Given no --nats URL (flag or STRATA_NATS), it starts an embedded NATS
// server with JetStream, storing under DATA/nats and listening on
// --listen (127.0.0.1:4222), so one machine needs nothing else installed.
// The embedded server is authenticated: on its first start the scheduler
// writes a random password per role (scheduler, merger, windower,
// walwriter, cli-admin, producer, pgwire) to DATA/nats-auth/ROLE.password
// (mode 0600, directory 0700) and reuses them afterwards, making on any
// start the file of a role that has none (a role added since the data
// directory was made); each role may use only its own subjects. The other
// binaries given the same --data find their password there. --listen on
// an address other than loopback is refused unless the server has a TLS
// certificate (--listen-tls-cert, --listen-tls-key); the scheduler then
// verifies it like any client, so give it --nats-tls-ca when the
// certificate's CA is not a system one.
//
// Usage:
//
//	scheduler [--data DIR] [--nats URLS] [--listen HOST:PORT] [--capacity 32] [--max-containers 1024] [--http :9101]
//	          [--store s3://BUCKET/PREFIX?endpoint=URL&region=REGION]
//
// With --store the containers are in the store, not under DATA: the
// scheduler checks outputs, deletes dead containers and sweeps orphans
// (uploads the catalog never named) there.
//
// Every flag has an environment variable: --capacity is STRATA_CAPACITY.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/storeflags"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

func main() { service.Main("scheduler", run) }

func run(args []string) error {
	b := service.NewBinary("scheduler", "127.0.0.1:9101")
	b.OwnsTopology = true // the streams, consumers and buckets are the scheduler's
	fs := b.Flags
	listen := fs.String("listen", "127.0.0.1:4222", "where the embedded NATS server listens (used only without --nats); an address other than loopback needs --listen-tls-cert and --listen-tls-key")
	listenCert := fs.String("listen-tls-cert", "", "TLS certificate (PEM) of the embedded NATS server; clients must then connect with TLS")
	listenKey := fs.String("listen-tls-key", "", "TLS key (PEM) of the embedded NATS server")
	listenCA := fs.String("listen-tls-ca", "", "CA bundle (PEM) the embedded NATS server verifies client certificates against (mutual TLS)")
	capacity := fs.Int("capacity", 32, "containers a stratum holds before it is merged")
	base := fs.String("strata-base", "1MiB", "upper size bound of the smallest stratum")
	maxContainers := fs.Int("max-containers", 1024, "live containers a projection may have; larger loads are refused")
	orphanGrace := fs.Duration("orphan-grace", time.Hour, "age after which a container the catalog does not name, and no load holds, is an orphan to remove")
	orphanSweep := fs.Duration("orphan-sweep", 10*time.Minute, "how often orphans are looked for while the scheduler runs (they are at start too); 0: only at start")
	tick := fs.Duration("tick", time.Second, "how often queue timeouts and failed publishes are checked")
	keepResults := fs.Int("keep-results", 100, "window result tables kept; older ones are dropped")
	keepOps := fs.Int("keep-operations", 10000, "rows of the operations and acquisitions tables kept (and restored at start)")
	keepApplies := fs.Int("keep-applies", 1000, "rows of the applies log kept (the walwriters' flushes, strata ops --applies; in memory)")
	purgeFraction := fs.Float64("purge-fraction", scheduler.DefaultPurgeFraction, "merge a keyed table whole once the rows of its changes since its last full mergeout reach this share of its rows (Vertica's purge); 0: never")
	var sf storeflags.Flags
	sf.Register(fs, false)
	if err := b.Start(args); err != nil {
		return err
	}
	log := b.Log
	baseBytes, err := bytesize.Parse(*base)
	if err != nil {
		return fmt.Errorf("--strata-base: %w", err)
	}
	limits := schedulerLimits{capacity: *capacity, maxContainers: *maxContainers, keepResults: *keepResults, keepOps: *keepOps,
		tick: *tick, orphanGrace: *orphanGrace, orphanSweep: *orphanSweep, baseBytes: baseBytes,
		purgeFraction: *purgeFraction, keepApplies: *keepApplies}
	if err := limits.check(); err != nil {
		return err
	}
	purge := *purgeFraction
	if purge == 0 {
		purge = -1 // StrataOptions: negative turns purging off
	}
	data, err := columnar.OpenDataDir(b.DataDir)
	if err != nil {
		return err
	}
	defer data.Close()
	var storage scheduler.Storage = dataStorage{data}
	st, err := sf.OpenStore(context.Background())
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
		storage = bucketStorage{st}
		log.Info("containers in a store", "store", st.String())
	}

	if !natsGiven(fs) {
		host, portText, err := net.SplitHostPort(*listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w", *listen, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			return fmt.Errorf("--listen %q: port: %w", *listen, err)
		}
		if port == 0 {
			port = natsembed.RandomPort
		}
		if *listenCert == "" && !natsutil.IsLoopback(host) {
			return fmt.Errorf("--listen %q: not a loopback address: the embedded NATS server listens beyond this machine only with TLS (--listen-tls-cert, --listen-tls-key)", *listen)
		}
		passwords, err := natsutil.EnsureCredentials(b.DataDir)
		if err != nil {
			return fmt.Errorf("embedded NATS server: %w", err)
		}
		emb, err := natsembed.Start(natsembed.Options{DataDir: b.DataDir, Host: host, Port: port, Logger: log, // natsembed adds component=nats-server
			Passwords: passwords, TLSCert: *listenCert, TLSKey: *listenKey, TLSCA: *listenCA})
		if err != nil {
			return fmt.Errorf("embedded NATS server: %w", err)
		}
		defer emb.Shutdown()
		b.NATS = emb.ClientURL()
		if b.Creds == "" && b.User == "" {
			// Connect to our own server as the scheduler, whatever the
			// environment says.
			b.User, b.Password, b.PasswordFile = natsutil.RoleScheduler, passwords[natsutil.RoleScheduler], ""
		}
		log.Info("embedded NATS server started", "url", emb.ClientURL(), "store", b.DataDir, "auth", natsutil.AuthDir(b.DataDir), "tls", *listenCert != "")
	}

	setup, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Connect(setup); err != nil {
		return err
	}
	r, nc, js := b.Runner, b.NC, b.JS
	defer nc.Close()
	var catalog, pools bucketKV
	var cons jetstream.Consumer
	err = natsutil.RetryUnanswered(setup, func(ctx context.Context) (err error) {
		if catalog, err = openBucket(ctx, js, messages.BucketCatalog); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		if pools, err = openBucket(ctx, js, messages.BucketPools); err != nil {
			return fmt.Errorf("pools: %w", err)
		}
		if cons, err = js.Consumer(ctx, messages.StreamEvents, messages.ConsumerScheduler); err != nil {
			return fmt.Errorf("events consumer: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}

	// The catalog's keys are listed from the bucket (bucketKV.Keys): an
	// in-memory index of them, fed by a watcher, missed a live container
	// under NATS faults (the chaos suite's kill-storm on three nodes).
	s, err := scheduler.New(setup, catalog, pools, jsPublisher{js}, scheduler.Options{
		Data:             storage,
		Strata:           scheduler.StrataOptions{Capacity: *capacity, BaseBytes: baseBytes, MaxContainers: *maxContainers, PurgeFraction: purge},
		OrphanGrace:      *orphanGrace,
		KeepOperations:   *keepOps,
		KeepApplies:      *keepApplies,
		KeepAcquisitions: *keepOps,
		KeepResults:      *keepResults,
		Logger:           log,
		ChangeFloor:      walwriterAckFloor(js),
	})
	if err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	reg := labelled(r.Registry())
	reg.MustRegister(newPoolCollector(s))
	lag := service.NewConsumerLag(r.Registry(), "scheduler", log)
	r.AddContext(func(ctx context.Context) error { return lag.Watch(ctx, js, lagEvery, durableConsumers...) })
	r.AddContext(func(ctx context.Context) error {
		restoreHistoryRetrying(ctx, js, s, *keepOps, log)
		<-ctx.Done() // an actor that returns stops the service
		return nil
	})

	api := newAPIServer(s, log, reg)
	if api.fault, err = parseAPIFault(os.Getenv(apiFaultEnv)); err != nil {
		return fmt.Errorf("%s: %w", apiFaultEnv, err)
	} else if api.fault != nil {
		log.Warn("test failpoint set: API replies are delayed, dropped or the process exits before replying", "env", apiFaultEnv, "fault", os.Getenv(apiFaultEnv))
	}
	sub, err := nc.QueueSubscribe(messages.SubjectAPIAll, "scheduler", api.serve)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", messages.SubjectAPIAll, err)
	}
	defer sub.Unsubscribe()
	// The subscription is sent to the server with the connection's next
	// flush. Until the server has it, a request from another connection
	// finds no responder: a client that saw /healthz answer (or "scheduler
	// ready" logged) would be told no scheduler is there. So wait for the
	// server to have it before anything says the scheduler is ready.
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribe %s: flush to the server: %w", messages.SubjectAPIAll, err)
	}

	events := newEventLoop(s, cons, service.NewRejecter("scheduler", js, log, r.Registry(), messages.SubjectEventsAll), log, reg)
	r.AddContext(events.run)
	r.AddContext(every(*tick, s.Tick))
	if *orphanSweep > 0 {
		r.AddContext(every(*orphanSweep, func(ctx context.Context) {
			if err := s.SweepOrphans(ctx); err != nil {
				log.Error("orphan sweep", "err", err)
			}
		}))
	}
	r.AddContext(purgeDeletes(catalog, markerPurgeEvery, markerMinAge, log))
	log.Info("scheduler ready", "nats", b.NATS, "data", b.DataDir, "capacity", *capacity, "max_containers", *maxContainers)
	err = b.Run()
	if derr := nc.Drain(); derr != nil {
		log.Warn("drain nats connection", "err", derr)
	}
	return err
}

// every returns an actor that calls fn every d until its context ends.
func every(d time.Duration, fn func(context.Context)) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				fn(ctx)
			}
		}
	}
}

// natsGiven reports whether a NATS URL was given, on the command line or in
// the environment.
func natsGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "nats" })
	if _, ok := os.LookupEnv(service.EnvName("nats")); ok {
		given = true
	}
	return given
}

// walwriterAckFloor is the scheduler's ChangeFloor: the ack floor of the
// walwriter's durable consumer on UPDATES. The walwriter acks an event
// once its change is visible in a live container (or dead-lettered), so
// every change at or below the floor is applied.
func walwriterAckFloor(js jetstream.JetStream) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		c, err := js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
		if err != nil {
			return 0, fmt.Errorf("consumer %s of stream %s: %w", messages.ConsumerWalwriter, messages.StreamUpdates, err)
		}
		floor := c.CachedInfo().AckFloor.Stream
		if floor > math.MaxInt64 {
			return 0, fmt.Errorf("consumer %s of stream %s: ack floor %d beyond int64", messages.ConsumerWalwriter, messages.StreamUpdates, floor)
		}
		return int64(floor), nil
	}
}
