// Command windower is a window-query worker: it takes window jobs from the
// shared durable consumer on strata.jobs.window, one at a time and only when
// its --memory can hold the job's grant, evaluates the query over the job's
// input containers with package windower (sorting and spilling within the
// grant), writes the result as container Output of table ResultTable, and
// reports accepted, progress, done and failed events on strata.events.*.
//
// Usage:
//
//	windower [--nats URLS] [--data DIR] [--memory 512MiB] [--http :9103]
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
		fmt.Fprintln(os.Stderr, "windower:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var (
		common service.Common
		worker service.WorkerFlags
	)
	fs := flag.NewFlagSet("windower", flag.ContinueOnError)
	common.Register(fs, "windower", "127.0.0.1:9103")
	worker.Register(fs, "512MiB")
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
	log = log.With("service", "windower", "worker", common.Worker)
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

	r := service.NewRunner("windower", log)
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
	cons, err := js.Consumer(ctx, messages.StreamJobs, messages.ConsumerWindower)
	if err != nil {
		return fmt.Errorf("window consumer: %w", err)
	}
	wj := &windowJob{dataDir: common.DataDir, tempDir: tempDir, log: log}
	w := &service.JobWorker[*messages.WindowJob]{
		Consumer:   cons,
		JS:         js,
		Operation:  messages.OperationWindow,
		Worker:     common.Worker,
		Memory:     memory,
		Heartbeat:  worker.HeartbeatEvery(topo.JobAckWait),
		MaxDeliver: topo.JobMaxDeliver,
		StopGrace:  common.StopGrace,
		Log:        log,
		Rejecter:   service.NewRejecter("windower", js, log, r.Registry()),
		Metrics:    service.NewJobMetrics(r.Registry(), "windower"),
		New:        func() *messages.WindowJob { return new(messages.WindowJob) },
		Run:        wj.run,
	}
	r.AddContext(w.Serve)
	r.AddContext(func(ctx context.Context) error {
		return w.WatchMaxDeliveries(ctx, nc, messages.StreamJobs, messages.ConsumerWindower)
	})
	err = r.Run(common.HTTPAddr)
	if ferr := nc.FlushTimeout(10 * time.Second); ferr != nil {
		log.Warn("flush nats connection", "err", ferr)
	}
	return err
}
