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
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/messages"
)

func testJob(t *testing.T) (*mergeout, *messages.MergeoutJob) {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 5, Containers: 3, RowsPerContainer: 300, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	job := &messages.MergeoutJob{JobID: "j1", Table: "t", Projection: "p", Output: "m1", Grant: messages.Grant{Bytes: 32 << 20}}
	for _, m := range ms {
		job.Inputs = append(job.Inputs, messages.ContainerRef{ID: m.ID})
	}
	m := &mergeout{dataDir: data, tempDir: t.TempDir(), staleAfter: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return m, job
}

func TestMergeoutIsIdempotent(t *testing.T) {
	m, job := testJob(t)
	out, err := m.run(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Existing || out.RowsTotal != 900 || out.Output.ID != "m1" || out.Plan == "" || out.Bytes <= 0 {
		t.Fatalf("first run: %+v", out)
	}
	dir := columnar.ContainerDir(m.dataDir, "t", "p", "m1")
	if err := columnar.Verify(dir); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(filepath.Join(dir, columnar.ManifestName))
	again, err := m.run(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Existing || again.RowsTotal != 900 || again.Output.Bytes != out.Output.Bytes {
		t.Fatalf("second run: %+v, want the existing output", again)
	}
	after, _ := os.Stat(filepath.Join(dir, columnar.ManifestName))
	if !before.ModTime().Equal(after.ModTime()) {
		t.Error("second run rewrote the output")
	}
}

func TestMergeoutMissingInputIsPermanent(t *testing.T) {
	m, job := testJob(t)
	job.Inputs[1].ID = "c9999"
	_, err := m.run(context.Background(), job, nil)
	if err == nil || !engineerr.Permanent(err) {
		t.Fatalf("missing input: err %v, want a permanent error", err)
	}
}

func TestMergeoutRemovesStaleTemporaryOutput(t *testing.T) {
	m, job := testJob(t)
	proj := filepath.Join(m.dataDir, "t", "p")
	stale := filepath.Join(proj, ".m1.tmp-123")
	fresh := filepath.Join(proj, ".m1.tmp-456")
	other := filepath.Join(proj, ".m2.tmp-789")
	for _, d := range []string{stale, fresh, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{stale, other} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	m.removeTemp(columnar.ContainerDir(m.dataDir, "t", "p", "m1"), m.staleAfter)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temporary directory of the output kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("young temporary directory removed before the output was committed")
	}
	if _, err := os.Stat(other); err != nil {
		t.Error("another output's temporary directory removed")
	}
	// After the commit every temporary directory of the output goes.
	if _, err := m.run(context.Background(), job, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Error("temporary directory kept after the output was committed")
	}
}

// TestMergeoutLostRaceReportsDone is the reproduction of a duplicate
// delivery after a NATS restart dead-lettered as "column file missing":
// the other delivery committed the output and the scheduler retired the
// inputs while this one ran. It succeeded, and says so.
func TestMergeoutLostRaceReportsDone(t *testing.T) {
	m, job := testJob(t)
	var first service.Outcome
	m.testHookRacing = func() {
		// Another delivery commits the output, and the scheduler retires
		// the inputs, after this one found no output.
		m.testHookRacing = nil
		var err error
		if first, err = m.run(context.Background(), job, nil); err != nil {
			t.Fatal(err)
		}
		for _, in := range job.Inputs {
			if err := os.RemoveAll(columnar.ContainerDir(m.dataDir, "t", "p", in.ID)); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := m.run(context.Background(), job, nil)
	if err != nil {
		t.Fatalf("the delivery that lost the race failed: %v", err)
	}
	if !out.Existing || out.Output.ID != first.Output.ID || out.RowsTotal != first.RowsTotal {
		t.Fatalf("lost race: %+v, want the committed output", out)
	}
}
