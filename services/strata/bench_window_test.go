package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/strata-db/strata/windower/windowbench"
)

func TestParseBenchWindow(t *testing.T) {
	cfg, err := parseBenchWindow([]string{"--rows", "5000", "--grant", "32MiB", "--json", "--threads", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rows != 5000 || cfg.grant != 32<<20 || !cfg.json || cfg.bigRows != 10000000 || cfg.threads != 3 {
		t.Fatalf("parsed %+v", cfg)
	}
	for _, bad := range [][]string{{"--rows", "0"}, {"--grant", "lots"}, {"extra"}, {"--threads", "-1"}} {
		if _, err := parseBenchWindow(bad); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", bad, err)
		}
	}
}

// TestBenchWindowSmall runs the whole suite on small tables and checks
// every line of the JSON output.
func TestBenchWindowSmall(t *testing.T) {
	out := captureStdout(t, func() error {
		return runBenchWindow(context.Background(), []string{"--rows", "3000", "--big-rows", "20000", "--json", "--dir", t.TempDir()})
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(windowbench.Queries()) {
		t.Fatalf("%d result lines, want %d:\n%s", len(lines), len(windowbench.Queries()), out)
	}
	for _, l := range lines {
		var r windowResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		want := int64(3000)
		if r.Name == "spill_one_partition" {
			want = 20000
		}
		if r.Rows != want || r.Partitions < 1 || r.Seconds <= 0 || r.PeakBytes <= 0 || r.Query == "" {
			t.Errorf("implausible result %+v", r)
		}
		if r.Name == "q0_unsorted" && r.Partitions != 3000 {
			t.Errorf("q0 over 3000 distinct values: %d partitions", r.Partitions)
		}
		if r.Name == "q0_presorted" && !r.SortedInput {
			t.Errorf("q0 over a sorted container did not stream: %+v", r)
		}
	}
}

func captureStdout(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, r)
		done <- b.String()
	}()
	err = fn()
	os.Stdout = old
	w.Close()
	out := <-done
	if err != nil {
		t.Fatal(err)
	}
	return out
}
