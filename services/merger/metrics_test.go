package main

import (
	"testing"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/internal/service/jobtest"
	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/messages"
)

// A merger's metrics follow the Prometheus conventions and count what it
// merged: rows and bytes, the job's time, its result.
func TestMergerMetrics(t *testing.T) {
	m, job := testJob(t)
	env := jobtest.Start(t, service.JobSpec[*messages.MergeoutJob]{
		Operation: messages.OperationMergeout,
		Consumer:  messages.ConsumerMerger,
		New:       func() *messages.MergeoutJob { return new(messages.MergeoutJob) },
		Run:       m.run,
		Permanent: engineerr.Permanent,
	}, messages.SubjectJobMergeout)
	env.Publish(t, job)
	evs := env.ServeUntilSettled(t, job.JobID)
	if f := jobtest.Final(evs, job.JobID); f.Type != messages.EventDone {
		t.Fatalf("final event %+v; want done", f)
	}
	metricstest.CheckJobWorker(t, env.Registry, "merger", messages.SubjectJobMergeout, 900)
}
