package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/strata-db/strata/internal/heaplimit"
)

// measure is one system's figure for one case: the fastest of Runs timed
// runs, or why there is no figure.
type measure struct {
	Seconds  float64
	Runs     int
	TimedOut bool   // the run hit the time limit: Seconds is the limit, a lower bound
	Skipped  string // the system could not run here (missing peer, not in this build)
	Err      string // it ran and failed
	Note     string // e.g. peak memory, spill
	// CollectSeconds is the part of Seconds that the collection after the
	// run took: the one a strata worker makes between jobs, timed with
	// strata's runs (bestOfUnderGrant); 0 for the peers.
	CollectSeconds float64 `json:",omitempty"`
}

// The cases bestOf runs more times when asked (short): those whose
// fastest run is under shortRun, for up to shortRunTime and shortRunsMost
// runs.
const (
	shortRun      = 20 * time.Millisecond
	shortRunTime  = 300 * time.Millisecond
	shortRunsMost = 30
)

// ok reports whether m has a figure: a time, or a lower bound when it timed out.
func (m measure) ok() bool { return m.Skipped == "" && m.Err == "" && (m.Runs > 0 || m.TimedOut) }

// errTimedOut marks a run stopped by its time limit (the caller's deadline or,
// for PostgreSQL, statement_timeout).
var errTimedOut = errors.New("time limit reached")

func skipped(reason string) measure { return measure{Skipped: reason} }

func failed(err error) measure { return measure{Err: err.Error()} }

// bestOfUnderGrant is bestOf for one of strata's engines given a grant:
// its runs are timed with the Go collector as a worker of that grant sets
// it (heaplimit.Apply, unless GOGC or GOMEMLIMIT is in the environment),
// each run ending with the collection the worker makes after a job
// (Setting.Collect, timed with the run, and its share of the fastest run
// in CollectSeconds), and the collector is restored after them. A grant
// of 0 is bestOf.
func bestOfUnderGrant(ctx context.Context, grant int64, runs int, short bool, limit time.Duration, fn func(context.Context) error) measure {
	if grant <= 0 {
		return bestOf(ctx, runs, short, limit, fn)
	}
	collector, restore := heaplimit.Apply(grant)
	defer restore()
	// The collection of the fastest run, as bestOf keeps that run.
	fastest, collect := math.Inf(1), 0.0
	m := bestOf(ctx, runs, short, limit, func(ctx context.Context) error {
		start := time.Now()
		defer func() {
			c := time.Now()
			collector.Collect()
			if t := time.Since(start).Seconds(); t < fastest {
				fastest, collect = t, time.Since(c).Seconds()
			}
		}()
		return fn(ctx)
	})
	if collector.Limit > 0 && m.ok() && !m.TimedOut {
		// (With the environment's collector, Collect does nothing.)
		m.CollectSeconds = collect
	}
	return m
}

// bestOf runs fn runs times and keeps the fastest run: on a shared two-core
// machine the minimum is the figure least disturbed by other work. With
// short, a case whose fastest run so far is under shortRun runs again, as
// many times as fit in shortRunTime, up to shortRunsMost runs in all: a
// pause of a millisecond (another process, the host) is a third of such a
// run, and three runs often all have one. A run longer than limit (0: no
// limit) is stopped and the measure records the limit as a lower bound;
// it is not repeated.
func bestOf(ctx context.Context, runs int, short bool, limit time.Duration, fn func(context.Context) error) measure {
	m := measure{}
	began := time.Now()
	for r := 0; r < runs || (short && r < shortRunsMost && m.Seconds < shortRun.Seconds() && time.Since(began) < shortRunTime); r++ {
		if err := ctx.Err(); err != nil {
			return failed(err)
		}
		runCtx, cancel := ctx, context.CancelFunc(func() {})
		if limit > 0 {
			runCtx, cancel = context.WithTimeout(ctx, limit)
		}
		start := time.Now()
		err := fn(runCtx)
		s := time.Since(start).Seconds()
		cancel()
		if err != nil {
			if ctx.Err() == nil && (errors.Is(err, errTimedOut) || errors.Is(err, context.DeadlineExceeded) || (limit > 0 && s >= limit.Seconds())) {
				return measure{Seconds: limit.Seconds(), TimedOut: true, Note: fmt.Sprintf("stopped after %s", limit)}
			}
			return failed(err)
		}
		if m.Runs == 0 || s < m.Seconds {
			m.Seconds = s
		}
		m.Runs++
	}
	return m
}

// ratio is a/b when both are figures, else 0. When a timed out it is a
// lower bound (see ratioText).
func ratio(a, b measure) float64 {
	if !a.ok() || !b.ok() || b.Seconds == 0 {
		return 0
	}
	return a.Seconds / b.Seconds
}

// ratioText renders ratio(a, b), marking a lower bound with ">".
func ratioText(a, b measure) string {
	r := ratio(a, b)
	if r == 0 || b.TimedOut {
		return "-"
	}
	if a.TimedOut {
		return "> " + formatRatio(r)
	}
	return formatRatio(r)
}

// profiled runs fn under a CPU profile written to dir/name.pprof when dir is
// set and no profile of that name exists yet (so only a case's first run is
// profiled).
func profiled(dir, name string, fn func() error) error {
	if dir == "" {
		return fn()
	}
	path := filepath.Join(dir, name+".pprof")
	if _, err := os.Stat(path); err == nil {
		return fn()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return fmt.Errorf("cpu profile %s: %w", path, err)
	}
	defer pprof.StopCPUProfile()
	return fn()
}
