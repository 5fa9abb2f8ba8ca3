// Command merger is a mergeout worker: it takes mergeout jobs from the
// shared durable consumer on strata.jobs.mergeout, one at a time and only
// when its --memory can hold the job's grant, merges the job's input
// containers into its output container with package merger, and reports
// accepted, progress, done and failed events on strata.events.*. Start as
// many as you like, on any hosts that share the data directory, or with
// --store on any hosts that share the store: each then fetches its inputs
// into its own --depot and uploads its outputs.
//
// Usage:
//
//	merger [--nats URLS] [--data DIR] [--memory 512MiB] [--http :9102]
//	       [--store s3://BUCKET/PREFIX?endpoint=URL --depot DIR --depot-size 20GiB]
//
// Every flag has an environment variable: --memory is STRATA_MEMORY.
// --memory also sets the Go collector: it runs only as the process nears
// --memory and half as much again, and after a job once the jobs since
// the last cycle allocated 16MiB (package heaplimit), unless GOGC or
// GOMEMLIMIT is set.
package main

import (
	"context"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/internal/storeflags"
	"github.com/strata-db/strata/messages"
)

func main() { service.Main("merger", run) }

func run(args []string) error {
	w := service.NewWorker("merger", "127.0.0.1:9102", "512MiB")
	parallelism := w.Flags.Int("parallelism", 0, "columns gathered at once (default: GOMAXPROCS; the grant may allow fewer)")
	var sf storeflags.Flags
	sf.Register(w.Flags, true)
	if err := w.Start(args); err != nil {
		return err
	}
	dep, closeDepot, err := sf.OpenWorkerDepot(context.Background(), w.DataDir, w.Log, w.Runner.Registry(), w.Name)
	if err != nil {
		return err
	}
	defer closeDepot()
	m := &mergeout{dataDir: w.DataDir, tempDir: w.TempDir, parallelism: *parallelism, staleAfter: w.Topology().JobAckWait, log: w.Log, depot: dep}
	return service.RunJobs(w, service.JobSpec[*messages.MergeoutJob]{
		Operation: messages.OperationMergeout,
		Consumer:  messages.ConsumerMerger,
		New:       func() *messages.MergeoutJob { return new(messages.MergeoutJob) },
		Run:       m.run,
		Permanent: engineerr.Permanent,
	})
}
