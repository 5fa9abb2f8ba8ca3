// Package container holds the tests of the shipped Containerfile and
// compose file; they are the files beside this one.
package container

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// services are the binaries that are pure Go: built with cgo off.
var services = []string{"scheduler", "merger", "windower", "walwriter"}

// The image builds every service statically, and the compose file runs
// NATS and every service from it.
func TestImageAndComposeCoverEveryService(t *testing.T) {
	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	compose, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob("../../services/*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]bool{}
	for _, d := range dirs {
		built[filepath.Base(filepath.Dir(d))] = true
	}
	static := string(cf)[strings.Index(string(cf), "CGO_ENABLED=0"):]
	static = static[:strings.Index(static, "\n\n")]
	for _, s := range services {
		if !built[s] {
			t.Errorf("services/%s is gone: update this test", s)
		}
		delete(built, s)
		if !strings.Contains(static, "./services/"+s) {
			t.Errorf("Containerfile: %s is not built with CGO_ENABLED=0", s)
		}
		if !strings.Contains(string(compose), "\n  "+s+":\n") || !strings.Contains(string(compose), `entrypoint: ["/usr/local/bin/`+s+`"]`) {
			t.Errorf("compose.yaml does not run %s", s)
		}
	}
	delete(built, "strata") // the CLI, built with cgo (PostgreSQL's parser)
	delete(built, "pgwire") // the SQL front door, cgo too: not in the image yet
	for s := range built {
		t.Errorf("services/%s is neither in the image nor in this test", s)
	}
	for _, s := range []string{"\n  nats:\n", "\n  init:\n"} {
		if !strings.Contains(string(compose), s) {
			t.Errorf("compose.yaml has no service %s", strings.TrimSpace(s))
		}
	}
	if !strings.Contains(string(cf), "./services/strata") {
		t.Error("Containerfile does not build the CLI")
	}
	if !strings.Contains(string(cf), "FROM gcr.io/distroless/static") {
		t.Error("the image is not distroless/static")
	}
}

// service returns the lines of one service of the compose file: those
// after its name, up to the next line indented as little.
func service(t *testing.T, compose, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(compose, "\n  "+name+":\n")
	if !ok {
		t.Fatalf("compose.yaml has no service %s", name)
	}
	var b strings.Builder
	for _, l := range strings.Split(rest, "\n") {
		if l != "" && !strings.HasPrefix(l, "   ") {
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// The compose stack keeps containers in the bucket of its S3 service
// unless STRATA_STORE says otherwise (set empty: the data volume alone);
// the services that read containers get it and the bucket's credentials,
// the workers a depot each.
func TestComposeStore(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	compose := string(data)
	if s3 := service(t, compose, "s3"); !strings.Contains(s3, "image: docker.io/chrislusf/seaweedfs:") ||
		!strings.Contains(s3, `"-bucket=strata"`) || !strings.Contains(s3, `"-s3.config=/var/lib/strata/s3/s3.json"`) {
		t.Errorf("service s3 is not SeaweedFS with bucket strata and init's identities:\n%s", s3)
	}
	for _, want := range []string{
		// ${VAR-default}: the default only when unset, so an empty
		// STRATA_STORE is the data directory alone.
		`STRATA_STORE: "${STRATA_STORE-s3://strata?endpoint=http://s3:8333&region=us-east-1}"`,
		"AWS_SHARED_CREDENTIALS_FILE: /var/lib/strata/s3/credentials",
	} {
		if !strings.Contains(compose, "x-store: &store\n") || !strings.Contains(compose, "\n  "+want+"\n") {
			t.Errorf("compose.yaml's x-store lacks %s", want)
		}
	}
	for _, s := range []string{"scheduler", "merger", "windower"} {
		if !strings.Contains(service(t, compose, s), "      <<: *store\n") {
			t.Errorf("service %s does not take x-store", s)
		}
	}
	if strings.Contains(service(t, compose, "walwriter"), "*store") {
		t.Error("the walwriter takes x-store: it keeps no containers")
	}
	for _, s := range []string{"merger", "windower"} {
		b := service(t, compose, s)
		if !strings.Contains(b, "      - /var/cache/strata ") || !strings.Contains(b, "STRATA_DEPOT: /var/cache/strata/depot\n") {
			t.Errorf("service %s has no depot on a volume of each replica's own:\n%s", s, b)
		}
	}
	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cf), "/state/var/cache/strata") {
		t.Error("the image has no /var/cache/strata owned by its user, for the depot volumes")
	}
}

// init.sh makes the bucket's access key once: an AWS credentials file
// (0600) and SeaweedFS identities (0644) with the same key.
func TestInitMakesBucketCredentials(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The CLI's part (NATS passwords) is strata's own, tested elsewhere.
	if err := os.WriteFile(filepath.Join(bin, "strata"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s3 := filepath.Join(dir, "s3")
	run := func() (key, secret string) {
		t.Helper()
		cmd := exec.Command("sh", "init.sh")
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "STRATA_DATA=" + filepath.Join(dir, "data"),
			"STRATA_NATS_CONF=" + filepath.Join(dir, "nats-auth.conf"), "STRATA_S3_DIR=" + s3}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("init.sh: %v\n%s", err, out)
		}
		creds, err := os.ReadFile(filepath.Join(s3, "credentials"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(creds), "\n") {
			if v, ok := strings.CutPrefix(l, "aws_access_key_id = "); ok {
				key = v
			}
			if v, ok := strings.CutPrefix(l, "aws_secret_access_key = "); ok {
				secret = v
			}
		}
		if !strings.HasPrefix(string(creds), "[default]\n") || len(key) < 16 || len(secret) < 32 {
			t.Fatalf("credentials file:\n%s", creds)
		}
		var ids struct {
			Identities []struct {
				Credentials []struct{ AccessKey, SecretKey string }
				Actions     []string
			}
		}
		js, err := os.ReadFile(filepath.Join(s3, "s3.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(js, &ids); err != nil || len(ids.Identities) != 1 || len(ids.Identities[0].Credentials) != 1 ||
			ids.Identities[0].Credentials[0].AccessKey != key || ids.Identities[0].Credentials[0].SecretKey != secret {
			t.Fatalf("s3.json does not hold the credentials file's key (%v):\n%s", err, js)
		}
		for name, mode := range map[string]os.FileMode{"credentials": 0o600, "s3.json": 0o644} {
			if fi, err := os.Stat(filepath.Join(s3, name)); err != nil || fi.Mode().Perm() != mode {
				t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode().Perm(), err, mode)
			}
		}
		return key, secret
	}
	key, secret := run()
	if k, s := run(); k != key || s != secret {
		t.Error("a second run made a new key")
	}
}
