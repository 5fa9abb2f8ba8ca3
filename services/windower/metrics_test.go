package main

import (
	"testing"

	"github.com/strata-db/strata/internal/service/jobtest"
	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/messages"
)

// A windower's metrics follow the Prometheus conventions and count what
// it computed: result rows and bytes, the job's time, its result.
func TestWindowerMetrics(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
	env := workerEnv(t, w, nil)
	env.Publish(t, job)
	evs := env.ServeUntilSettled(t, job.JobID)
	if f := jobtest.Final(evs, job.JobID); f.Type != messages.EventDone {
		t.Fatalf("final event %+v; want done", f)
	}
	metricstest.CheckJobWorker(t, env.Registry, "windower", messages.SubjectJobWindow, 500)
}
