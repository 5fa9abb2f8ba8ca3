// Command merger is a mergeout worker: it takes mergeout jobs from the
// shared durable consumer on strata.jobs.mergeout, one at a time and only
// when its --memory can hold the job's grant, merges the job's input
// containers into its output container with package merger, and reports
// accepted, progress, done and failed events on strata.events.*. Start as
// many as you like, on any hosts that share the data directory.
//
// Usage:
//
//	merger [--nats URLS] [--data DIR] [--memory 512MiB] [--http :9102]
//
// Every flag has an environment variable: --memory is STRATA_MEMORY.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "merger:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var (
		common service.Common
		worker service.WorkerFlags
	)
	fs := flag.NewFlagSet("merger", flag.ContinueOnError)
	common.Register(fs, "merger", "127.0.0.1:9102")
	worker.Register(fs, "512MiB")
	parallelism := fs.Int("parallelism", 0, "columns gathered at once (default: GOMAXPROCS; the grant may allow fewer)")
	if err := service.Parse(fs, args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	log, err := service.NewLogger(os.Stderr, common.LogFormat, common.LogLevel)
	if err != nil {
		return err
	}
	log = log.With("service", "merger", "worker", common.Worker)
	memory, err := worker.MemoryBytes()
	if err != nil {
		return err
	}
	tempDir := worker.TempDir
	if tempDir == "" {
		tempDir = filepath.Join(common.DataDir, "tmp")
	}
	if err := os.MkdirAll(tempDir, 0o755); err != nil {
		return fmt.Errorf("temp directory: %w", err)
	}

	r := service.NewRunner("merger", log)
	nc, js, err := common.ConnectNATS(log, r)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topo := common.Topology()
	if err := topo.Ensure(ctx, js); err != nil {
		return err
	}
	cons, err := js.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err != nil {
		return fmt.Errorf("mergeout consumer: %w", err)
	}

	m := &mergeout{dataDir: common.DataDir, tempDir: tempDir, parallelism: *parallelism, staleAfter: topo.JobAckWait, log: log}
	w := &service.JobWorker[*messages.MergeoutJob]{
		Consumer:   cons,
		JS:         js,
		Operation:  messages.OperationMergeout,
		Worker:     common.Worker,
		Memory:     memory,
		Heartbeat:  worker.HeartbeatEvery(topo.JobAckWait),
		MaxDeliver: topo.JobMaxDeliver,
		StopGrace:  common.StopGrace,
		Log:        log,
		Rejecter:   service.NewRejecter("merger", js, log, r.Registry()),
		Metrics:    service.NewJobMetrics(r.Registry(), "merger"),
		New:        func() *messages.MergeoutJob { return new(messages.MergeoutJob) },
		Run:        m.run,
	}
	r.AddContext(w.Serve)
	r.AddContext(func(ctx context.Context) error {
		return w.WatchMaxDeliveries(ctx, nc, messages.StreamJobs, messages.ConsumerMerger)
	})
	err = r.Run(common.HTTPAddr)
	if ferr := nc.FlushTimeout(10 * time.Second); ferr != nil {
		log.Warn("flush nats connection", "err", ferr)
	}
	return err
}
