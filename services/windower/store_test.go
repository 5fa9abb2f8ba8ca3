package main

import (
	"context"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// TestWindowJobThroughStore: with a store, the inputs are fetched into the
// depot, the result is uploaded, and a redelivery to a worker with an empty
// depot finds the result in the store and fetches nothing.
func TestWindowJobThroughStore(t *testing.T) {
	local, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
	st := s3test.Start(t, "strata").Store(t)
	for _, in := range job.Inputs {
		if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local.dataDir, "t", "p", in.ID), "t", "p", in.ID); err != nil {
			t.Fatal(err)
		}
	}
	worker := func() *windowJob {
		d, err := depot.Open(t.TempDir(), st, depot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return &windowJob{dataDir: t.TempDir(), tempDir: t.TempDir(), log: local.log, depot: d}
	}
	w := worker()
	out, err := w.run(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Existing || out.RowsTotal != 500 {
		t.Fatalf("run: %+v", out)
	}
	if m, err := store.Check(t.Context(), st, "t_w", ResultProjection, "w1"); err != nil || m.Rows != 500 {
		t.Fatalf("result in the store: %v", err)
	}
	if s := w.depot.Stats(); s.Misses != 2 {
		t.Errorf("depot: %+v, want both inputs fetched", s)
	}
	other := worker()
	again, err := other.run(context.Background(), job, nil)
	if err != nil || !again.Existing || again.RowsTotal != 500 {
		t.Fatalf("redelivery: %+v, %v", again, err)
	}
	if s := other.depot.Stats(); s.BytesFetched != 0 {
		t.Errorf("redelivery fetched %d bytes", s.BytesFetched)
	}
}
