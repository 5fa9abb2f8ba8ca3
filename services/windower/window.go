package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower"
)

// ResultProjection is the projection name of window result containers:
// DATA/<result table>/result/<output>/.
const ResultProjection = messages.ResultProjection

// windowJob runs one window job against the data directory.
type windowJob struct {
	dataDir string
	tempDir string
	threads int // windower.Options.Threads (0: GOMAXPROCS)
	log     *slog.Logger
	// depot, if set, holds the containers of a store (--store): inputs
	// are fetched into it, the result written there and uploaded.
	depot *depot.Depot
	// superseded is strata_table_superseded_fraction: by table, the
	// share of the rows the last query read that newer changes replaced
	// or deleted (0 for an append-only table).
	superseded *prometheus.GaugeVec
	// cache, if set, is the worker's block cache (--block-cache).
	cache *columnar.BlockCache
	// pool, if set, is the worker's vector pool (--vector-pool).
	pool *bufpool.Pool

	rootOnce sync.Once
	root     *columnar.DataDir
	rootErr  error
}

// containerDir resolves a container through the data directory's confined
// root: no name in a job can reach outside it.
func (w *windowJob) containerDir(table, projection, id string) (string, error) {
	w.rootOnce.Do(func() {
		if w.depot != nil {
			w.root = w.depot.Dir()
			return
		}
		w.root, w.rootErr = columnar.OpenDataDir(w.dataDir)
	})
	if w.rootErr != nil {
		return "", w.rootErr
	}
	dir, err := w.root.ContainerDir(table, projection, id)
	return dir, err // a name outside the root is permanent (engineerr)
}

// run evaluates the job's query and commits the result container. The job
// ID names the output, so a redelivered job whose result is committed is
// reported done without evaluating again. Errors are returned as the engines
// give them; engineerr.Permanent classes them for the job worker.
func (w *windowJob) run(ctx context.Context, job *messages.WindowJob, progress *service.Progress) (service.Outcome, error) {
	outDir, err := w.containerDir(job.ResultTable, ResultProjection, job.Output)
	if err != nil {
		return service.Outcome{}, err
	}
	if out, ok, err := w.existing(ctx, job, outDir); ok || err != nil {
		return out, err
	}
	var srcs []columnar.Source
	if w.depot != nil {
		// Validate has checked every input is of the query's table.
		refs := make([]depot.Ref, len(job.Inputs))
		for i, in := range job.Inputs {
			refs[i] = depot.Ref{Table: job.Query.Table, Projection: in.Projection, ID: in.ID}
		}
		acquired, release, err := w.depot.AcquireAll(ctx, refs)
		if err != nil {
			return service.Outcome{}, err
		}
		defer release()
		srcs = acquired
	} else {
		srcs = make([]columnar.Source, len(job.Inputs))
		for i, in := range job.Inputs {
			dir, err := w.containerDir(job.Query.Table, in.Projection, in.ID)
			if err != nil {
				return service.Outcome{}, err
			}
			srcs[i] = columnar.DirSource(dir)
		}
	}
	opts := windower.Options{
		Grant: job.Grant.Bytes, TempDir: w.tempDir, Threads: w.threads, Logger: w.log.With("job", job.JobID),
		BlockCache: w.cache, VectorPool: w.pool,
	}
	if w.depot != nil {
		// Fetch the columns the query reads, adjacent ones together, while
		// it reads them; stopped when the job ends.
		prefetch, stopPrefetch := context.WithCancel(ctx)
		defer stopPrefetch()
		opts.Prefetch = func(src columnar.Source, columns []string) {
			w.depot.PrefetchColumns(prefetch, src, columns)
		}
	}
	res, err := windower.RunSources(ctx, &job.Query, srcs, opts)
	if err != nil {
		return service.Outcome{}, err
	}
	defer res.Close()
	stats := res.Stats()
	cw, err := columnar.Create(outDir, columnar.WriterOptions{
		Table: job.ResultTable, Projection: ResultProjection, ID: job.Output, Schema: res.Schema(),
	})
	if err != nil {
		return service.Outcome{}, fmt.Errorf("create result %s: %w", outDir, err)
	}
	var written int64
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = cw.Write(rec)
			written += rec.NumRows()
			rec.Release()
		}
		if err != nil {
			cw.Abort()
			return service.Outcome{}, fmt.Errorf("write result %s: %w", outDir, err)
		}
		progress.Report(written, stats.Rows)
	}
	man, err := cw.Commit()
	if err != nil {
		cw.Abort()
		if errors.Is(err, columnar.ErrExists) { // another delivery committed it first
			if out, ok, rerr := w.existing(ctx, job, outDir); ok && rerr == nil {
				return out, nil
			}
		}
		return service.Outcome{}, fmt.Errorf("commit result %s: %w", outDir, err)
	}
	if w.depot != nil {
		theirs, err := w.depot.Publish(ctx, job.ResultTable, ResultProjection, job.Output)
		if errors.Is(err, columnar.ErrExists) { // another delivery uploaded it first
			return service.Outcome{Output: containerRef(theirs), RowsTotal: theirs.Rows, Existing: true}, nil
		}
		if err != nil {
			return service.Outcome{}, fmt.Errorf("upload result: %w", err)
		}
	}
	if final := res.Stats(); w.superseded != nil {
		read := final.InputRows + final.SupersededRows
		if read > 0 {
			w.superseded.WithLabelValues(job.Query.Table).Set(float64(final.SupersededRows) / float64(read))
		}
	}
	plan := "streamed"
	if !stats.SortedInput {
		plan = "sorted"
	}
	if stats.SpilledBytes > 0 {
		plan = "sorted+spilled"
	}
	return service.Outcome{
		Output: containerRef(man), Plan: plan, RowsTotal: man.Rows, Bytes: man.CompressedBytes(),
		PeakBytes: stats.PeakBytes, SpilledBytes: stats.SpilledBytes,
		BlocksFetched: stats.BlocksFetched, BytesFetched: stats.BytesFetched,
	}, nil
}

// existing reports a committed result: in the data directory, or with a
// store in the store. A result committed in the depot but not uploaded (a
// worker killed between the two) is uploaded now.
func (w *windowJob) existing(ctx context.Context, job *messages.WindowJob, outDir string) (service.Outcome, bool, error) {
	found := func(man *columnar.Manifest) (service.Outcome, bool, error) {
		w.log.Info("result already committed; not evaluating again", "job", job.JobID, "output", outDir)
		return service.Outcome{Output: containerRef(man), RowsTotal: man.Rows, Existing: true}, true, nil
	}
	if w.depot != nil {
		man, err := store.ReadManifest(ctx, w.depot.Store(), job.ResultTable, ResultProjection, job.Output)
		if err == nil {
			return found(man)
		}
		if !errors.Is(err, columnar.ErrNotFound) {
			return service.Outcome{}, false, fmt.Errorf("result: %w", err)
		}
		if _, err := columnar.ReadManifest(outDir); err != nil {
			return service.Outcome{}, false, nil
		}
		man, err = w.depot.Publish(ctx, job.ResultTable, ResultProjection, job.Output)
		if err != nil && !errors.Is(err, columnar.ErrExists) {
			return service.Outcome{}, false, fmt.Errorf("upload result: %w", err)
		}
		return found(man)
	}
	man, err := columnar.ReadManifest(outDir)
	if err == nil {
		return found(man)
	}
	if !errors.Is(err, columnar.ErrNotFound) {
		return service.Outcome{}, false, fmt.Errorf("result %s: %w", outDir, err)
	}
	return service.Outcome{}, false, nil
}

func containerRef(m *columnar.Manifest) *messages.ContainerRef {
	return &messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows, Bytes: m.CompressedBytes()}
}
