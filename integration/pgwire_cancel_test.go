package integration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
)

// cancelSQL keeps a windower busy for several seconds over the table
// TestPgwireCancel loads: two sorts of every row within a small grant,
// so it spills.
const cancelSQL = `SELECT k0, row_number() OVER (ORDER BY c004_int32, k0) AS a,
	rank() OVER (PARTITION BY c004_int32 % 7 ORDER BY k0 DESC) AS b FROM t`

// TestPgwireCancel runs the scheduler, a windower and pgwire as
// processes and, while a long window query's job runs on the windower,
// ends it from the client three ways: a cancel request (pgx's, what a
// client's Ctrl-C sends), a client that goes away while the job runs,
// and one that goes away while its result is sent. Each time the pool's
// memory is back within seconds: the job stopped on the windower (which
// counts it cancelled and leaves no spilled file) and failed with the
// reason "cancelled: ...", not retried. Then strata cancel on a job that
// ended.
func TestPgwireCancel(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "pgwire", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	// Every window reply comes half a second after the job is made: a
	// query can end while its request is in flight.
	d.startEnv([]string{"STRATA_TEST_API_FAULT=window:delay=500ms"}, "scheduler", "scheduler", "--nats", d.nats.ClientURL())
	pgAddr := freeAddr(t)
	pg := d.start("pgwire", "pgwire-1", "--pg-listen", pgAddr)
	win := d.start("windower", "windower-1", "--memory", "512MiB", "--threads", "1")
	d.cli("load", "--table", "t", "--columns", "6", "--containers", "4", "--rows", "500000", "--seed", "3")
	// A small grant: the query's sorts spill.
	small, one := int64(24<<20), 1
	var pools messages.PoolsReply
	d.request(messages.SubjectAPIPoolAlter, &messages.AlterPoolRequest{Name: messages.DefaultWindowPool, MemorySize: &small, MaxMemorySize: &small,
		PlannedConcurrency: &one}, &pools)
	if pools.Error != nil {
		t.Fatal(pools.Error)
	}

	pw, err := os.ReadFile(pgauth.PasswordFile(d.dataDir, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	connURL := fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", url.QueryEscape(strings.TrimSpace(string(pw))), pgAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, connURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	evs := d.watchEvents()
	seen := map[string]bool{}
	// running waits for the windower to accept a new window job.
	running := func(t *testing.T) string {
		t.Helper()
		var id string
		waitFor(t, time.Minute, "a window job accepted", func() bool {
			for _, ev := range evs.find(func(ev *messages.JobEvent) bool {
				return ev.Type == messages.EventAccepted && ev.Operation == messages.OperationWindow
			}) {
				if !seen[ev.JobID] {
					id = ev.JobID
					seen[id] = true
					return true
				}
			}
			return false
		})
		time.Sleep(300 * time.Millisecond) // into its sorts
		return id
	}
	general := func() messages.PoolStatus {
		var rep messages.PoolsReply
		d.request(messages.SubjectAPIPools, &messages.PoolsRequest{}, &rep)
		for _, p := range rep.Pools {
			if p.Config.Name == messages.DefaultWindowPool {
				return p
			}
		}
		t.Fatal("no pool general")
		return messages.PoolStatus{}
	}
	spilled := func() []string {
		var files []string
		_ = filepath.WalkDir(filepath.Join(d.dataDir, "tmp"), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && filepath.Base(p) != "lock" {
				files = append(files, p)
			}
			return nil
		})
		return files
	}
	// freed checks that the job stopped on the windower and gave its
	// grant back within seconds of when.
	cancelled := 0.0
	freed := func(t *testing.T, id string, when time.Time) {
		t.Helper()
		waitFor(t, 10*time.Second, "the pool's memory back", func() bool {
			p := general()
			return p.InUse == 0 && p.Running == 0
		})
		t.Logf("job %s: grant back %v after the client left", id, time.Since(when).Round(time.Millisecond))
		var ev *messages.JobEvent
		waitFor(t, 10*time.Second, "the job's failed event", func() bool {
			f := evs.find(func(ev *messages.JobEvent) bool { return ev.JobID == id && ev.Type == messages.EventFailed })
			if len(f) > 0 {
				ev = f[0]
			}
			return ev != nil
		})
		if ev.Retryable || !strings.HasPrefix(ev.Reason, messages.CancelledPrefix+"pgwire: ") || ev.Worker != "windower-1" {
			t.Fatalf("failed event %+v: want the windower's, not retryable, reason cancelled: pgwire: ...", ev)
		}
		cancelled++
		if got := win.metric(t, "strata_jobs_total", `result="cancelled"`); got != cancelled {
			t.Fatalf("windower counts %v jobs cancelled, want %v", got, cancelled)
		}
		if got := win.metric(t, "strata_jobs_total", `result="retried"`); got != 0 {
			t.Fatalf("windower retried %v jobs", got)
		}
		var ops messages.OperationsReply
		d.request(messages.SubjectAPIOperations, &messages.OperationsRequest{JobID: id}, &ops)
		if len(ops.Operations) != 1 || ops.Operations[0].Status != messages.StatusFailed || ops.Operations[0].Reason != ev.Reason {
			t.Fatalf("operations row %+v", ops.Operations)
		}
		deadline := time.Now().Add(5 * time.Second)
		for left := spilled(); len(left) > 0; left = spilled() {
			if time.Now().After(deadline) {
				t.Fatalf("spilled files left: %v", left)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("cancel request", func(t *testing.T) {
		c := connect(t)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Exec(ctx, cancelSQL, pgx.QueryExecModeSimpleProtocol)
			errc <- err
		}()
		id := running(t)
		if p := general(); p.Running != 1 || p.InUse == 0 {
			t.Fatalf("pool while the job runs: %+v", p)
		}
		when := time.Now()
		if err := c.PgConn().CancelRequest(ctx); err != nil {
			t.Fatal(err)
		}
		var pe *pgconn.PgError
		if err := <-errc; !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("error %v, want 57014", err)
		}
		freed(t, id, when)
	})

	// A statement timeout while the query's window request is in flight:
	// the job the scheduler made is cancelled once its reply names it.
	t.Run("timeout before the reply", func(t *testing.T) {
		c := connect(t)
		if _, err := c.Exec(ctx, "SET statement_timeout = 100"); err != nil {
			t.Fatal(err)
		}
		when := time.Now()
		_, err := c.Exec(ctx, cancelSQL, pgx.QueryExecModeSimpleProtocol)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("error %v, want 57014", err)
		}
		if time.Since(when) > 400*time.Millisecond {
			t.Fatalf("the timed-out query answered after %v: it waited for the scheduler's reply", time.Since(when))
		}
		id := running(t)
		freed(t, id, when)
	})

	// The client's socket closed, no cancel request: the connection is
	// taken from pgx (which would send one) and the query sent by hand.
	t.Run("disconnect while the job runs", func(t *testing.T) {
		c := connect(t)
		hc, err := c.PgConn().Hijack()
		if err != nil {
			t.Fatal(err)
		}
		hc.Frontend.Send(&pgproto3.Query{String: cancelSQL})
		if err := hc.Frontend.Flush(); err != nil {
			t.Fatal(err)
		}
		id := running(t)
		when := time.Now()
		hc.Conn.Close()
		freed(t, id, when)
	})

	t.Run("disconnect mid-result", func(t *testing.T) {
		c := connect(t)
		hc, err := c.PgConn().Hijack()
		if err != nil {
			t.Fatal(err)
		}
		hc.Frontend.Send(&pgproto3.Query{String: "SELECT k0, c004_int32, row_number() OVER () AS n FROM t"})
		if err := hc.Frontend.Flush(); err != nil {
			t.Fatal(err)
		}
		_ = hc.Conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
		for rows := 0; rows < 10; {
			m, err := hc.Frontend.Receive()
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *pgproto3.DataRow:
				rows++
			case *pgproto3.ErrorResponse:
				t.Fatalf("query failed: %s", m.Message)
			}
		}
		when := time.Now()
		hc.Conn.Close()
		waitFor(t, 10*time.Second, "the pool's memory back", func() bool {
			p := general()
			return p.InUse == 0 && p.Running == 0
		})
		t.Logf("grant back %v after the client left mid-result", time.Since(when).Round(time.Millisecond))
		// The session ended with the client: pgwire holds nothing of it.
		waitFor(t, 10*time.Second, "pgwire's connection closed", func() bool {
			return pg.metric(t, "strata_pgwire_connections") == 0
		})
	})

	// strata cancel of a job that ended says so and changes nothing.
	t.Run("strata cancel", func(t *testing.T) {
		var id string
		for j := range seen {
			id = j
		}
		out := d.cli("cancel", "--format", "csv", id)
		if !strings.Contains(out, id+",failed,cancelled: pgwire: ") {
			t.Fatalf("strata cancel of a cancelled job:\n%s", out)
		}
		if _, stderr, err := d.cliErr("cancel", "window.nope.p.1"); err == nil || !strings.Contains(stderr, "unknown job") {
			t.Fatalf("strata cancel of an unknown job: %v\n%s", err, stderr)
		}
	})
}
