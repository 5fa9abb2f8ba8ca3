// Command walwriter consumes update events from the UPDATES stream (the
// shared durable consumer on strata.updates.>), appends each to a
// write-ahead log with package walwriter, and acks each event only after
// its record is durable. Events that do not decode, or that the WAL rejects
// (unknown columns, oversized rows), go to strata.deadletter.<subject>
// with the reason. A redelivered event is written once: the WAL drops
// duplicate event IDs.
//
// While the WAL cannot write (a full or failing disk) the walwriter takes
// no events, so they wait in the stream without spending deliveries, keeps
// the events it holds in progress, and answers /healthz with 503 and the
// cause; it resumes by itself when the WAL writes again. An event that runs
// out of deliveries anyway is dead-lettered (from JetStream's
// max-deliveries advisory), never dropped. A damaged older
// WAL segment stops it at start with the segment and offset: run
// `strata wal repair DIR`.
//
// With --store URL the walwriter copies each sealed WAL segment and each
// new checkpoint file to that store, under --archive-prefix (default
// wal/<host name>/), in the background (package walarchive): the local
// WAL stays the durable write path, the bucket is its disaster copy, at
// most the segment being written plus the upload queue behind. A store
// that cannot be reached is logged and retried with backoff, and
// strata_wal_archive_lag_segments grows; appends do not wait for it. On a
// clean stop (SIGTERM) the segment being written is sealed after its last
// durable batch and uploaded with the checkpoint, within
// --archive-stop-timeout (default 30s), so the bucket then holds every
// acknowledged event. The archive keeps the newest
// --archive-retain-checkpoints checkpoints (default 8) and every one
// archived within --archive-retain-age (default 720h), with the segments a
// restore from them needs, and deletes the rest from the bucket;
// --archive-retain-checkpoints 0 keeps everything.
// `strata wal restore --from URL --prefix wal/HOST/ DIR` makes a WAL
// directory of the copy.
//
// Usage:
//
//	walwriter [--nats URLS] [--data DIR] [--wal DIR] [--http :9104]
//	          [--store URL [--archive-prefix wal/NAME/] [--archive-retain-checkpoints 8] [--archive-retain-age 720h] [--archive-stop-timeout 30s]]
//
// Every flag has an environment variable: --wal is STRATA_WAL.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/storeflags"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
)

// drainTimeout bounds each step of a stop that needs the NATS server.
const drainTimeout = 10 * time.Second

func main() { service.Main("walwriter", run) }

func run(args []string) error {
	b := service.NewBinary("walwriter", "127.0.0.1:9104")
	b.LogWorker = true
	fs := b.Flags
	walDir := fs.String("wal", "", "WAL directory (default: DATA/wal)")
	segmentSize := fs.String("segment-size", "64MiB", "size of each preallocated WAL segment")
	inFlight := fs.Int("in-flight", 4096, "events taken from NATS before their records are durable (the group-commit batch)")
	batchWindow := fs.Duration("batch-window", 0, "wait this long to fill a group commit (0: commit what is queued when the last sync ends)")
	noDelta := fs.Bool("no-delta", false, "log every update as a full row image")
	apply := fs.Bool("apply", true, "apply the changes of keyed tables, acking each event once its change is visible (false: log every event and ack it once durable, applying nothing)")
	flushInterval := fs.Duration("flush-interval", time.Second, "with --apply: a durable change is visible within this long (batches are flushed every half of it; a batch that takes longer to apply delays it)")
	applyLagMax := fs.Duration("apply-lag-threshold", 30*time.Second, "with --apply: /healthz fails while a change waits longer than this to be visible")
	var sf storeflags.Flags
	sf.RegisterWALArchive(fs)
	var af archiveFlags
	af.register(fs)
	if err := b.Start(args); err != nil {
		return err
	}
	log := b.Log
	segBytes, err := bytesize.Parse(*segmentSize)
	if err != nil {
		return fmt.Errorf("--segment-size: %w", err)
	}
	if *walDir == "" {
		*walDir = filepath.Join(b.DataDir, "wal")
	}
	m := newMetrics()
	wal, err := walwriter.Open(*walDir, walwriter.Options{
		Logger: log, SegmentSize: segBytes, BatchWindow: *batchWindow, DisableDelta: *noDelta, OnSync: m.onSync,
	})
	if err != nil {
		return err
	}
	walClosed := false
	defer func() {
		if !walClosed {
			wal.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	arch, closeArchive, err := startArchive(ctx, &sf, af.options(log), wal)
	if err != nil {
		return err
	}
	defer closeArchive()
	if err := b.Connect(ctx); err != nil {
		return err
	}
	r, nc, js := b.Runner, b.NC, b.JS
	defer nc.Close()
	cons, err := b.WaitConsumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		return fmt.Errorf("updates consumer: %w", err)
	}
	a := &appender{
		wal:      wal,
		rejecter: service.NewRejecter("walwriter", js, log, r.Registry(), messages.SubjectUpdatesAll),
		log:      log,
		appended: m.appended,
		failed:   m.failed,
	}
	var ap *changeApplier
	if *apply {
		if *flushInterval <= 0 {
			return fmt.Errorf("--flush-interval %s: must be positive", *flushInterval)
		}
		st, err := sf.OpenStore(ctx)
		if err != nil {
			return err
		}
		if st != nil {
			defer st.Close()
		}
		state, err := readAppliedState(*walDir)
		if err != nil {
			return err
		}
		api := &apiclient.Client{NC: nc, Timeout: 10 * time.Second, Settle: 5 * time.Minute}
		a.tables = newTableCache(api, b.DataDir, st)
		ap = &changeApplier{wal: wal, walDir: *walDir, state: state, data: b.DataDir, store: st, api: api, log: log, ack: a.ackApplied, m: m,
			batches: map[string]*tableBatch{}}
		a.apply = ap
		ap.floor.Store(state.LSN)
		r.Registry().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "strata_change_apply_lag_records", Help: "WAL records logged past the position through which every change is visible.",
			ConstLabels: prometheus.Labels{"service": "walwriter"},
		}, ap.lagRecords))
		r.AddCheck("apply", ap.health(*applyLagMax))
		replayCtx, cancelReplay := context.WithTimeout(context.Background(), 10*time.Minute)
		err = ap.replay(replayCtx, a.tables)
		cancelReplay()
		if err != nil {
			return err
		}
		log.Info("applying changes of keyed tables", "wal_id", state.WAL, "applied_through", ap.state.LSN, "flush_interval", *flushInterval)
	}
	m.register(r.Registry(), wal, a)
	if arch != nil {
		registerArchiveMetrics(r.Registry(), arch)
	}

	r.AddCheck("wal", a.health)
	ackWait := cons.CachedInfo().Config.AckWait
	if ackWait <= 0 {
		ackWait = 30 * time.Second
	}

	stop := make(chan struct{})
	r.Add(func() error {
		go a.heartbeat(stop, ackWait/3)
		if ap != nil {
			go ap.run(stop, *flushInterval)
		}
		go func() {
			if err := a.watchMaxDeliveries(stop, nc, js); err != nil {
				log.Error("watch for update events out of deliveries", "err", err)
			}
		}()
		log.Info("walwriter ready", "wal", *walDir)
		return a.consume(stop, cons, *inFlight, 100*time.Millisecond)
	}, func(error) { close(stop) })
	err = b.Run()
	walClosed = true
	flushAcks := func() error {
		if ap != nil {
			// The changes made durable while stopping become visible
			// (and their events acked) now, not after a restart.
			ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			if err := ap.flush(ctx); err != nil {
				log.Warn("changes left unapplied at stop; the next start applies them from the WAL", "err", err)
			}
			cancel()
		}
		return nc.FlushTimeout(drainTimeout)
	}
	if cerr := closeWAL(wal, arch, flushAcks, af.stopTimeout, log); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// Defaults of the archive's retention: a month of checkpoints, and at
// least eight (at the default checkpoint interval, 4 segments of 64MiB
// each, 2GiB of records) however old.
const (
	defaultRetainCheckpoints = 8
	defaultRetainAge         = 30 * 24 * time.Hour
)

// archiveFlags are the flags of the WAL archive but --store.
type archiveFlags struct {
	prefix            string
	retainCheckpoints int
	retainAge         time.Duration
	stopTimeout       time.Duration
}

func (f *archiveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.prefix, "archive-prefix", "", "with --store: key prefix of the WAL's archive in the store (default: wal/HOST/)")
	fs.IntVar(&f.retainCheckpoints, "archive-retain-checkpoints", defaultRetainCheckpoints,
		"with --store: keep the newest N checkpoints in the archive and every segment a restore from one of them needs; an older checkpoint goes once it is also past --archive-retain-age (0: keep everything, delete nothing)")
	fs.DurationVar(&f.retainAge, "archive-retain-age", defaultRetainAge,
		"with --store: keep every checkpoint archived within this long too, beyond --archive-retain-checkpoints (0: the count alone decides)")
	fs.DurationVar(&f.stopTimeout, "archive-stop-timeout", 30*time.Second,
		"with --store: on a clean stop, how long uploading the last segment and the checkpoint may take before the walwriter exits anyway (the next start uploads them)")
}

func (f *archiveFlags) options(log *slog.Logger) walarchive.Options {
	return walarchive.Options{Prefix: f.prefix, Logger: log, RetainCheckpoints: f.retainCheckpoints, RetainAge: f.retainAge}
}

// closeWAL is the end of a stop. The WAL's Close writes what is queued and,
// when all of it was written, seals the segment being written; flush then
// sends the acks of those events. With an archiver, one more pass uploads
// what is not in the bucket yet, that segment and the checkpoint among it,
// within timeout: after a clean stop the bucket holds every acknowledged
// record, or the log says what is left for the next start.
func closeWAL(wal *walwriter.WAL, arch *walarchive.Archiver, flush func() error, timeout time.Duration, log *slog.Logger) error {
	err := wal.Close()
	if err != nil {
		log.Error("close WAL", "err", err)
	}
	if ferr := flush(); ferr != nil {
		log.Warn("flush acknowledgements", "err", ferr)
	}
	if arch == nil {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if serr := arch.Sync(ctx); serr != nil {
		s := arch.Stats()
		log.Warn("WAL archive not caught up at stop; the next start uploads the rest", "err", serr, "lag_segments", s.LagSegments, "lag_bytes", s.LagBytes)
	} else {
		log.Info("WAL archive caught up at stop", "took", time.Since(start).Round(time.Millisecond), "checkpoint_lsn", arch.Stats().CheckpointLSN)
	}
	return err
}

// startArchive starts archiving wal to --store under opts.Prefix (default
// wal/HOST/) and returns the archiver and what stops it and closes the
// store; without --store, nil and a no-op.
func startArchive(ctx context.Context, sf *storeflags.Flags, opts walarchive.Options, wal *walwriter.WAL) (*walarchive.Archiver, func(), error) {
	st, err := sf.OpenStore(ctx)
	if err != nil || st == nil {
		return nil, func() {}, err
	}
	prefix := opts.Prefix
	if prefix == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			st.Close()
			return nil, nil, fmt.Errorf("--archive-prefix: none given and no host name to default to: %v", err)
		}
		prefix = "wal/" + host + "/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	opts.Prefix = prefix
	arch, err := walarchive.Start(wal, st, opts)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("WAL archive: %w", err)
	}
	retain := "everything"
	if opts.RetainCheckpoints > 0 {
		retain = fmt.Sprintf("the newest %d checkpoints and those within %s", opts.RetainCheckpoints, opts.RetainAge)
	}
	if opts.Logger != nil {
		opts.Logger.Info("archiving the WAL", "store", st.String(), "prefix", prefix, "retain", retain)
	}
	return arch, func() { arch.Close(); st.Close() }, nil
}
