package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

func testWindowJob(t *testing.T, sql string) (*windowJob, *messages.WindowJob) {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 5, Containers: 2, RowsPerContainer: 250, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqlparse.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	job := &messages.WindowJob{JobID: "w1", Query: *q, ResultTable: "t_w", Output: "w1", Grant: messages.Grant{Bytes: 16 << 20}}
	for _, m := range ms {
		job.Inputs = append(job.Inputs, messages.ContainerRef{Table: "t", Projection: "p", ID: m.ID})
	}
	return &windowJob{dataDir: data, tempDir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}, job
}

func TestWindowJobWritesResultOnce(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
	out, err := w.run(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Existing || out.RowsTotal != 500 || out.Output.Table != "t_w" || out.Output.Projection != ResultProjection {
		t.Fatalf("first run: %+v", out)
	}
	c, err := columnar.Open(columnar.ContainerDir(w.dataDir, "t_w", ResultProjection, "w1"), columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Schema().Field(1).Name; got != "rn" {
		t.Errorf("result column 1 is %q, want rn", got)
	}
	again, err := w.run(context.Background(), job, nil)
	if err != nil || !again.Existing || again.RowsTotal != 500 {
		t.Fatalf("second run: %+v, %v; want the existing result", again, err)
	}
}

func TestWindowJobBadQueryIsPermanent(t *testing.T) {
	w, job := testWindowJob(t, "SELECT no_such_column, row_number() OVER () AS rn FROM t")
	if _, err := w.run(context.Background(), job, nil); err == nil || !engineerr.Permanent(err) {
		t.Fatalf("unknown column: err %v, want a permanent error", err)
	}
}

// TestWindowJobCannotReadOutside runs jobs whose names (unchecked here:
// the worker validates before Run) point outside the data directory: the
// confined root refuses them and no result is written.
func TestWindowJobCannotReadOutside(t *testing.T) {
	for name, forge := range map[string]func(j *messages.WindowJob){
		"input projection": func(j *messages.WindowJob) { j.Inputs[0].Projection = "../../otherdeployment/data/secret/p" },
		"input id":         func(j *messages.WindowJob) { j.Inputs[0].ID = "../../../../etc" },
		"query table":      func(j *messages.WindowJob) { j.Query.Table = "../otherdeployment" },
		"result table":     func(j *messages.WindowJob) { j.ResultTable = "../../outside" },
	} {
		t.Run(name, func(t *testing.T) {
			w, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
			forge(job)
			if job.Validate() == nil {
				t.Fatalf("job validates: %+v", job)
			}
			if _, err := w.run(context.Background(), job, nil); err == nil || !engineerr.Permanent(err) {
				t.Fatalf("err %v, want a permanent error", err)
			}
			if _, err := columnar.ReadManifest(columnar.ContainerDir(w.dataDir, "t_w", ResultProjection, "w1")); err == nil {
				t.Fatal("a result was written")
			}
		})
	}
}
