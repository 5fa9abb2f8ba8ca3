package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/jobtest"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// A window job cancelled while the engine runs (a sort that spills)
// stops: it fails with the notice's reason at its first delivery, not
// retried, leaves no result and no spilled file, and the worker is free
// for the next job.
func TestWindowCancelledWhileRunning(t *testing.T) {
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 5, Containers: 2, RowsPerContainer: 150000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqlparse.Parse("SELECT k0, row_number() OVER (ORDER BY c004_int32, k0) AS a, rank() OVER (PARTITION BY k0 % 7 ORDER BY k0 DESC) AS b FROM t")
	if err != nil {
		t.Fatal(err)
	}
	job := &messages.WindowJob{JobID: "w-cancel", Query: *q, ResultTable: "t_w", Output: "w1", Grant: messages.Grant{Bytes: 12 << 20}}
	for _, m := range ms {
		job.Inputs = append(job.Inputs, messages.ContainerRef{Table: "t", Projection: "p", ID: m.ID})
	}
	temp := t.TempDir()
	w := &windowJob{dataDir: data, tempDir: temp, threads: 1, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var env *jobtest.Env[*messages.WindowJob]
	env = workerEnv(t, w, func(run jobRun) jobRun {
		return func(ctx context.Context, j *messages.WindowJob, p *service.Progress) (service.Outcome, error) {
			// The notice comes while the engine works.
			time.AfterFunc(50*time.Millisecond, func() {
				env.Worker.Cancels.Notify(&messages.CancelNotice{JobID: j.JobID, Reason: "cancelled: test"})
			})
			return run(ctx, j, p)
		}
	})
	env.Worker.Cancels = service.NewCancels(env.Worker.Log)
	env.Publish(t, job)
	start := time.Now()
	evs := env.ServeUntilSettled(t, job.JobID)
	f := jobtest.Final(evs, job.JobID)
	if f.Type != messages.EventFailed || f.Retryable || f.Reason != "cancelled: test" || f.Delivery != 1 {
		t.Fatalf("final event %+v, want failed with the notice's reason at delivery 1", f)
	}
	t.Logf("settled %v after the job was published", time.Since(start).Round(time.Millisecond))
	if n := jobtest.Count(evs, job.JobID, messages.EventFailed); n != 1 {
		t.Errorf("%d failed events, want 1 (not retried)", n)
	}
	if p, ap := env.Pending(t, messages.ConsumerWindower); p != 0 || ap != 0 {
		t.Errorf("job left in the consumer: %d pending, %d unacknowledged", p, ap)
	}
	if _, err := os.Stat(filepath.Join(data, job.ResultTable)); !os.IsNotExist(err) {
		t.Errorf("a cancelled query left a result: %v", err)
	}
	left, _ := os.ReadDir(temp)
	if len(left) != 0 {
		t.Errorf("spilled files left in %s: %v", temp, left)
	}
}
