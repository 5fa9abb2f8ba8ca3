package natsembed_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
)

func TestStartNeedsDataDir(t *testing.T) {
	if _, err := natsembed.Start(natsembed.Options{}); err == nil {
		t.Error("embedded server without a data directory started")
	}
}

func TestRefusesOpenNonLoopbackListen(t *testing.T) {
	dir := t.TempDir()
	passwords, err := natsutil.EnsureCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"0.0.0.0", "::", "192.0.2.1", "example.com"} {
		srv, err := natsembed.Start(natsembed.Options{DataDir: dir, Host: host, Port: natsembed.RandomPort, Passwords: passwords})
		if err == nil {
			srv.Shutdown()
			t.Errorf("listening on %s without TLS was accepted", host)
		} else if !strings.Contains(err.Error(), "without TLS") {
			t.Errorf("%s: %v", host, err)
		}
	}
}

func TestUsersRefusesUnknownRole(t *testing.T) {
	if _, err := natsembed.Users(map[string]string{"admin": "x"}); err == nil {
		t.Error("Users accepted an unknown role")
	}
}

// TestUsersHaveTheirRolesPermissions: one user per role given, named by
// the role, with a bcrypt hash (not the password) and the role's grant.
func TestUsersHaveTheirRolesPermissions(t *testing.T) {
	users, err := natsembed.Users(map[string]string{natsutil.RoleMerger: "m", natsutil.RoleScheduler: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 {
		t.Fatalf("%d users, want 2", len(users))
	}
	for _, u := range users {
		g, ok := natsutil.RoleGrant(u.Username)
		if !ok {
			t.Fatalf("user %q is no role", u.Username)
		}
		if !strings.HasPrefix(u.Password, "$2") {
			t.Errorf("%s: password is not a bcrypt hash", u.Username)
		}
		p := u.Permissions
		if p == nil || len(p.Publish.Allow) != len(g.Publish) || len(p.Subscribe.Allow) != len(g.Subscribe) || (p.Response != nil) != g.Responses {
			t.Errorf("%s: permissions %+v, want %+v", u.Username, p, g)
		}
	}
}

// The server's log lines carry one component key, nats-server.
func TestServerLogComponent(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := natsembed.Start(natsembed.Options{DataDir: t.TempDir(), Port: natsembed.RandomPort, Logger: log.With("service", "scheduler")})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("the server logged nothing")
	}
	for _, l := range lines {
		if n := strings.Count(l, `"component":`); n != 1 || !strings.Contains(l, `"component":"nats-server"`) {
			t.Fatalf("log line with %d component keys: %s", n, l)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
