package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/messages"
)

// mergeout runs one mergeout job against the data directory.
type mergeout struct {
	dataDir     string
	tempDir     string
	parallelism int
	// staleAfter is how old a temporary directory of this job's output
	// must be before it counts as left behind by a dead worker.
	staleAfter time.Duration
	log        *slog.Logger
	// depot, if set, holds the containers of a store (--store): inputs
	// are fetched into it, the output written there and uploaded.
	depot *depot.Depot
	// testHookRacing, if set, runs after the check for a committed output:
	// a test makes another delivery win the race there.
	testHookRacing func()

	rootOnce sync.Once
	root     *columnar.DataDir
	rootErr  error
}

// containerDir resolves a container of the job through the data
// directory's confined root: no name can reach outside it.
func (m *mergeout) containerDir(table, projection, id string) (string, error) {
	m.rootOnce.Do(func() {
		if m.depot != nil {
			m.root = m.depot.Dir()
			return
		}
		m.root, m.rootErr = columnar.OpenDataDir(m.dataDir)
	})
	if m.rootErr != nil {
		return "", m.rootErr
	}
	dir, err := m.root.ContainerDir(table, projection, id)
	return dir, err // a name outside the root is permanent (engineerr)
}

// run merges the job's inputs into its output container. The job ID names
// the output, so a job whose output is already committed (a redelivery after
// a crash between commit and ack) is reported done without merging again.
// Errors are returned as the engines give them; engineerr.Permanent classes
// them for the job worker.
func (m *mergeout) run(ctx context.Context, job *messages.MergeoutJob, progress *service.Progress) (out service.Outcome, err error) {
	outDir, err := m.containerDir(job.Table, job.Projection, job.Output)
	if err != nil {
		return service.Outcome{}, err
	}
	defer func() {
		// Two deliveries of one job can run at once (a lease lost across
		// a NATS restart): the first to commit wins and the scheduler
		// retires the inputs, so the other then fails reading them. That
		// job succeeded: report the committed output, not the failure.
		if err != nil {
			if done, ok, _ := m.existing(ctx, job, outDir); ok {
				out, err = done, nil
			}
		}
	}()
	if out, ok, err := m.existing(ctx, job, outDir); ok || err != nil {
		return out, err
	}
	if m.testHookRacing != nil {
		m.testHookRacing()
	}
	m.removeTemp(outDir, m.staleAfter)
	inputs, release, err := m.inputs(ctx, job)
	if err != nil {
		// An input gone (ErrNotFound) with no output committed cannot be
		// merged by any retry: that error is permanent.
		return service.Outcome{}, err
	}
	defer release()
	var rowsTotal int64
	prefetch, stopPrefetch := context.WithCancel(ctx)
	defer stopPrefetch()
	for i, src := range inputs {
		if m.depot != nil {
			// A mergeout reads every column: fetch them while it merges.
			m.depot.Prefetch(prefetch, src)
		}
		man, err := columnar.ReadSourceManifest(src)
		if err != nil {
			return service.Outcome{}, fmt.Errorf("input %d: %w", i, err)
		}
		rowsTotal += man.Rows
	}
	stats, err := merger.MergeSources(ctx, inputs, outDir, merger.Options{
		Grant:       job.Grant.Bytes,
		TempDir:     m.tempDir,
		Logger:      m.log.With("job", job.JobID),
		Parallelism: m.parallelism,
		Table:       job.Table,
		Projection:  job.Projection,
		ID:          job.Output,
		// A keyed table's merge of every container drops the markers
		// of changes every one of which is applied (the scheduler's).
		DropMarkersThrough: job.DropMarkersThrough,
		// And writes the versions at or below it as 0 (freezing), so
		// a folded table is as small as a fresh load; the scheduler
		// refuses any later change at or below it.
		FreezeThrough: job.DropMarkersThrough,
		Progress: func(done, total int64) {
			if total > 0 {
				progress.Report(done*rowsTotal/total, rowsTotal)
			}
		},
	})
	if errors.Is(err, merger.ErrOutputExists) {
		// Another delivery of this job committed it first.
		if out, ok, err := m.existing(ctx, job, outDir); ok || err != nil {
			return out, err
		}
	}
	if err != nil {
		return service.Outcome{}, err
	}
	man, err := columnar.ReadManifest(outDir)
	if err != nil {
		return service.Outcome{}, fmt.Errorf("read committed output: %w", err)
	}
	m.removeTemp(outDir, 0)
	if m.depot != nil {
		theirs, err := m.depot.Publish(ctx, job.Table, job.Projection, job.Output)
		if errors.Is(err, columnar.ErrExists) { // another delivery uploaded it first
			return existingOutcome(theirs), nil
		}
		if err != nil {
			return service.Outcome{}, fmt.Errorf("upload output: %w", err)
		}
	}
	return service.Outcome{
		Output:        containerRef(man),
		Plan:          stats.Plan,
		RowsTotal:     stats.Rows,
		Bytes:         stats.BytesOut,
		PeakBytes:     stats.PeakBytes,
		SpilledBytes:  stats.SpilledBytes,
		BlocksFetched: stats.BlocksFetched,
		BytesFetched:  stats.BytesFetched,
	}, nil
}

// existing reports a committed output container. A directory at the
// output's name with no valid manifest cannot come from a commit (commits
// rename a complete directory into place) and is reported as corrupt
// (permanent); an error reading it is retried.
//
// With a store, committed means in the store; an output committed in the
// depot but not uploaded (a worker killed between the two) is uploaded now.
func (m *mergeout) existing(ctx context.Context, job *messages.MergeoutJob, outDir string) (service.Outcome, bool, error) {
	if m.depot != nil {
		man, err := store.ReadManifest(ctx, m.depot.Store(), job.Table, job.Projection, job.Output)
		if err == nil {
			m.removeTemp(outDir, 0)
			m.log.Info("output already in the store; not merging again", "job", job.JobID, "output", outDir)
			return existingOutcome(man), true, nil
		}
		if !errors.Is(err, columnar.ErrNotFound) {
			return service.Outcome{}, false, fmt.Errorf("output: %w", err)
		}
		if _, err := columnar.ReadManifest(outDir); err != nil {
			return service.Outcome{}, false, nil // the local copy, if any, is checked by the merge's commit
		}
		man, err = m.depot.Publish(ctx, job.Table, job.Projection, job.Output)
		if err != nil && !errors.Is(err, columnar.ErrExists) {
			return service.Outcome{}, false, fmt.Errorf("upload output: %w", err)
		}
		m.log.Info("output committed here before; uploaded, not merging again", "job", job.JobID, "output", outDir)
		return existingOutcome(man), true, nil
	}
	man, err := columnar.ReadManifest(outDir)
	switch {
	case err == nil:
		m.removeTemp(outDir, 0)
		m.log.Info("output already committed; not merging again", "job", job.JobID, "output", outDir)
		return existingOutcome(man), true, nil
	case errors.Is(err, columnar.ErrNotFound):
		return service.Outcome{}, false, nil
	default:
		return service.Outcome{}, false, fmt.Errorf("output %s: %w", outDir, err)
	}
}

func existingOutcome(man *columnar.Manifest) service.Outcome {
	return service.Outcome{Output: containerRef(man), RowsTotal: man.Rows, Bytes: man.CompressedBytes(), Existing: true}
}

// inputs returns the Sources of the job's input containers: their
// directories in the data directory, or with a store the depot's
// (acquired together), which read what the depot does not hold from the
// store and keep the containers until release.
func (m *mergeout) inputs(ctx context.Context, job *messages.MergeoutJob) ([]columnar.Source, func(), error) {
	if m.depot != nil {
		refs := make([]depot.Ref, len(job.Inputs))
		for i, in := range job.Inputs {
			refs[i] = depot.Ref{Table: job.Table, Projection: job.Projection, ID: in.ID}
		}
		srcs, release, err := m.depot.AcquireAll(ctx, refs)
		if err != nil {
			return nil, nil, fmt.Errorf("inputs: %w", err)
		}
		return srcs, release, nil
	}
	srcs := make([]columnar.Source, len(job.Inputs))
	for i, in := range job.Inputs {
		dir, err := m.containerDir(job.Table, job.Projection, in.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("input %d: %w", i, err)
		}
		srcs[i] = columnar.DirSource(dir)
	}
	return srcs, func() {}, nil
}

func containerRef(m *columnar.Manifest) *messages.ContainerRef {
	return &messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows, Bytes: m.CompressedBytes()}
}

// removeTemp removes temporary directories of outDir that a worker killed
// mid-job left behind. Before the merge only directories older than
// minAge go: a younger one may belong to a worker still running this job
// after losing its lease. Once the output is committed every one goes; a
// worker still writing one fails, and its retry finds the output committed.
func (m *mergeout) removeTemp(outDir string, minAge time.Duration) {
	matches, err := columnar.TempDirs(outDir)
	if err != nil {
		m.log.Warn("list temporary containers", "err", err)
		return
	}
	for _, dir := range matches {
		fi, err := os.Stat(dir)
		if err != nil || time.Since(fi.ModTime()) < minAge {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			m.log.Warn("remove stale temporary container", "dir", dir, "err", err)
			continue
		}
		m.log.Info("removed stale temporary container", "dir", dir)
	}
}
