package service

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/strata-db/strata/internal/heaplimit"
)

func TestWorkerStart(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	limitBefore := debug.SetMemoryLimit(-1)
	data := t.TempDir()
	w := NewWorker("merger", "", "512MiB")
	extra := w.Flags.Int("parallelism", 0, "")
	if err := w.Start([]string{"--data", data, "--memory", "64MiB", "--parallelism", "3", "--log-level", "debug", "--http", ""}); err != nil {
		t.Fatal(err)
	}
	if w.Memory != 64<<20 {
		t.Errorf("Memory = %d, want %d", w.Memory, 64<<20)
	}
	if got := debug.SetMemoryLimit(-1); w.Collector.Limit < heaplimit.Limit(64<<20) || got != w.Collector.Limit {
		t.Errorf("Go memory limit %d, Collector.Limit %d: want the limit for a 64MiB grant (at least %d)", got, w.Collector.Limit, heaplimit.Limit(64<<20))
	}
	if *extra != 3 {
		t.Errorf("--parallelism = %d, want 3", *extra)
	}
	if root := filepath.Join(data, "tmp"); filepath.Dir(w.TempDir) != root {
		t.Errorf("TempDir = %q, want a directory of its own under %q", w.TempDir, root)
	} else if st, err := os.Stat(w.TempDir); err != nil || !st.IsDir() {
		t.Errorf("TempDir not created: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.TempDir); !os.IsNotExist(err) {
		t.Errorf("Close left the spill directory (stat: %v)", err)
	}
	if got := debug.SetMemoryLimit(-1); got != limitBefore {
		t.Errorf("Go memory limit %d after Close, want %d as before Start", got, limitBefore)
	}
	if w.Log == nil || w.Runner == nil || w.Name != "merger" {
		t.Errorf("Start left Log %v, Runner %v, Name %q", w.Log, w.Runner, w.Name)
	}
}

func TestWorkerStartErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want error
	}{
		{name: "help", args: []string{"-h"}, want: flag.ErrHelp},
		{name: "bad memory", args: []string{"--memory", "lots"}},
		{name: "zero memory", args: []string{"--memory", "0"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}},
		{name: "unknown flag", args: []string{"--no-such-flag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWorker("windower", "", "512MiB")
			w.Flags.SetOutput(io.Discard)
			err := w.Start(append([]string{"--data", t.TempDir()}, tc.args...))
			if err == nil {
				t.Fatalf("Start(%q) = nil, want an error", tc.args)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Start(%q) = %v, want %v", tc.args, err, tc.want)
			}
		})
	}
}
