package main

import (
	"os"
	"testing"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/service"
)

// pgwire connects as its own role; as cli-admin only in a data directory
// made before the role (no pgwire.password, a cli-admin.password) and
// when given no credentials.
func TestPgwireRole(t *testing.T) {
	if r := service.RoleOf("pgwire"); r != natsutil.RolePgwire {
		t.Fatalf("role of pgwire: %q", r)
	}
	dir := t.TempDir()
	common := func(mod func(*service.Common)) *service.Common {
		c := &service.Common{DataDir: dir, Role: natsutil.RolePgwire}
		if mod != nil {
			mod(c)
		}
		return c
	}
	if legacyRole(common(nil)) {
		t.Error("an empty data directory: cli-admin")
	}
	if _, err := natsutil.EnsureCredentials(dir); err != nil {
		t.Fatal(err)
	}
	if legacyRole(common(nil)) {
		t.Error("with pgwire.password: cli-admin")
	}
	if err := os.Remove(natsutil.PasswordFile(dir, natsutil.RolePgwire)); err != nil {
		t.Fatal(err)
	}
	if !legacyRole(common(nil)) {
		t.Error("an old data directory: not cli-admin")
	}
	for name, mod := range map[string]func(*service.Common){
		"--nats-user":          func(c *service.Common) { c.User = "someone" },
		"--nats-password-file": func(c *service.Common) { c.PasswordFile = "/x" },
		"--nats-creds":         func(c *service.Common) { c.Creds = "/x" },
		"STRATA_NATS_PASSWORD": func(c *service.Common) { c.Password = "x" },
	} {
		if legacyRole(common(mod)) {
			t.Errorf("given %s: cli-admin", name)
		}
	}
}
