package natsutil_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

// startAuthServer starts an embedded server with the credentials of a new
// data directory and the topology ensured by the scheduler role.
func startAuthServer(t *testing.T) (*natsembed.Server, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	passwords, err := natsutil.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Server(t, natsembed.Options{DataDir: dir, Passwords: passwords})
	ensureAs(t, natsutil.ConnOptions{URLs: []string{srv.ClientURL()}, User: natsutil.RoleScheduler, Password: passwords[natsutil.RoleScheduler], InboxPrefix: natsutil.InboxPrefix(natsutil.RoleScheduler)})
	return srv, passwords
}

// ensureAs ensures the topology over a connection made with opts.
func ensureAs(t *testing.T, opts natsutil.ConnOptions) {
	t.Helper()
	nc, err := natsutil.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := natsutil.DefaultTopology().Ensure(ctx, js); err != nil {
		t.Fatalf("the scheduler role cannot ensure the topology: %v", err)
	}
}

func TestEnsureCredentialsMakesThemOnceWithTightModes(t *testing.T) {
	dir := t.TempDir()
	first, err := natsutil.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(natsutil.Roles()) {
		t.Fatalf("got %d passwords, want one per role (%d)", len(first), len(natsutil.Roles()))
	}
	seen := map[string]bool{}
	for _, role := range natsutil.Roles() {
		pw := first[role]
		if len(pw) < 40 || seen[pw] {
			t.Fatalf("password of %s: %q is short or shared", role, pw)
		}
		seen[pw] = true
		fi, err := os.Stat(natsutil.PasswordFile(dir, role))
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", role, m)
		}
	}
	fi, err := os.Stat(natsutil.AuthDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o700 {
		t.Errorf("credentials directory mode %o, want 700", m)
	}
	// A restart reuses them; a loosened file is tightened.
	if err := os.Chmod(natsutil.PasswordFile(dir, natsutil.RoleMerger), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := natsutil.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	for role, pw := range first {
		if again[role] != pw {
			t.Errorf("password of %s changed on restart", role)
		}
	}
	if fi, _ := os.Stat(natsutil.PasswordFile(dir, natsutil.RoleMerger)); fi.Mode().Perm() != 0o600 {
		t.Errorf("loosened password file left at %o", fi.Mode().Perm())
	}
	// An empty file is an error, not an empty password.
	if err := os.WriteFile(natsutil.PasswordFile(dir, natsutil.RoleProducer), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := natsutil.EnsureCredentials(dir); err == nil {
		t.Error("an empty password file was accepted")
	}
}

// A data directory made before a role existed (no pgwire.password) gets
// that role's password on the next start, the others' kept.
func TestEnsureCredentialsAddsANewRole(t *testing.T) {
	dir := t.TempDir()
	first, err := natsutil.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(natsutil.PasswordFile(dir, natsutil.RolePgwire)); err != nil {
		t.Fatal(err)
	}
	again, err := natsutil.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	for role, pw := range first {
		switch {
		case role == natsutil.RolePgwire && (again[role] == "" || again[role] == pw):
			t.Errorf("pgwire's password: %q, want a new one", again[role])
		case role != natsutil.RolePgwire && again[role] != pw:
			t.Errorf("password of %s changed", role)
		}
	}
	if fi, err := os.Stat(natsutil.PasswordFile(dir, natsutil.RolePgwire)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pgwire.password: %v %v", fi, err)
	}
}

func TestEmbeddedRefusesUnauthenticatedClients(t *testing.T) {
	srv, passwords := startAuthServer(t)
	url := []string{srv.ClientURL()}
	for name, opts := range map[string]natsutil.ConnOptions{
		"no credentials": {URLs: url},
		"wrong password": {URLs: url, User: natsutil.RoleMerger, Password: passwords[natsutil.RoleMerger] + "x"},
		"another's user": {URLs: url, User: natsutil.RoleMerger, Password: passwords[natsutil.RoleWindower]},
		"unknown user":   {URLs: url, User: "admin", Password: passwords[natsutil.RoleScheduler]},
	} {
		nc, err := natsutil.Connect(opts)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: url, User: natsutil.RoleMerger, Password: passwords[natsutil.RoleMerger]})
	if err != nil {
		t.Fatalf("merger with its password: %v", err)
	}
	nc.Close()
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "[::1]": true, "localhost": true, "127.1.2.3": true, "0.0.0.0": false, "": false, "10.0.0.1": false} {
		if got := natsutil.IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v", host, got)
		}
	}
}

// permCase is one cell of the role × subject matrix: what a role does and
// whether the server must let it.
type permCase struct {
	role    string
	op      string // pub, sub or req (a request that must get its reply)
	subject string
	allowed bool
	payload string
}

// permMatrix is, for each role, things it must be able to do and things it
// must be refused.
var permMatrix = []permCase{
	{natsutil.RoleScheduler, "sub", "strata.api.>", true, ""},
	{natsutil.RoleScheduler, "req", "$JS.API.STREAM.INFO.JOBS", true, ""},
	{natsutil.RoleScheduler, "pub", "strata.jobs.mergeout", true, ""},
	{natsutil.RoleScheduler, "sub", "_INBOX.cli-admin.>", false, ""},
	{natsutil.RoleScheduler, "pub", "strata.updates.accounts", false, ""},
	{natsutil.RoleScheduler, "pub", "strata.control.cancel", true, ""},

	{natsutil.RoleMerger, "req", "$JS.API.CONSUMER.INFO.JOBS.merger", true, ""},
	{natsutil.RoleMerger, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.merger", true, `{"batch":1,"no_wait":true}`},
	{natsutil.RoleMerger, "pub", "$JS.ACK.JOBS.merger.1.1.1.1.1.1", true, ""},
	{natsutil.RoleMerger, "pub", "strata.events.done", true, ""},
	{natsutil.RoleMerger, "pub", "strata.deadletter.strata.jobs.mergeout", true, ""},
	{natsutil.RoleMerger, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.windower", false, `{"batch":1,"no_wait":true}`},
	{natsutil.RoleMerger, "req", "$JS.API.STREAM.DELETE.JOBS", false, ""},
	{natsutil.RoleMerger, "req", "$JS.API.CONSUMER.INFO.UPDATES.walwriter", false, ""},
	{natsutil.RoleMerger, "pub", "strata.jobs.mergeout", false, ""},
	{natsutil.RoleMerger, "pub", "$KV.strata_catalog.demo", false, ""},
	{natsutil.RoleMerger, "sub", "strata.api.>", false, ""},
	{natsutil.RoleMerger, "sub", "_INBOX.>", false, ""},
	{natsutil.RoleMerger, "sub", "strata.control.cancel", true, ""},
	{natsutil.RoleMerger, "pub", "strata.control.cancel", false, ""},

	{natsutil.RoleWindower, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.windower", true, `{"batch":1,"no_wait":true}`},
	{natsutil.RoleWindower, "pub", "strata.events.progress", true, ""},
	{natsutil.RoleWindower, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.merger", false, `{"batch":1,"no_wait":true}`},
	{natsutil.RoleWindower, "pub", "strata.deadletter.strata.updates.accounts", false, ""},
	{natsutil.RoleWindower, "pub", "$JS.ACK.JOBS.merger.1.1.1.1.1.1", false, ""},
	{natsutil.RoleWindower, "sub", "strata.control.cancel", true, ""},
	{natsutil.RoleWindower, "pub", "strata.control.cancel", false, ""},

	{natsutil.RoleWalwriter, "req", "$JS.API.CONSUMER.MSG.NEXT.UPDATES.walwriter", true, `{"batch":1,"no_wait":true}`},
	{natsutil.RoleWalwriter, "pub", "strata.deadletter.strata.updates.accounts", true, ""},
	{natsutil.RoleWalwriter, "pub", "strata.updates.accounts", false, ""},
	{natsutil.RoleWalwriter, "pub", "strata.events.done", false, ""},
	{natsutil.RoleWalwriter, "sub", "strata.events.>", false, ""},

	{natsutil.RoleCLIAdmin, "req", "strata.api.pools", true, ""},
	{natsutil.RoleCLIAdmin, "sub", "strata.events.>", true, ""},
	{natsutil.RoleCLIAdmin, "req", "$JS.API.STREAM.INFO.JOBS", true, ""},
	{natsutil.RoleCLIAdmin, "req", "strata.updates.accounts", true, ""},
	{natsutil.RoleCLIAdmin, "sub", "strata.api.>", false, ""},
	{natsutil.RoleCLIAdmin, "req", "$JS.API.STREAM.DELETE.JOBS", false, ""},
	{natsutil.RoleCLIAdmin, "pub", "$KV.strata_catalog.demo", false, ""},
	{natsutil.RoleCLIAdmin, "req", "$JS.API.CONSUMER.MSG.NEXT.UPDATES.walwriter", false, `{"batch":1,"no_wait":true}`},
	{natsutil.RoleCLIAdmin, "req", "$JS.API.STREAM.MSG.GET.DEADLETTER", true, `{"seq":1}`},
	{natsutil.RoleCLIAdmin, "req", "$JS.API.STREAM.MSG.DELETE.DEADLETTER", false, `{"seq":1}`},
	{natsutil.RoleCLIAdmin, "req", "strata.api.cancel", true, ""},
	{natsutil.RoleCLIAdmin, "pub", "strata.control.cancel", false, ""},

	{natsutil.RoleProducer, "req", "strata.updates.accounts", true, ""},
	{natsutil.RoleProducer, "pub", "strata.jobs.mergeout", false, ""},
	{natsutil.RoleProducer, "req", "strata.api.pools", false, ""},
	{natsutil.RoleProducer, "req", "$JS.API.STREAM.INFO.UPDATES", false, ""},
	{natsutil.RoleProducer, "sub", "strata.events.>", false, ""},

	// pgwire: its queries, changes and their visibility, and nothing an
	// admin does.
	{natsutil.RolePgwire, "req", "strata.api.window", true, ""},
	{natsutil.RolePgwire, "req", "strata.api.operations", true, ""},
	{natsutil.RolePgwire, "req", "strata.api.catalog", true, ""},
	{natsutil.RolePgwire, "req", "strata.api.cancel", true, ""},
	{natsutil.RolePgwire, "sub", "strata.events.>", true, ""},
	{natsutil.RolePgwire, "req", "strata.updates.accounts", true, ""},
	{natsutil.RolePgwire, "req", "$JS.API.CONSUMER.INFO.UPDATES.walwriter", true, ""},
	{natsutil.RolePgwire, "req", "$JS.API.STREAM.INFO.DEADLETTER", true, ""},
	{natsutil.RolePgwire, "req", "$JS.API.STREAM.MSG.GET.DEADLETTER", true, `{"seq":1}`},
	{natsutil.RolePgwire, "req", "strata.api.containers.drop", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.pools.create", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.pools.alter", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.register", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.mergeout", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.apply", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.reserve", false, ""},
	{natsutil.RolePgwire, "req", "strata.api.pools", false, ""},
	{natsutil.RolePgwire, "pub", "strata.jobs.window", false, ""},
	{natsutil.RolePgwire, "req", "$JS.API.STREAM.INFO.JOBS", false, ""},
	{natsutil.RolePgwire, "req", "$JS.API.STREAM.MSG.DELETE.DEADLETTER", false, `{"seq":1}`},
	{natsutil.RolePgwire, "req", "$JS.API.STREAM.PURGE.UPDATES", false, ""},
	{natsutil.RolePgwire, "req", "$JS.API.CONSUMER.MSG.NEXT.UPDATES.walwriter", false, `{"batch":1,"no_wait":true}`},
	{natsutil.RolePgwire, "pub", "$KV.strata_catalog.demo", false, ""},
	{natsutil.RolePgwire, "sub", "strata.api.>", false, ""},
	{natsutil.RolePgwire, "sub", "_INBOX.cli-admin.>", false, ""},
}

// checkMatrix runs permMatrix against a server; base gives the URLs and
// TLS of the connections, the role's user and password are added.
func checkMatrix(t *testing.T, base natsutil.ConnOptions, passwords map[string]string) {
	t.Helper()
	for _, c := range permMatrix {
		name := c.role + " " + c.op + " " + c.subject
		t.Run(name, func(t *testing.T) {
			opts := base
			opts.User, opts.Password, opts.InboxPrefix = c.role, passwords[c.role], natsutil.InboxPrefix(c.role)
			nc, err := natsutil.Connect(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			var opErr error
			switch c.op {
			case "pub":
				opErr = nc.Publish(c.subject, []byte(c.payload))
			case "sub":
				_, opErr = nc.SubscribeSync(c.subject)
			case "req":
				timeout := 5 * time.Second
				if !c.allowed {
					timeout = 300 * time.Millisecond
				}
				_, opErr = nc.Request(c.subject, []byte(c.payload), timeout)
				if errors.Is(opErr, nats.ErrNoResponders) {
					opErr = nil // allowed through; nobody answers in this test
				}
			}
			if ferr := nc.FlushTimeout(5 * time.Second); ferr != nil && opErr == nil {
				opErr = ferr
			}
			violation := nc.LastError() != nil && strings.Contains(nc.LastError().Error(), "Permissions Violation")
			switch {
			case c.allowed && (violation || opErr != nil):
				t.Errorf("refused, want allowed: op error %v, last error %v", opErr, nc.LastError())
			case !c.allowed && !violation:
				t.Errorf("allowed, want a permissions violation (op error %v)", opErr)
			}
		})
	}
}

func TestRolePermissionsEmbedded(t *testing.T) {
	srv, passwords := startAuthServer(t)
	checkMatrix(t, natsutil.ConnOptions{URLs: []string{srv.ClientURL()}}, passwords)
}

func TestEveryRoleHasAGrant(t *testing.T) {
	for _, role := range natsutil.Roles() {
		g, ok := natsutil.RoleGrant(role)
		if !ok || len(g.Publish) == 0 || len(g.Subscribe) == 0 {
			t.Errorf("role %s: grant %+v", role, g)
		}
	}
	if _, ok := natsutil.RoleGrant("admin"); ok {
		t.Error("unknown role has a grant")
	}
}

func TestPasswordFileMissing(t *testing.T) {
	_, err := natsutil.ReadPasswordFile(filepath.Join(t.TempDir(), "none"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}
