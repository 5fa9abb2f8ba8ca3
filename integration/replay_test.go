package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// The replay fixture: a JOBS stream recorded with `strata jobs record`
// from a deployment that ran replayJobs over replayData, and the checksums
// of the outputs it produced. Set STRATA_UPDATE_FIXTURES=1 to record them
// again (after a deliberate change of the generator or an engine's output).
const (
	replayFixture = "testdata/jobs.jsonl"
	replaySums    = "testdata/jobs.sums.json"
)

var replayData = columnar.GenOptions{Table: "t", Projection: "p", Columns: 8, KeyColumns: 2, Containers: 4, RowsPerContainer: 800, BlockRows: 256, Seed: 11}

// replayJobs are the jobs of the fixture: two mergeouts (one vertical) and
// a window query.
func replayJobs(t *testing.T, ms []*columnar.Manifest) []messages.Message {
	t.Helper()
	q, err := sqlparse.Parse(windowSQL)
	if err != nil {
		t.Fatal(err)
	}
	win := &messages.WindowJob{JobID: "replay-window", Query: *q, ResultTable: "t_window", Output: "replay-window",
		Grant: messages.Grant{Pool: "general", Bytes: 32 << 20}, Created: 1}
	for _, m := range ms {
		win.Inputs = append(win.Inputs, messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID})
	}
	return []messages.Message{
		mergeoutJob("replay-merge-a", "m-replay-a", 64<<20, ms[:2]),
		mergeoutJob("replay-merge-b", "m-replay-b", 1<<20, ms),
		win,
	}
}

func jobID(m messages.Message) string {
	return m.(interface{ ID() string }).ID()
}

// outputSums runs until every job is done and returns each output's
// checksum: rows in order for merges, sorted rows for window results.
func outputSums(t *testing.T, d *deployment, ev *events, ids []string) map[string]string {
	t.Helper()
	done := ev.waitDone(t, 90*time.Second, ids...)
	sums := map[string]string{}
	for id, e := range done {
		rows := readRows(t, columnar.ContainerDir(d.dataDir, e.Output.Table, e.Output.Projection, e.Output.ID)).rows
		if e.Operation == messages.OperationWindow {
			slices.Sort(rows)
		}
		sums[id] = fmt.Sprintf("%s/%s/%s rows=%d sum=%s", e.Output.Table, e.Output.Projection, e.Output.ID, len(rows), checksum(rows))
	}
	return sums
}

// TestReplayGivesIdenticalOutputs replays the recorded job stream into a
// fresh deployment holding the same input containers: the outputs have the
// checksums recorded with the fixture. Recording the fresh deployment's
// stream gives back the fixture's jobs.
func TestReplayGivesIdenticalOutputs(t *testing.T) {
	for _, b := range []string{"merger", "windower", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	if os.Getenv("STRATA_UPDATE_FIXTURES") != "" {
		recordReplayFixture(t)
	}
	f, err := os.Open(replayFixture)
	if err != nil {
		t.Fatalf("%v (record it with STRATA_UPDATE_FIXTURES=1)", err)
	}
	recorded, err := natsutil.ReadRecording(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	b, err := os.ReadFile(replaySums)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}

	d := newDeployment(t)
	generate(t, d.dataDir, replayData)
	ev := d.watchEvents()
	d.start("merger", "merger-1", "--memory", "128MiB")
	d.start("windower", "windower-1", "--memory", "128MiB")
	abs, _ := filepath.Abs(replayFixture)
	d.cli("jobs replay", abs)
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	got := outputSums(t, d, ev, ids)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %s after replay: %s\n                 recorded: %s", id, got[id], w)
		}
	}
	if t.Failed() {
		t.Log("if an engine's output changed on purpose, record the fixture again with STRATA_UPDATE_FIXTURES=1")
	}

	// Recording the fresh deployment gives the same jobs back.
	again := filepath.Join(t.TempDir(), "again.jsonl")
	d.cli("jobs record", again)
	f, err = os.Open(again)
	if err != nil {
		t.Fatal(err)
	}
	rerecorded, err := natsutil.ReadRecording(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rerecorded) != len(recorded) {
		t.Fatalf("re-recorded %d jobs, the fixture has %d", len(rerecorded), len(recorded))
	}
	for i := range recorded {
		if rerecorded[i].Subject != recorded[i].Subject || string(rerecorded[i].Data) != string(recorded[i].Data) || rerecorded[i].MsgID != recorded[i].MsgID {
			t.Errorf("job %d differs after replay and record", i)
		}
	}
}

// recordReplayFixture runs the fixture's jobs in a deployment, records its
// JOBS stream with the CLI, and writes the fixture and its checksums.
func recordReplayFixture(t *testing.T) {
	t.Helper()
	d := newDeployment(t)
	ms := generate(t, d.dataDir, replayData)
	ev := d.watchEvents()
	d.start("merger", "merger-rec", "--memory", "128MiB")
	d.start("windower", "windower-rec", "--memory", "128MiB")
	var ids []string
	for _, j := range replayJobs(t, ms) {
		subject := messages.SubjectJobMergeout
		if _, ok := j.(*messages.WindowJob); ok {
			subject = messages.SubjectJobWindow
		}
		d.publish(subject, jobID(j), j)
		ids = append(ids, jobID(j))
	}
	sums := outputSums(t, d, ev, ids)
	abs, _ := filepath.Abs(replayFixture)
	d.cli("jobs record", abs)
	b, err := json.MarshalIndent(sums, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(replaySums, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s and %s", replayFixture, replaySums)
}
