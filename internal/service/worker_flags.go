package service

import (
	"flag"
	"fmt"
	"time"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/natsutil"
)

// WorkerFlags are the flags of a job worker (merger, windower).
type WorkerFlags struct {
	Memory        string
	TempDir       string
	Heartbeat     time.Duration
	JobAckWait    time.Duration
	JobMaxDeliver int
}

// Register adds the worker flags to fs.
func (w *WorkerFlags) Register(fs *flag.FlagSet, defaultMemory string) {
	fs.StringVar(&w.Memory, "memory", defaultMemory, "memory this worker grants to its job (e.g. 512MiB); larger grants go to other workers")
	fs.StringVar(&w.TempDir, "temp", "", "directory for spill files (default: DATA/tmp)")
	fs.DurationVar(&w.Heartbeat, "heartbeat", 0, "how often a running job's lease is extended (default: a third of the ack wait)")
	fs.DurationVar(&w.JobAckWait, "job-ack-wait", natsutil.DefaultTopology().JobAckWait, "lease of a job: redelivered if not extended within it")
	fs.IntVar(&w.JobMaxDeliver, "job-max-deliver", natsutil.DefaultTopology().JobMaxDeliver, "deliveries of a job before it fails for good")
}

// MemoryBytes parses --memory.
func (w *WorkerFlags) MemoryBytes() (int64, error) {
	n, err := bytesize.Parse(w.Memory)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--memory %q: want a positive size such as 512MiB", w.Memory)
	}
	return n, nil
}

// Topology returns the default topology with the worker's lease settings.
func (w *WorkerFlags) Topology() natsutil.Topology {
	t := natsutil.DefaultTopology()
	t.JobAckWait = w.JobAckWait
	t.JobMaxDeliver = w.JobMaxDeliver
	return t
}

// HeartbeatEvery returns --heartbeat or a third of the ack wait.
func (w *WorkerFlags) HeartbeatEvery() time.Duration {
	if w.Heartbeat > 0 {
		return w.Heartbeat
	}
	return max(w.JobAckWait/3, 100*time.Millisecond)
}
