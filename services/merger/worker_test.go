package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/internal/service/jobtest"
	"github.com/strata-db/strata/messages"
)

func TestMergeoutCorruptInputFailsAtFirstDelivery(t *testing.T) {
	m, job := testJob(t)
	// Damage a block of one column of the second input; its size stays.
	in := columnar.ContainerDir(m.dataDir, job.Table, job.Projection, job.Inputs[1].ID)
	col := filepath.Join(in, columnar.ColumnFileName(2))
	data, err := os.ReadFile(col)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(col, data, 0o644); err != nil {
		t.Fatal(err)
	}
	env := jobtest.Start(t, service.JobSpec[*messages.MergeoutJob]{
		Operation: messages.OperationMergeout,
		Consumer:  messages.ConsumerMerger,
		New:       func() *messages.MergeoutJob { return new(messages.MergeoutJob) },
		Run:       m.run,
		Permanent: engineerr.Permanent,
	}, messages.SubjectJobMergeout)
	env.Publish(t, job)
	evs := env.ServeUntilSettled(t, job.JobID)
	f := jobtest.Final(evs, job.JobID)
	if f.Type != messages.EventFailed || f.Delivery != 1 {
		t.Fatalf("final event %+v, want a failure at delivery 1", f)
	}
	t.Logf("reason: %s", f.Reason)
	if !strings.Contains(f.Reason, "corrupt container") || !strings.Contains(f.Reason, job.Inputs[1].ID) {
		t.Errorf("reason %q does not name the corrupt input", f.Reason)
	}
	if n := jobtest.Count(evs, job.JobID, messages.EventAccepted); n != 1 {
		t.Errorf("accepted %d times, want once", n)
	}
	if p, ap := env.Pending(t, messages.ConsumerMerger); p != 0 || ap != 0 {
		t.Errorf("job left in the consumer: %d pending, %d unacknowledged", p, ap)
	}
	out := columnar.ContainerDir(m.dataDir, job.Table, job.Projection, job.Output)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed merge left its output: %v", err)
	}
	for _, in := range job.Inputs {
		if _, err := columnar.ReadManifest(columnar.ContainerDir(m.dataDir, job.Table, job.Projection, in.ID)); err != nil {
			t.Errorf("input %s: %v", in.ID, err)
		}
	}
}
