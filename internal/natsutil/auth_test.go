package natsutil

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
)

// startAuthServer starts an embedded server with the credentials of a new
// data directory and the topology ensured by the scheduler role.
func startAuthServer(t *testing.T) (*Embedded, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	passwords, err := EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartEmbedded(EmbeddedOptions{DataDir: dir, Port: RandomPort, Passwords: passwords})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ensureAs(t, ConnOptions{URLs: []string{srv.ClientURL()}, User: RoleScheduler, Password: passwords[RoleScheduler], InboxPrefix: InboxPrefix(RoleScheduler)})
	return srv, passwords
}

// ensureAs ensures the topology over a connection made with opts.
func ensureAs(t *testing.T, opts ConnOptions) {
	t.Helper()
	nc, err := Connect(opts)
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
	if err := DefaultTopology().Ensure(ctx, js); err != nil {
		t.Fatalf("the scheduler role cannot ensure the topology: %v", err)
	}
}

func TestEnsureCredentialsMakesThemOnceWithTightModes(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(Roles()) {
		t.Fatalf("got %d passwords, want one per role (%d)", len(first), len(Roles()))
	}
	seen := map[string]bool{}
	for _, role := range Roles() {
		pw := first[role]
		if len(pw) < 40 || seen[pw] {
			t.Fatalf("password of %s: %q is short or shared", role, pw)
		}
		seen[pw] = true
		fi, err := os.Stat(PasswordFile(dir, role))
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", role, m)
		}
	}
	fi, err := os.Stat(AuthDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o700 {
		t.Errorf("credentials directory mode %o, want 700", m)
	}
	// A restart reuses them; a loosened file is tightened.
	if err := os.Chmod(PasswordFile(dir, RoleMerger), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	for role, pw := range first {
		if again[role] != pw {
			t.Errorf("password of %s changed on restart", role)
		}
	}
	if fi, _ := os.Stat(PasswordFile(dir, RoleMerger)); fi.Mode().Perm() != 0o600 {
		t.Errorf("loosened password file left at %o", fi.Mode().Perm())
	}
	// An empty file is an error, not an empty password.
	if err := os.WriteFile(PasswordFile(dir, RoleProducer), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCredentials(dir); err == nil {
		t.Error("an empty password file was accepted")
	}
}

func TestEmbeddedRefusesUnauthenticatedClients(t *testing.T) {
	srv, passwords := startAuthServer(t)
	url := []string{srv.ClientURL()}
	for name, opts := range map[string]ConnOptions{
		"no credentials": {URLs: url},
		"wrong password": {URLs: url, User: RoleMerger, Password: passwords[RoleMerger] + "x"},
		"another's user": {URLs: url, User: RoleMerger, Password: passwords[RoleWindower]},
		"unknown user":   {URLs: url, User: "admin", Password: passwords[RoleScheduler]},
	} {
		nc, err := Connect(opts)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
	nc, err := Connect(ConnOptions{URLs: url, User: RoleMerger, Password: passwords[RoleMerger]})
	if err != nil {
		t.Fatalf("merger with its password: %v", err)
	}
	nc.Close()
}

func TestEmbeddedRefusesOpenNonLoopbackListen(t *testing.T) {
	dir := t.TempDir()
	passwords, err := EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.1", "example.com"} {
		srv, err := StartEmbedded(EmbeddedOptions{DataDir: dir, Host: host, Port: RandomPort, Passwords: passwords})
		if err == nil {
			srv.Shutdown()
			t.Errorf("listening on %s without TLS was accepted", host)
		} else if !strings.Contains(err.Error(), "without TLS") {
			t.Errorf("%s: %v", host, err)
		}
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "[::1]": true, "localhost": true, "127.1.2.3": true, "0.0.0.0": false, "": false, "10.0.0.1": false} {
		if got := IsLoopback(host); got != want {
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
	{RoleScheduler, "sub", "strata.api.>", true, ""},
	{RoleScheduler, "req", "$JS.API.STREAM.INFO.JOBS", true, ""},
	{RoleScheduler, "pub", "strata.jobs.mergeout", true, ""},
	{RoleScheduler, "sub", "_INBOX.cli-admin.>", false, ""},
	{RoleScheduler, "pub", "strata.updates.accounts", false, ""},

	{RoleMerger, "req", "$JS.API.CONSUMER.INFO.JOBS.merger", true, ""},
	{RoleMerger, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.merger", true, `{"batch":1,"no_wait":true}`},
	{RoleMerger, "pub", "$JS.ACK.JOBS.merger.1.1.1.1.1.1", true, ""},
	{RoleMerger, "pub", "strata.events.done", true, ""},
	{RoleMerger, "pub", "strata.deadletter.strata.jobs.mergeout", true, ""},
	{RoleMerger, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.windower", false, `{"batch":1,"no_wait":true}`},
	{RoleMerger, "req", "$JS.API.STREAM.DELETE.JOBS", false, ""},
	{RoleMerger, "req", "$JS.API.CONSUMER.INFO.UPDATES.walwriter", false, ""},
	{RoleMerger, "pub", "strata.jobs.mergeout", false, ""},
	{RoleMerger, "pub", "$KV.strata_catalog.demo", false, ""},
	{RoleMerger, "sub", "strata.api.>", false, ""},
	{RoleMerger, "sub", "_INBOX.>", false, ""},

	{RoleWindower, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.windower", true, `{"batch":1,"no_wait":true}`},
	{RoleWindower, "pub", "strata.events.progress", true, ""},
	{RoleWindower, "req", "$JS.API.CONSUMER.MSG.NEXT.JOBS.merger", false, `{"batch":1,"no_wait":true}`},
	{RoleWindower, "pub", "strata.deadletter.strata.updates.accounts", false, ""},
	{RoleWindower, "pub", "$JS.ACK.JOBS.merger.1.1.1.1.1.1", false, ""},

	{RoleWalwriter, "req", "$JS.API.CONSUMER.MSG.NEXT.UPDATES.walwriter", true, `{"batch":1,"no_wait":true}`},
	{RoleWalwriter, "pub", "strata.deadletter.strata.updates.accounts", true, ""},
	{RoleWalwriter, "pub", "strata.updates.accounts", false, ""},
	{RoleWalwriter, "pub", "strata.events.done", false, ""},
	{RoleWalwriter, "sub", "strata.events.>", false, ""},

	{RoleCLIAdmin, "req", "strata.api.pools", true, ""},
	{RoleCLIAdmin, "sub", "strata.events.>", true, ""},
	{RoleCLIAdmin, "req", "$JS.API.STREAM.INFO.JOBS", true, ""},
	{RoleCLIAdmin, "req", "strata.updates.accounts", true, ""},
	{RoleCLIAdmin, "sub", "strata.api.>", false, ""},
	{RoleCLIAdmin, "req", "$JS.API.STREAM.DELETE.JOBS", false, ""},
	{RoleCLIAdmin, "pub", "$KV.strata_catalog.demo", false, ""},
	{RoleCLIAdmin, "req", "$JS.API.CONSUMER.MSG.NEXT.UPDATES.walwriter", false, `{"batch":1,"no_wait":true}`},

	{RoleProducer, "req", "strata.updates.accounts", true, ""},
	{RoleProducer, "pub", "strata.jobs.mergeout", false, ""},
	{RoleProducer, "req", "strata.api.pools", false, ""},
	{RoleProducer, "req", "$JS.API.STREAM.INFO.UPDATES", false, ""},
	{RoleProducer, "sub", "strata.events.>", false, ""},
}

// checkMatrix runs permMatrix against a server; base gives the URLs and
// TLS of the connections, the role's user and password are added.
func checkMatrix(t *testing.T, base ConnOptions, passwords map[string]string) {
	t.Helper()
	for _, c := range permMatrix {
		name := c.role + " " + c.op + " " + c.subject
		t.Run(name, func(t *testing.T) {
			opts := base
			opts.User, opts.Password, opts.InboxPrefix = c.role, passwords[c.role], InboxPrefix(c.role)
			nc, err := Connect(opts)
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
	checkMatrix(t, ConnOptions{URLs: []string{srv.ClientURL()}}, passwords)
}

func TestEveryRoleHasAGrant(t *testing.T) {
	for _, role := range Roles() {
		g, ok := RoleGrant(role)
		if !ok || len(g.Publish) == 0 || len(g.Subscribe) == 0 {
			t.Errorf("role %s: grant %+v", role, g)
		}
	}
	if _, ok := RoleGrant("admin"); ok {
		t.Error("unknown role has a grant")
	}
	if _, err := Users(map[string]string{"admin": "x"}); err == nil {
		t.Error("Users accepted an unknown role")
	}
}

func TestPasswordFileMissing(t *testing.T) {
	_, err := ReadPasswordFile(filepath.Join(t.TempDir(), "none"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}
