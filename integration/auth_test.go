package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/natsutil"
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
		if strings.Contains(string(b), "Permissions Violation") || strings.Contains(string(b), "Publish Violation") || strings.Contains(string(b), "Subscription Violation") {
			t.Errorf("%s logged a permissions violation:\n%s", name, tail(string(b), 30))
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
	startBinary(t, "scheduler", freeAddr(t), "--data", data, "--listen", natsAddr)
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
}
