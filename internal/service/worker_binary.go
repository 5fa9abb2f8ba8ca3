package service

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/strata-db/strata/internal/heaplimit"
	"github.com/strata-db/strata/messages"
)

// flushTimeout bounds the flush of a worker's last events and acks at stop.
const flushTimeout = 10 * time.Second

// Worker is a job worker binary (merger, windower): a Binary with the
// WorkerFlags, which after Start also knows its memory and spill directory.
type Worker struct {
	*Binary
	flags WorkerFlags

	Memory  int64  // bytes this worker may grant to its job (--memory)
	TempDir string // this process's spill directory, under --temp (default DATA/tmp); see SpillDir
	spill   *SpillDir

	// Beside, if set before Start, returns the memory the worker keeps
	// beside its jobs' grants (a windower's block cache), from its own
	// flags, which Start has parsed by then. Start keeps it in
	// BesideBytes and sets the collector for Memory and that much more.
	Beside      func() (int64, error)
	BesideBytes int64

	// Collector is how Start set the Go collector for jobs of Memory
	// (package heaplimit); restoreCollector undoes it at Close.
	Collector        heaplimit.Setting
	restoreCollector func()
}

// NewWorker returns a Worker whose flag set holds the Common and the
// WorkerFlags, and whose logs name the worker.
func NewWorker(name, defaultHTTP, defaultMemory string) *Worker {
	w := &Worker{Binary: NewBinary(name, defaultHTTP)}
	w.LogWorker = true
	w.flags.Register(w.Flags, defaultMemory)
	return w
}

// Start is Binary.Start followed by parsing --memory, setting the Go
// collector for jobs of that grant and the memory Beside gives
// (heaplimit.Apply: no collection below 1.5 times their sum, unless GOGC or GOMEMLIMIT is set; RunJobs then
// collects after a job once the jobs since the last cycle allocated
// heaplimit.CollectAbove, Collector.Collect), and creating the
// spill directory.
func (w *Worker) Start(args []string) error {
	if err := w.Binary.Start(args); err != nil {
		return err
	}
	memory, err := w.flags.MemoryBytes()
	if err != nil {
		return err
	}
	w.Memory = memory
	if w.Beside != nil {
		if w.BesideBytes, err = w.Beside(); err != nil {
			return err
		}
	}
	root := w.flags.TempDir
	if root == "" {
		root = filepath.Join(w.DataDir, "tmp")
	}
	spill, err := OpenSpillDir(root, w.Name, w.Log)
	if err != nil {
		return err
	}
	w.spill, w.TempDir = spill, spill.Path
	w.Collector, w.restoreCollector = heaplimit.Apply(memory + w.BesideBytes)
	if w.Collector.FromEnv != "" {
		w.Log.Info("go collector left to the environment", "variable", w.Collector.FromEnv)
	} else {
		w.Log.Info("go collector runs at the memory limit and after jobs that allocated enough", "memory_limit_bytes", w.Collector.Limit, "memory", memory, "beside_jobs", w.BesideBytes, "collect_above_bytes", heaplimit.CollectAbove)
	}
	return nil
}

// Close restores the Go collector and removes the worker's spill directory.
func (w *Worker) Close() error {
	if w.restoreCollector != nil {
		w.restoreCollector()
		w.restoreCollector = nil
	}
	if w.spill == nil {
		return nil
	}
	return w.spill.Close()
}

// JobSpec is what a job worker binary says about its jobs.
type JobSpec[J Job] struct {
	Operation string // messages.OperationMergeout or messages.OperationWindow
	Consumer  string // the shared durable consumer on messages.StreamJobs
	New       func() J
	Run       func(ctx context.Context, job J, progress *Progress) (Outcome, error)
	// Permanent classes Run's errors (see JobWorker.Permanent).
	Permanent func(error) bool
}

// RunJobs connects w to NATS and runs a JobWorker for spec on the shared
// consumer, with its dead-letter rejecter, job metrics and max-deliveries
// watch, until a signal stops it; then it flushes the last events.
func RunJobs[J Job](w *Worker, spec JobSpec[J]) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Connect(ctx); err != nil {
		return err
	}
	defer w.NC.Close()
	// However long the scheduler takes to make it: a worker does not exit
	// because it started first.
	cons, err := w.WaitConsumer(context.WithoutCancel(ctx), messages.StreamJobs, spec.Consumer)
	if err != nil {
		return fmt.Errorf("%s consumer: %w", spec.Operation, err)
	}
	topo := w.Topology()
	jw := &JobWorker[J]{
		Consumer:   cons,
		JS:         w.JS,
		Operation:  spec.Operation,
		Worker:     w.Worker,
		Memory:     w.Memory,
		Heartbeat:  w.flags.HeartbeatEvery(topo.JobAckWait),
		MaxDeliver: topo.JobMaxDeliver,
		StopGrace:  w.StopGrace,
		Log:        w.Log,
		Rejecter:   NewRejecter(w.Name, w.JS, w.Log, w.Runner.Registry(), jobSubject(spec.Operation)),
		Metrics:    NewJobMetrics(w.Runner.Registry(), w.Name),
		New:        spec.New,
		Run:        spec.Run,
		Permanent:  spec.Permanent,
		Cancels:    NewCancels(w.Log),
	}
	jw.AfterJob = w.Collector.Collect
	// The scheduler's cancel notices: core NATS, so subscribed before the
	// first job is pulled.
	cancelSub, err := jw.Cancels.Subscribe(w.NC)
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", messages.SubjectCancel, err)
	}
	defer cancelSub.Unsubscribe()
	w.Runner.AddContext(jw.Serve)
	w.Runner.AddContext(func(ctx context.Context) error {
		return jw.WatchMaxDeliveries(ctx, w.NC, messages.StreamJobs, spec.Consumer)
	})
	err = w.Run()
	if ferr := w.NC.FlushTimeout(flushTimeout); ferr != nil {
		w.Log.Warn("flush nats connection", "err", ferr)
	}
	if cerr := w.Close(); cerr != nil {
		w.Log.Warn("remove spill directory", "dir", w.TempDir, "err", cerr)
	}
	return err
}

// jobSubject is the subject jobs of operation are published on.
func jobSubject(operation string) string {
	if operation == messages.OperationWindow {
		return messages.SubjectJobWindow
	}
	return messages.SubjectJobMergeout
}
