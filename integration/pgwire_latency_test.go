package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// smallQuery is BENCHMARKS.md's small window query over a 10,000-row
// table.
const smallQuery = `SELECT k0, c001_utf8, rank() OVER (PARTITION BY k0 % 4 ORDER BY k0) AS r FROM small WHERE k0 < 40`

// BenchmarkPgwireSmallQuery measures the latency of a small window query
// on one deployment (the scheduler, a windower and pgwire as processes,
// as TestPgwireCancel runs them) three ways:
//
//   - pgwire: pgx over one connection, the simple protocol, every row read;
//   - job: what strata window does once started, in this process: the
//     request through internal/apiclient, the job's done event, the result
//     container's rows read;
//   - cli: the strata window process, start to end.
//
// Besides ns/op each reports the median of the ops (p50-ms) and of the
// jobs' own time from the operations table (job-ms: created to ended,
// what strata ops shows), so a sub-benchmark's ratio to the job's time
// is its p50-ms over job-ms. Run:
//
//	go test -run '^$' -bench PgwireSmallQuery -benchtime 40x ./integration/
func BenchmarkPgwireSmallQuery(b *testing.B) {
	for _, bin := range []string{"scheduler", "windower", "pgwire", "strata"} {
		if !haveBinary(bin) {
			b.Skipf("%s is not built", bin)
		}
	}
	d := newDeployment(b)
	d.start("scheduler", "scheduler", "--log-level", "info")
	pgAddr := freeAddr(b)
	d.start("pgwire", "pgwire-1", "--pg-listen", pgAddr, "--log-level", "info")
	d.start("windower", "windower-1", "--memory", "2GiB", "--log-level", "info")
	d.cli("load", "--table", "small", "--columns", "2", "--containers", "1", "--rows", "10000")
	pw, err := os.ReadFile(pgauth.PasswordFile(d.dataDir, pgauth.DefaultUser))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", url.QueryEscape(strings.TrimSpace(string(pw))), pgAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	api := &apiclient.Client{NC: d.nc, Timeout: 10 * time.Second}
	query, err := sqlparse.Parse(smallQuery)
	if err != nil {
		b.Fatal(err)
	}

	// Each way's op returns the rows it read; jobs are the window jobs
	// made while it ran, from their events.
	ways := []struct {
		name string
		op   func(b *testing.B) int
	}{
		{"pgwire", func(b *testing.B) int {
			rows, err := conn.Query(ctx, smallQuery, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			return n
		}},
		{"job", func(b *testing.B) int {
			return runJob(b, d, api, query)
		}},
		{"cli", func(b *testing.B) int {
			cmd := exec.Command(filepath.Join(binDir, "strata"), "window", smallQuery, "--rows", "100", "--format", "csv", "--nats", d.nats.ClientURL(), "--data", d.dataDir)
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("strata window: %v\n%s", err, out)
			}
			return strings.Count(string(out), "\n") - 1 // the header
		}},
	}
	want := -1 // the rows, the same every way
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			for range 3 { // a warm start: the windower's first job and pgwire's first plan
				if n := w.op(b); want < 0 {
					want = n
				}
			}
			evs := d.watchEvents()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if n := w.op(b); n != want || n == 0 {
					b.Fatalf("%d rows, want %d", n, want)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(median(lat), "p50-ms")
			var ids []string
			waitFor(b, 10*time.Second, "the events of the jobs", func() bool {
				ids = ids[:0]
				for _, ev := range evs.find(func(ev *messages.JobEvent) bool { return ev.Type == messages.EventDone }) {
					ids = append(ids, ev.JobID)
				}
				return len(ids) >= b.N
			})
			evs.stop()
			var ops messages.OperationsReply
			d.request(messages.SubjectAPIOperations, &messages.OperationsRequest{}, &ops)
			var job []time.Duration
			for _, op := range ops.Operations {
				if slices.Contains(ids, op.JobID) && op.End > 0 {
					job = append(job, time.Duration(op.End-op.Created))
				}
			}
			if len(job) > 0 {
				b.ReportMetric(median(job), "job-ms")
			}
		})
	}
}

func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

// runJob does what strata window does once it has parsed the query: the
// window request, the job's done event, the result's rows read.
func runJob(b *testing.B, d *deployment, api *apiclient.Client, q *messages.WindowQuery) int {
	ctx := context.Background()
	events := make(chan *nats.Msg, 1024)
	sub, err := d.nc.ChanSubscribe(messages.SubjectEventsAll, events)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	var rep messages.WindowReply
	if err := api.Call(ctx, messages.SubjectAPIWindow, &messages.WindowRequest{Query: *q, RequestID: apiclient.NewRequestID()}, &rep); err != nil {
		b.Fatal(err)
	}
	if rep.Error != nil {
		b.Fatal(rep.Error)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case <-timeout:
			b.Fatalf("job %s not done within a minute", rep.Job.JobID)
		case msg := <-events:
			ev := new(messages.JobEvent)
			if messages.Unmarshal(msg.Data, ev) != nil || ev.JobID != rep.Job.JobID {
				continue
			}
			switch ev.Type {
			case messages.EventFailed:
				b.Fatalf("job %s failed: %s", ev.JobID, ev.Reason)
			case messages.EventDone:
				ct, err := columnar.Open(columnar.ContainerDir(d.dataDir, rep.ResultTable, messages.ResultProjection, ev.Output.ID), columnar.OpenOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer ct.Close()
				return int(ct.Rows())
			}
		}
	}
}
