package integration

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
)

// startBinary runs a binary with args, its output in a log printed if the
// test fails, and waits for its /healthz on httpAddr.
func startBinary(t *testing.T, name, httpAddr string, args ...string) *proc {
	t.Helper()
	if !haveBinary(name) {
		t.Skipf("service %s is not built", name)
	}
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, name), append(args, "--http", httpAddr)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, http: httpAddr, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t)
		b, _ := os.ReadFile(logPath)
		if t.Failed() {
			t.Logf("---- log of %s ----\n%s", name, tail(string(b), 60))
		}
		var violations []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "Permissions Violation") || strings.Contains(line, "Publish Violation") || strings.Contains(line, "Subscription Violation") {
				if !slices.ContainsFunc(p.expectViolations, func(s string) bool { return strings.Contains(line, s) }) {
					violations = append(violations, line)
				}
			}
		}
		if len(violations) > 0 {
			t.Errorf("%s logged a permissions violation:\n%s", name, strings.Join(violations, "\n"))
		}
	})
	p.waitHealthy(t)
	return p
}

// The scheduler's embedded server is authenticated: the workers and the
// CLI find their passwords in the shared data directory and do their work
// within their roles' permissions; a client without them is refused.
func TestEmbeddedServerAuthenticated(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	natsAddr := freeAddr(t)
	url := "nats://" + natsAddr
	sched := startBinary(t, "scheduler", freeAddr(t), "--data", data, "--listen", natsAddr)
	for _, role := range natsutil.Roles() {
		fi, err := os.Stat(natsutil.PasswordFile(data, role))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("password file of %s: %v %v", role, fi, err)
		}
	}
	startBinary(t, "merger", freeAddr(t), "--nats", url, "--data", data, "--worker", "merger-1")
	startBinary(t, "walwriter", freeAddr(t), "--nats", url, "--data", data, "--worker", "walwriter-1", "--flush-interval", "200ms")
	startBinary(t, "windower", freeAddr(t), "--nats", url, "--data", data, "--worker", "windower-1", "--memory", "512MiB")

	if nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{url}, ConnectTimeout: 2 * time.Second}); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected to the embedded server")
	}

	strata := func(args ...string) string {
		t.Helper()
		if !haveBinary("strata") {
			t.Skip("strata CLI is not built")
		}
		cmd := exec.Command(filepath.Join(binDir, "strata"), append(args, "--nats", url, "--data", data)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	strata("load", "--table", "t", "--columns", "6", "--containers", "4", "--rows", "500")
	if out := strata("mergeout", "t"); !strings.Contains(out, "done by merger-1") {
		t.Fatalf("mergeout did not finish on the merger:\n%s", out)
	}
	// Changes applied under the roles' permissions: the walwriter reads
	// the catalog and applies batches, the CLI waits for its ack floor.
	strata("load", "--pgbench-accounts", "1000")
	strata("updates", "--keys", "10", "--events", "100", "--wait")
	// abalance starts at 0: the updates are visible when some rows differ.
	if out := strata("window", "SELECT aid, abalance, count(*) OVER () AS n FROM pgbench_accounts WHERE abalance <> 0"); strings.Contains(out, ": 0 rows") || !strings.Contains(out, "done by windower-1") {
		t.Fatalf("window over pgbench_accounts after the updates:\n%s", out)
	}
	// The producer role may publish updates with its own password file.
	strata("updates", "--keys", "10", "--events", "100", "--id-prefix", "producer",
		"--nats-user", natsutil.RoleProducer, "--nats-password-file", natsutil.PasswordFile(data, natsutil.RoleProducer))
	if out := strata("ops", "--table", "t"); !strings.Contains(out, "done") {
		t.Fatalf("operations:\n%s", out)
	}

	// pgwire as its own role: a query (a window job, its event), an
	// INSERT into a keyed table (change events, the walwriter's ack
	// floor, the dead letters), read back; no permissions violation in
	// its log (startBinary's cleanup), and it did not fall back to
	// cli-admin.
	pgAddr := freeAddr(t)
	pg := startBinary(t, "pgwire", freeAddr(t), "--nats", url, "--data", data, "--pg-listen", pgAddr)
	pw, err := os.ReadFile(pgauth.PasswordFile(data, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", neturl.QueryEscape(strings.TrimSpace(string(pw))), pgAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int64
	if err := c.QueryRow(ctx, "SELECT k0, count(*) OVER () AS n FROM t LIMIT 1").Scan(new(int64), &n); err != nil || n == 0 {
		t.Fatalf("pgwire query: %d rows, %v", n, err)
	}
	if tag, err := c.Exec(ctx, "INSERT INTO pgbench_accounts (aid, bid, abalance, filler) VALUES ($1, 1, 77, 'pgwire')", int64(1_000_001)); err != nil || tag.String() != "INSERT 0 1" {
		t.Fatalf("pgwire INSERT: %v %v", tag, err)
	}
	var bal int64
	if err := c.QueryRow(ctx, "SELECT aid, abalance, count(*) OVER () AS n FROM pgbench_accounts WHERE aid = 1000001").Scan(new(int64), &bal, &n); err != nil || bal != 77 || n != 1 {
		t.Fatalf("the inserted row: abalance %d, %d rows, %v", bal, n, err)
	}
	if b, _ := os.ReadFile(pg.logPath); strings.Contains(string(b), "as cli-admin") {
		t.Fatalf("pgwire fell back to cli-admin:\n%s", tail(string(b), 20))
	}
	// The pgwire role may not make an admin request.
	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{url}, User: natsutil.RolePgwire,
		Password: mustReadPassword(t, natsutil.PasswordFile(data, natsutil.RolePgwire)), InboxPrefix: natsutil.InboxPrefix(natsutil.RolePgwire)})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, subject := range []string{messages.SubjectAPIDropContainers, messages.SubjectAPIPoolCreate, messages.SubjectAPIMergeout} {
		// The server logs the refusal (quoted in the scheduler's log
		// line); only this one is expected.
		sched.expectViolations = append(sched.expectViolations, `user:pgwire\" - Publish Violation - Subject \"`+subject+`\"`)
		if _, err := nc.Request(subject, []byte{0x80}, time.Second); err == nil {
			t.Errorf("pgwire's %s was answered", subject)
		}
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if le := nc.LastError(); le == nil || !strings.Contains(le.Error(), "Permissions Violation") || !strings.Contains(le.Error(), subject) {
			t.Errorf("pgwire's %s: last error %v, want a permissions violation", subject, le)
		}
	}
	// Its catalog request is answered.
	if msg, err := nc.Request(messages.SubjectAPICatalog, mustMarshal(t, &messages.CatalogRequest{Table: "t"}), 10*time.Second); err != nil || len(msg.Data) == 0 {
		t.Fatalf("pgwire's catalog request: %v", err)
	}
}

func mustReadPassword(t *testing.T, path string) string {
	t.Helper()
	pw, err := natsutil.ReadPasswordFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

func mustMarshal(t *testing.T, m messages.Message) []byte {
	t.Helper()
	b, err := messages.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
