package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/internal/service/engineerr"
)

// storeJob puts testJob's inputs in an S3 bucket and returns a merger
// with an empty depot over it; newWorker makes another one. testJob makes
// the same job every call.
func storeJob(t *testing.T) (newWorker func() *mergeout, st store.Store, m *mergeout) {
	t.Helper()
	local, job := testJob(t)
	st = s3test.Start(t, "strata").Store(t)
	for _, in := range job.Inputs {
		if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local.dataDir, "t", "p", in.ID), "t", "p", in.ID); err != nil {
			t.Fatal(err)
		}
	}
	newWorker = func() *mergeout {
		d, err := depot.Open(t.TempDir(), st, depot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return &mergeout{dataDir: t.TempDir(), tempDir: t.TempDir(), staleAfter: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil)), depot: d}
	}
	return newWorker, st, newWorker()
}

func TestMergeoutThroughStore(t *testing.T) {
	newWorker, st, m := storeJob(t)
	_, job := testJob(t)
	out, err := m.run(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Existing || out.RowsTotal != 900 {
		t.Fatalf("run: %+v", out)
	}
	if got, err := store.Check(t.Context(), st, "t", "p", "m1"); err != nil || got.Rows != 900 {
		t.Fatalf("output in the store: %v", err)
	}
	if s := m.depot.Stats(); s.Misses != 3 || s.Containers != 4 {
		t.Errorf("depot after the merge: %+v; want 3 inputs fetched and the output kept", s)
	}
	// Another worker given the job again finds the output in the store.
	other := newWorker()
	again, err := other.run(context.Background(), job, nil)
	if err != nil || !again.Existing || again.RowsTotal != 900 {
		t.Fatalf("second worker: %+v, %v", again, err)
	}
	if s := other.depot.Stats(); s.BytesFetched != 0 {
		t.Errorf("the second worker fetched %d bytes", s.BytesFetched)
	}
}

// A worker killed after committing its output locally and before uploading
// it: the redelivery to the same worker uploads it without merging again.
func TestMergeoutUploadsAnOutputCommittedBeforeACrash(t *testing.T) {
	_, st, m := storeJob(t)
	_, job := testJob(t)
	if _, err := m.run(context.Background(), job, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Remove(t.Context(), st, "t", "p", "m1"); err != nil {
		t.Fatal(err)
	}
	again, err := m.run(context.Background(), job, nil)
	if err != nil || !again.Existing {
		t.Fatalf("redelivery: %+v, %v", again, err)
	}
	if _, err := store.Check(t.Context(), st, "t", "p", "m1"); err != nil {
		t.Errorf("output not uploaded: %v", err)
	}
}

func TestMergeoutMissingInputInStoreIsPermanent(t *testing.T) {
	_, _, m := storeJob(t)
	_, job := testJob(t)
	job.Inputs[1].ID = "c9999"
	if _, err := m.run(context.Background(), job, nil); err == nil || !engineerr.Permanent(err) {
		t.Fatalf("missing input: err %v, want a permanent error", err)
	}
}

// Two deliveries of one job running at once upload the output's column
// files under the same keys. That is harmless because a job's output is
// the same bytes wherever and however it is merged: the same job on
// workers of different parallelism writes column files of the same
// checksums.
func TestMergeoutOutputIsTheSameBytesOnEveryWorker(t *testing.T) {
	newWorker, _, a := storeJob(t)
	b := newWorker()
	a.parallelism, b.parallelism = 1, 4
	_, job := testJob(t)
	// The second delivery under another output name, so that it merges
	// rather than finding the first one's output in the store.
	job2 := *job
	job2.Output = "m2"
	var files [2][]columnar.FileMeta
	for i, run := range []struct {
		m   *mergeout
		out string
	}{{a, "m1"}, {b, "m2"}} {
		j := job
		if i == 1 {
			j = &job2
		}
		if _, err := run.m.run(context.Background(), j, nil); err != nil {
			t.Fatal(err)
		}
		dir, err := run.m.depot.OutputDir("t", "p", run.out)
		if err != nil {
			t.Fatal(err)
		}
		man, err := columnar.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = man.Files
	}
	if len(files[0]) != len(files[1]) {
		t.Fatalf("%d and %d column files", len(files[0]), len(files[1]))
	}
	for i := range files[0] {
		if files[0][i].CRC != files[1][i].CRC || files[0][i].Size != files[1][i].Size {
			t.Errorf("column file %s: %d bytes crc %08x, and %d bytes crc %08x", files[0][i].Name, files[0][i].Size, files[0][i].CRC, files[1][i].Size, files[1][i].CRC)
		}
	}
}
