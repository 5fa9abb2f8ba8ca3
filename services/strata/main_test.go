package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

// run runs strata with args in this process and returns its exit status
// and what it wrote to stdout and stderr.
func run(t *testing.T, args ...string) (code int, stdout, stderrText string) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr, oldStderr := os.Stdout, os.Stderr, stderr
	os.Stdout, os.Stderr, stderr = outF, errF, errF
	defer func() { os.Stdout, os.Stderr, stderr = oldOut, oldErr, oldStderr }()
	code = dispatch(context.Background(), args)
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

func commandNames() []string {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// serviceOnlyFlags are flags of the service binaries that no command uses.
var serviceOnlyFlags = []string{"-http ", "-log-format", "-log-level", "-worker ", "-stop-grace", "-nats-replicas", "-job-ack-wait", "-job-max-deliver"}

func TestEveryCommandHelp(t *testing.T) {
	for _, name := range commandNames() {
		for _, h := range []string{"-h", "--help"} {
			t.Run(name+" "+h, func(t *testing.T) {
				code, out, errText := run(t, append(strings.Fields(name), h)...)
				if code != 0 {
					t.Fatalf("exit %d, want 0; stderr:\n%s", code, errText)
				}
				if errText != "" {
					t.Errorf("help wrote to stderr:\n%s", errText)
				}
				if !strings.HasPrefix(out, "usage: strata "+name) || (name != "auth permissions" && !strings.Contains(out, "  -")) {
					t.Errorf("help on stdout lacks the usage line or the flags:\n%s", out)
				}
				for _, f := range serviceOnlyFlags {
					if strings.Contains(out, f) && !(name == "jobs replay" && strings.Contains(f, "job")) && !(name == "jobs replay" && f == "-nats-replicas") {
						t.Errorf("help lists the service flag %s, which the command does not use", f)
					}
				}
			})
		}
		t.Run(name+" help", func(t *testing.T) {
			code, out, _ := run(t, append([]string{"help"}, strings.Fields(name)...)...)
			if code != 0 || !strings.Contains(out, "strata "+name) {
				t.Errorf("strata help %s: exit %d, stdout:\n%s", name, code, out)
			}
		})
	}
}

func TestEveryCommandBadFlag(t *testing.T) {
	for _, name := range commandNames() {
		t.Run(name, func(t *testing.T) {
			code, out, errText := run(t, append(strings.Fields(name), "--no-such-flag")...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (usage); stderr:\n%s", code, errText)
			}
			if out != "" {
				t.Errorf("a usage error wrote to stdout:\n%s", out)
			}
			if !strings.Contains(errText, "no-such-flag") {
				t.Errorf("stderr does not name the flag:\n%s", errText)
			}
		})
	}
}

func TestTopLevel(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		stdout    string // wanted in stdout
		stderrHas string
	}{
		{args: nil, code: 2, stderrHas: "usage: strata COMMAND"},
		{args: []string{"-h"}, code: 0, stdout: "usage: strata COMMAND"},
		{args: []string{"--help"}, code: 0, stdout: "usage: strata COMMAND"},
		{args: []string{"help"}, code: 0, stdout: "commands:"},
		{args: []string{"--version"}, code: 0, stdout: "strata version "},
		{args: []string{"version"}, code: 0, stdout: "strata version "},
		{args: []string{"no-such-command"}, code: 2, stderrHas: "unknown command"},
		{args: []string{"help", "no-such-command"}, code: 2, stderrHas: "unknown command"},
	} {
		code, out, errText := run(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errText, tc.stderrHas) {
			t.Errorf("strata %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, out, errText, tc.code, tc.stdout, tc.stderrHas)
		}
		if tc.code == 0 && errText != "" {
			t.Errorf("strata %q wrote to stderr: %q", tc.args, errText)
		}
	}
	_, out, _ := run(t, "--version")
	if !strings.Contains(out, " go1.") {
		t.Errorf("--version lacks the Go version: %q", out)
	}
}

func TestExitCodes(t *testing.T) {
	walDir := t.TempDir()
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdout    string
		stderrHas string
	}{
		{name: "interspersed window flags", args: []string{"window", "--data", t.TempDir(), "SELECT a, row_number() OVER (ORDER BY a) FROM t", "--rows", "3", "--explain"},
			code: 0, stdout: `"Table"`},
		{name: "flags after the argument", args: []string{"wal", "verify", walDir, "--json"}, code: 0, stdout: `"segments"`},
		{name: "flags before the argument", args: []string{"wal", "verify", "--json", walDir}, code: 0, stdout: `"segments"`},
		{name: "two arguments", args: []string{"wal", "verify", walDir, walDir}, code: 2, stderrHas: "want one WAL directory"},
		{name: "missing argument", args: []string{"wal", "dump"}, code: 2, stderrHas: "want one WAL directory"},
		{name: "stray argument", args: []string{"ops", "t1"}, code: 2, stderrHas: `unexpected argument "t1"`},
		{name: "bad flag value", args: []string{"bench", "mergeout", "--rows", "x"}, code: 2, stderrHas: "-rows"},
		{name: "SQL error is a failure", args: []string{"window", "SELECT a, row_number() OVER (ORDER BY a) FROM t WHERE", "--explain"},
			code: 1, stderrHas: "line 1 column"},
		{name: "SQL error shows where", args: []string{"window", "SELECT a, row_number() OVER (ORDER BY a) FROM t WHERE", "--explain"},
			code: 1, stderrHas: "^"},
		{name: "NaN size", args: []string{"pools", "create", "tm", "--memorysize", "NaN"}, code: 2, stderrHas: `invalid size "NaN"`},
		{name: "bad format", args: []string{"ops", "--format", "xml"}, code: 2, stderrHas: "--format"},
		{name: "missing WAL directory is a failure", args: []string{"wal", "verify", filepath.Join(walDir, "missing")}, code: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errText := run(t, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errText, tc.stderrHas) {
				t.Errorf("strata %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					tc.args, code, out, errText, tc.code, tc.stdout, tc.stderrHas)
			}
			if code == 1 && strings.Contains(errText, ": usage:") {
				t.Errorf("a failure is reported as a usage error: %q", errText)
			}
		})
	}
}

// TestFlagsAfterFile: `jobs record FILE --nats URL` takes the flags after
// the file.
func TestFlagsAfterFile(t *testing.T) {
	srv, _, _ := natstest.Start(t, natsutil.DefaultTopology())
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	code, _, errText := run(t, "jobs", "record", path, "--nats", srv.ClientURL(), "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errText)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
