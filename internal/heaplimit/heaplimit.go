// Package heaplimit sets the Go collector of a process whose memory is a
// grant: a merger or windower worker, or a benchmark of their engines.
//
// Under the runtime's default (GOGC=100) the collector runs each time the
// heap doubles from what the last cycle left live. A job's heap starts
// near empty and grows in large blocks toward its grant, so the collector
// runs four or five times while a job loads its input, each cycle marking
// what is loaded so far (a string column is a pointer a row), with write
// barriers on and the job's own goroutines drafted to assist. Between jobs
// the scavenger returns the freed pages to the kernel, and the next job
// faults them in again. On the window suite at a million rows this was a
// third to a half of a query's time.
//
// A worker's memory is known: it is the grant it accepts jobs for. Apply
// turns the proportional trigger off (as GOGC=off) and sets the runtime's
// soft memory limit (as GOMEMLIMIT) to what the process holds when Apply
// is called plus Limit(grant): the grant and half as much again, at least
// 64MiB more. Below the limit the collector does not run and freed pages
// stay with the process. At it, the collector runs as it must: for a job
// at its full grant, every half grant allocated (as GOGC=50 would), where
// the default let the heap reach twice the grant. Much higher limits lose
// on jobs that stream (a spilling window query allocates each chunk's
// buffers anew): the memory they touch outgrows the cache, and fresh pages
// cost a fault each; on the window suite's spilling queries at 10M rows a
// limit of twice the grant was no faster than the default, the grant and
// 64MiB more the fastest. Should what is live ever pass the limit, the
// runtime caps the collector's share of the CPU.
//
// Between jobs the worker collects once (Setting.Collect): what the job allocated
// is garbage then, and the cycle marks only what the worker keeps between
// jobs. The pages it frees stay with the process below the limit, so the
// next job reuses the pages the last one faulted in, and runs without a
// collection unless it nears the limit. Without it, jobs run back to back
// walk through fresh memory up to the limit before the first collection:
// on a 2-core VM a windower's first ten jobs of a million rows ran 2x to
// 3x slower than the default's, each page a fault, and later jobs no
// faster than the default's.
//
// A job that allocated little needs no collection after it: a cycle costs
// half a millisecond or more however little there is to free, a third of
// a short query's time, while the few megabytes it would free stay in the
// caches for the next job beside the ones it allocates. Collect collects
// only once CollectAbove bytes were allocated since the last cycle. With
// the windower's columns borrowed from a pool (package bufpool), a query
// over a million rows allocates a few megabytes beside its columns, and
// its worker collects every few jobs instead of after each.
//
// An operator's GOGC or GOMEMLIMIT wins: with either in the environment,
// Apply leaves the collector as the environment set it.
package heaplimit

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// minHeadroom is the least Limit adds to the grant: the runtime's own
// memory and what a worker holds beside its job (connections, metrics,
// buffers).
const minHeadroom = 64 << 20

// Limit is the memory a process that runs jobs of the given grant may
// reach before its collector runs: the grant plus max(grant/2, 64MiB).
func Limit(grant int64) int64 {
	if grant <= 0 {
		return minHeadroom
	}
	headroom := max(grant/2, minHeadroom)
	if grant > math.MaxInt64-headroom {
		return math.MaxInt64
	}
	return grant + headroom
}

// Setting is the collector Apply chose, for a worker's log.
type Setting struct {
	// Limit is the soft memory limit in bytes; 0 when the environment
	// chose (FromEnv).
	Limit int64
	// FromEnv names the variable that made Apply leave the collector
	// alone ("GOGC" or "GOMEMLIMIT"), or is empty.
	FromEnv string
}

// Apply sets the collector for jobs of the given grant, as the package
// doc says, and returns the setting and a function that restores the
// collector as it was. It collects once first, so that what the process
// holds is measured without its garbage.
func Apply(grant int64) (Setting, func()) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, set := os.LookupEnv(env); set {
			return Setting{FromEnv: env}, func() {}
		}
	}
	runtime.GC()
	held := Held()
	limit := Limit(grant)
	if held < math.MaxInt64-limit {
		limit += held
	}
	prevLimit := debug.SetMemoryLimit(limit)
	prevPercent := debug.SetGCPercent(-1)
	return Setting{Limit: limit}, func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}
}

// CollectAbove is how much must have been allocated since the last
// collection for Collect to collect (see the package doc).
const CollectAbove = 16 << 20

// Collect collects once, as a job ends (see the package doc), when Apply
// set the collector and CollectAbove bytes or more were allocated since
// the last cycle; when the environment chose, it does nothing, as the
// runtime's default would not. It returns when the cycle is done.
func (s Setting) Collect() {
	if s.Limit > 0 && allocatedSinceCollection() >= CollectAbove {
		runtime.GC()
	}
}

// allocatedSinceCollection is about how many bytes were allocated since
// the last cycle: the heap's objects, live or not yet freed, less those
// the last cycle marked live.
func allocatedSinceCollection() int64 {
	return difference("/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes")
}

// Held is the memory the runtime counts against its soft limit: every
// byte it has mapped, less the heap pages it has returned to the kernel.
func Held() int64 {
	return difference("/memory/classes/total:bytes", "/memory/classes/heap/released:bytes")
}

// difference reads the runtime's metrics a and b, both in bytes, and
// returns a less b.
func difference(a, b string) int64 {
	s := []metrics.Sample{{Name: a}, {Name: b}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}
