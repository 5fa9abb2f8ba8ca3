// Package heapbudget sizes the Go collector to the memory grants of the
// jobs a process runs.
//
// A job's live memory is bounded by its grant (columnar.Budget counts
// it), but with the collector's default trigger (GOGC=100) a job that
// streams through much more memory than it holds (a spilling window
// query decodes, deals and writes every row) collects each time its heap
// doubles over what is live, and between collections the runtime gives
// freed pages back to the kernel, which faults them in again when the
// job takes them next. Both cost: over 10M rows under a 256MiB grant,
// marking took a third of a string query's CPU, and on a virtual machine
// a page fault costs more than the work done on the page.
//
// While at least one job runs (Job until its done), the proportional
// trigger is off and the heap may grow to what was live when the first
// job started, plus twice the running jobs' grants, plus 256MiB: the
// collector runs when garbage reaches about the grants, and pages stay
// mapped up to that limit. When the last job ends, the settings before
// it come back, so the next allocation collects what the jobs left and
// an idle worker shrinks as before. An operator who sets GOGC or
// GOMEMLIMIT keeps them: Job then changes nothing.
package heapbudget

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// headroom is the heap allowed beyond the live memory and twice the grants:
// the runtime's and the process's own memory outside any grant.
const headroom = 256 << 20

var (
	mu          sync.Mutex
	running     int   // jobs running
	grants      int64 // their grants
	base        int64 // the live heap when the first of them started
	oldPct      int   // the settings before the first started
	oldLimit    int64
	operatorSet = os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != ""
)

// Job sizes the collector for a job of grant bytes until the returned
// done is called (once).
func Job(grant int64) (done func()) {
	if operatorSet || grant <= 0 {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	if running == 0 {
		base = liveHeap()
		oldPct = debug.SetGCPercent(-1)
		oldLimit = debug.SetMemoryLimit(-1)
	}
	running++
	grants += grant
	debug.SetMemoryLimit(base + 2*grants + headroom)
	var once sync.Once
	return func() { once.Do(func() { end(grant) }) }
}

func end(grant int64) {
	mu.Lock()
	defer mu.Unlock()
	running--
	grants -= grant
	if running > 0 {
		debug.SetMemoryLimit(base + 2*grants + headroom)
		return
	}
	debug.SetMemoryLimit(oldLimit)
	debug.SetGCPercent(oldPct)
}

// liveHeap is the heap the last collection found live.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
