// Package container holds the tests of the shipped Containerfile and
// compose file; they are the files beside this one.
package container

import (
	"os"
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
