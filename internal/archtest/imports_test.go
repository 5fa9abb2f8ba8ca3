// Package archtest checks rules of ARCHITECTURE.md that the compiler does
// not: which packages may depend on which. It has tests only.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/strata-db/strata"

// noNATS are the packages, with their subpackages, that must not depend on
// NATS, directly or through another package (ARCHITECTURE.md, "Packages"):
// the engines, which run within a grant on data they are handed and are
// reached over NATS only through services/ and internal/; the wire types;
// and the scheduler's logic, which takes its catalog as an interface.
var noNATS = []string{"columnar", "merger", "windower", "walwriter", "messages", "scheduler", "applier"}

// natsPrefix starts the import path of every NATS module: the client
// (nats.go), the server, and their own dependencies (nkeys, jwt, nuid).
const natsPrefix = "github.com/nats-io/"

// listed is what go list -json says of a package.
type listed struct {
	ImportPath string
	Imports    []string
	DepOnly    bool
	Error      *struct{ Err string }
}

func TestEnginesDoNotDependOnNATS(t *testing.T) {
	var patterns []string
	for _, p := range noNATS {
		patterns = append(patterns, module+"/"+p+"/...")
	}
	pkgs := goListDeps(t, patterns)
	var checked int
	for _, p := range pkgs {
		if p.DepOnly {
			continue
		}
		checked++
		if chain := importChainTo(pkgs, p.ImportPath, natsPrefix); chain != nil {
			t.Errorf("%s depends on NATS: %s", p.ImportPath, strings.Join(chain, " -> "))
		}
	}
	if checked < len(noNATS) {
		t.Fatalf("go list matched %d packages of %v", checked, noNATS)
	}
}

// clientOnly are the binaries that connect to NATS but run no server: they
// must not link nats-server (internal/natsembed); only the scheduler does.
var clientOnly = []string{"merger", "windower", "walwriter", "strata", "pgwire"}

// serverPrefix starts the import paths of the nats-server module.
const serverPrefix = "github.com/nats-io/nats-server/"

func TestOnlySchedulerLinksNATSServer(t *testing.T) {
	var patterns []string
	for _, b := range clientOnly {
		patterns = append(patterns, module+"/services/"+b)
	}
	pkgs := goListDeps(t, patterns)
	for _, b := range clientOnly {
		if chain := importChainTo(pkgs, module+"/services/"+b, serverPrefix); chain != nil {
			t.Errorf("%s links the NATS server: %s", b, strings.Join(chain, " -> "))
		}
	}
	if chain := importChainTo(goListDeps(t, []string{module + "/services/scheduler"}), module+"/services/scheduler", serverPrefix); chain == nil {
		t.Error("the scheduler does not link the NATS server: is this test's list of binaries still right?")
	}
}

// noStore are the engines, which read containers through columnar.Source
// and know nothing of where a Source's bytes come from: no object-store
// package, library or SDK may be among their dependencies.
var noStore = []string{"merger", "windower"}

// storePrefixes start the import paths an engine must not depend on.
var storePrefixes = []string{module + "/columnar/store", module + "/columnar/depot", "gocloud.dev/", "github.com/aws/"}

func TestEnginesDoNotDependOnStores(t *testing.T) {
	var patterns []string
	for _, p := range noStore {
		patterns = append(patterns, module+"/"+p+"/...")
	}
	pkgs := goListDeps(t, patterns)
	var checked int
	for _, p := range pkgs {
		if p.DepOnly {
			continue
		}
		checked++
		for _, prefix := range storePrefixes {
			if chain := importChainTo(pkgs, p.ImportPath, prefix); chain != nil {
				t.Errorf("%s depends on an object store: %s", p.ImportPath, strings.Join(chain, " -> "))
			}
		}
	}
	if checked < len(noStore) {
		t.Fatalf("go list matched %d packages of %v", checked, noStore)
	}
}

// goListDeps runs go list -deps -json on patterns: the packages they match
// and every package those import, transitively (without their tests).
func goListDeps(t *testing.T, patterns []string) map[string]*listed {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gobin, append([]string{"list", "-deps", "-json=ImportPath,Imports,DepOnly,Error"}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*listed{}
	dec := json.NewDecoder(&stdout)
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// importChainTo returns the shortest chain of imports from the package
// from to a package whose path starts with prefix, or nil if there is none.
func importChainTo(pkgs map[string]*listed, from, prefix string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if strings.HasPrefix(cur, prefix) {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		p := pkgs[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}
