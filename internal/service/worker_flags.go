package service

import (
	"flag"
	"fmt"
	"time"

	"github.com/strata-db/strata/internal/bytesize"
)

// WorkerFlags are the flags of a job worker (merger, windower), beside Common.
type WorkerFlags struct {
	Memory    string
	TempDir   string
	Heartbeat time.Duration
}

// Register adds the worker flags to fs.
func (w *WorkerFlags) Register(fs *flag.FlagSet, defaultMemory string) {
	fs.StringVar(&w.Memory, "memory", defaultMemory, "memory this worker grants to its job (e.g. 512MiB); larger grants go to other workers")
	fs.StringVar(&w.TempDir, "temp", "", "directory for spill files (default: DATA/tmp)")
	fs.DurationVar(&w.Heartbeat, "heartbeat", 0, "how often a running job's lease is extended (default: a third of --job-ack-wait)")
}

// MemoryBytes parses --memory.
func (w *WorkerFlags) MemoryBytes() (int64, error) {
	n, err := bytesize.Parse(w.Memory)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--memory %q: want a positive size such as 512MiB", w.Memory)
	}
	return n, nil
}

// HeartbeatEvery returns --heartbeat or a third of the job lease.
func (w *WorkerFlags) HeartbeatEvery(ackWait time.Duration) time.Duration {
	if w.Heartbeat > 0 {
		return w.Heartbeat
	}
	return max(ackWait/3, 100*time.Millisecond)
}
