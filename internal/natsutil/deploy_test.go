package natsutil_test

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/strata-db/strata/internal/natsutil"
)

const deployNATS = "../../deploy/nats"

// The shipped permissions.conf is what the roles say.
func TestDeployPermissionsMatchRoles(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(deployNATS, "permissions.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != natsutil.PermissionsConfig() {
		t.Fatalf("deploy/nats/permissions.conf is not the roles' permissions; regenerate it: strata auth permissions > deploy/nats/permissions.conf")
	}
}

// deployConfig writes node's shipped configuration into a directory of
// its own with test certificates and passwords in place of /etc/nats and
// parses it with nats-server's own parser.
func deployConfig(t *testing.T, node string) (*server.Options, map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	conf, err := os.ReadFile(filepath.Join(deployNATS, node))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(conf), "/etc/nats/", dir+"/")
	text = strings.ReplaceAll(text, "/srv/nats/jetstream", filepath.Join(dir, "jetstream"))
	if err := os.WriteFile(filepath.Join(dir, node), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	perms, err := os.ReadFile(filepath.Join(deployNATS, "permissions.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "permissions.conf"), perms, 0o600); err != nil {
		t.Fatal(err)
	}
	passwords := map[string]string{}
	var pw strings.Builder
	for _, role := range natsutil.Roles() {
		passwords[role] = "test-password-of-" + role
		fmt.Fprintf(&pw, "%s_PASSWORD: %q\n", strings.ToUpper(strings.ReplaceAll(role, "-", "_")), passwords[role])
	}
	if err := os.WriteFile(filepath.Join(dir, "passwords.conf"), []byte(pw.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t, certs, "ca")
	ca.issue(t, certs, "server", true)
	opts, err := server.ProcessConfigFile(filepath.Join(dir, node))
	if err != nil {
		t.Fatalf("%s: %v", node, err)
	}
	return opts, passwords, ca.path
}

func TestDeployNATSConfig(t *testing.T) {
	for _, node := range []string{"nats-1.conf", "nats-2.conf", "nats-3.conf"} {
		opts, passwords, _ := deployConfig(t, node)
		if opts.HTTPHost != "127.0.0.1" {
			t.Errorf("%s: monitoring on %q, want loopback", node, opts.HTTPHost)
		}
		if opts.TLSConfig == nil {
			t.Errorf("%s: clients without TLS", node)
		}
		if opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
			t.Errorf("%s: routes without verified TLS", node)
		}
		if opts.NoAuthUser != "" || len(opts.Users) != len(natsutil.Roles()) {
			t.Fatalf("%s: %d users (no-auth user %q), want one per role", node, len(opts.Users), opts.NoAuthUser)
		}
		for _, u := range opts.Users {
			g, ok := natsutil.RoleGrant(u.Username)
			if !ok {
				t.Errorf("%s: user %q is no role", node, u.Username)
				continue
			}
			if u.Password != passwords[u.Username] {
				t.Errorf("%s: user %s does not have its password from passwords.conf", node, u.Username)
			}
			p := u.Permissions
			if p == nil || p.Publish == nil || p.Subscribe == nil {
				t.Errorf("%s: user %s has no permissions", node, u.Username)
				continue
			}
			if !slices.Equal(p.Publish.Allow, g.Publish) || !slices.Equal(p.Subscribe.Allow, g.Subscribe) || (p.Response != nil) != g.Responses {
				t.Errorf("%s: user %s: permissions %+v %+v %+v, want %+v", node, u.Username, p.Publish, p.Subscribe, p.Response, g)
			}
		}
	}
}

// The role × subject matrix against a server run from the shipped
// configuration (as one node: no routes, on a free port).
func TestRolePermissionsDeployConfig(t *testing.T) {
	opts, passwords, caPath := deployConfig(t, "nats-1.conf")
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPPort = 0
	opts.Cluster = server.ClusterOpts{}
	opts.Routes = nil
	opts.RoutesStr = ""
	opts.NoSigs = true
	opts.JetStreamMaxStore = 1 << 30
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server from the deploy configuration not ready")
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	url := []string{srv.ClientURL()}
	// Without the CA's trust, no connection.
	if nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: url, User: natsutil.RoleCLIAdmin, Password: passwords[natsutil.RoleCLIAdmin], ConnectTimeout: 2 * time.Second}); err == nil {
		nc.Close()
		t.Error("connected without trusting the deployment's CA")
	}
	base := natsutil.ConnOptions{URLs: url, TLSCA: caPath}
	ensureAs(t, natsutil.ConnOptions{URLs: url, TLSCA: caPath, User: natsutil.RoleScheduler, Password: passwords[natsutil.RoleScheduler], InboxPrefix: natsutil.InboxPrefix(natsutil.RoleScheduler)})
	checkMatrix(t, base, passwords)
}
