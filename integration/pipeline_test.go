package integration

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// cli runs the strata CLI command words (such as "jobs record") with args
// against the deployment and returns its stdout.
func (d *deployment) cli(words string, args ...string) string {
	d.t.Helper()
	if !haveBinary("strata") {
		d.t.Skip("strata CLI is not built")
	}
	args = append(append(strings.Fields(words), "--nats", d.nats.ClientURL(), "--data", d.dataDir), args...)
	cmd := exec.Command(filepath.Join(binDir, "strata"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		d.t.Fatalf("strata %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	return stdout.String()
}

// TestPipelineEndToEnd runs the whole system as an operator would: the
// scheduler, two mergers, a windower and a walwriter as processes; the CLI
// loads a table, asks for a mergeout, runs a window query and publishes
// update events. The merged container holds exactly the loaded rows in
// sort-key order, the window result equals the reference evaluation, and
// the WAL holds every event once.
func TestPipelineEndToEnd(t *testing.T) {
	for _, b := range []string{"scheduler", "merger", "windower", "walwriter", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	gen := columnar.GenOptions{Table: "t", Projection: "p", Columns: 6, Containers: 8, RowsPerContainer: 500, Seed: 7, BlockRows: 256}
	refDir := t.TempDir()
	ref := generate(t, refDir, gen)
	refRows := referenceMerge(t, inputDirs(refDir, ref))

	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("merger", "merger-1", "--memory", "128MiB")
	d.start("merger", "merger-2", "--memory", "128MiB")
	d.start("windower", "windower-1", "--memory", "512MiB") // the general pool grants 256MiB
	wal := d.start("walwriter", "walwriter-1")

	d.cli("load", "--table", "t", "--columns", "6", "--containers", "8", "--rows", "500", "--seed", "7", "--block-rows", "256")
	d.cli("mergeout", "t")
	// Mergeout is done when one live container holds every row.
	var merged string
	waitFor(t, 60*time.Second, "one merged container", func() bool {
		committed, _ := containers(t, d.dataDir, "t", "p")
		for _, c := range committed {
			if m, err := columnar.ReadManifest(filepath.Join(d.dataDir, "t", "p", c)); err == nil && m.Rows == int64(len(refRows)) {
				merged = c
				return true
			}
		}
		return false
	})
	got := readRows(t, filepath.Join(d.dataDir, "t", "p", merged))
	for i := 1; i < len(got.keys); i++ {
		if bytes.Compare(got.keys[i-1], got.keys[i]) > 0 {
			t.Fatalf("merged container %s out of order at row %d", merged, i)
		}
	}
	gotSorted, wantSorted := slices.Clone(got.rows), slices.Clone(refRows)
	slices.Sort(gotSorted)
	slices.Sort(wantSorted)
	compareRows(t, "merged container (as a set)", gotSorted, wantSorted)

	// A window query through the scheduler, exported as CSV.
	out := filepath.Join(t.TempDir(), "window.csv")
	d.cli("window", "--out", out, windowSQL)
	compareRows(t, "window result", readCSVRows(t, out), referenceWindow(t, inputDirs(refDir, ref)))

	// pgbench-like update events against a loaded pgbench_accounts,
	// waited for until they are visible: one event a message, so that the
	// WAL holds every one (a change batch keeps the last change of each
	// key; the apply and chaos tests cover batches).
	d.cli("load", "--pgbench-accounts", "2000")
	d.cli("updates", "--keys", "50", "--events", "1500", "--seed", "3", "--batch", "1", "--wait")
	if n := wal.metric(t, "strata_wal_events_total"); n < 1500 {
		t.Fatalf("walwriter acked %v events, want 1500", n)
	}
	wal.stop(t)
	r, err := walwriter.NewReader(filepath.Join(d.dataDir, "wal"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]int{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.EventID != "" {
			seen[rec.EventID]++
		}
	}
	if len(seen) != 1500 {
		t.Errorf("WAL holds %d distinct events, want 1500", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s written %d times", id, n)
		}
	}

	ops := d.cli("ops")
	if !strings.Contains(ops, messages.OperationMergeout) || !strings.Contains(ops, messages.OperationWindow) {
		t.Errorf("strata ops lists no mergeout or window operation:\n%s", ops)
	}
}

// readCSVRows reads a CSV export (header first) as sorted row strings in
// readRows' format.
func readCSVRows(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs[1:] {
		for i, v := range rec {
			if v == "" {
				rec[i] = "NULL"
			}
		}
		out = append(out, strings.Join(rec, "|"))
	}
	slices.Sort(out)
	return out
}
