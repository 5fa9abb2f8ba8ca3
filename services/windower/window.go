package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower"
)

// ResultProjection is the projection name of window result containers:
// DATA/<result table>/result/<output>/.
const ResultProjection = "result"

// windowJob runs one window job against the data directory.
type windowJob struct {
	dataDir string
	tempDir string
	log     *slog.Logger
}

// run evaluates the job's query and commits the result container. The job
// ID names the output, so a redelivered job whose result is committed is
// reported done without evaluating again. Errors are returned as the engines
// give them; engineerr.Permanent classes them for the job worker.
func (w *windowJob) run(ctx context.Context, job *messages.WindowJob, progress *service.Progress) (service.Outcome, error) {
	outDir := columnar.ContainerDir(w.dataDir, job.ResultTable, ResultProjection, job.Output)
	if man, err := columnar.ReadManifest(outDir); err == nil {
		w.log.Info("result already committed; not evaluating again", "job", job.JobID, "output", outDir)
		return service.Outcome{Output: containerRef(man), RowsTotal: man.Rows, Existing: true}, nil
	} else if !errors.Is(err, columnar.ErrNotFound) {
		return service.Outcome{}, fmt.Errorf("result %s: %w", outDir, err)
	}
	dirs := make([]string, len(job.Inputs))
	for i, in := range job.Inputs {
		table := in.Table
		if table == "" {
			table = job.Query.Table
		}
		dirs[i] = columnar.ContainerDir(w.dataDir, table, in.Projection, in.ID)
	}
	res, err := windower.Run(ctx, &job.Query, dirs, windower.Options{
		Grant: job.Grant.Bytes, TempDir: w.tempDir, Logger: w.log.With("job", job.JobID),
	})
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
			if man, rerr := columnar.ReadManifest(outDir); rerr == nil {
				return service.Outcome{Output: containerRef(man), RowsTotal: man.Rows, Existing: true}, nil
			}
		}
		return service.Outcome{}, fmt.Errorf("commit result %s: %w", outDir, err)
	}
	plan := "streamed"
	if !stats.SortedInput {
		plan = "sorted"
	}
	if stats.SpilledBytes > 0 {
		plan = "sorted+spilled"
	}
	return service.Outcome{
		Output: containerRef(man), Plan: plan, RowsTotal: man.Rows, Bytes: onDisk(man),
		PeakBytes: stats.PeakBytes, SpilledBytes: stats.SpilledBytes,
	}, nil
}

func containerRef(m *columnar.Manifest) *messages.ContainerRef {
	return &messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows, Bytes: onDisk(m)}
}

func onDisk(m *columnar.Manifest) int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}
