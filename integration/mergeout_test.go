package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// mergeoutJob merges the given generated containers into output.
func mergeoutJob(id, output string, grant int64, ms []*columnar.Manifest) *messages.MergeoutJob {
	j := &messages.MergeoutJob{JobID: id, Table: ms[0].Table, Projection: ms[0].Projection, Output: output,
		Grant: messages.Grant{Pool: "tm", Bytes: grant, Target: grant}, Created: 1}
	for _, m := range ms {
		j.Inputs = append(j.Inputs, messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows})
	}
	return j
}

func inputDirs(dataDir string, ms []*columnar.Manifest) []string {
	dirs := make([]string, len(ms))
	for i, m := range ms {
		dirs[i] = columnar.ContainerDir(dataDir, m.Table, m.Projection, m.ID)
	}
	return dirs
}

// TestMergeoutEqualsReference: a merger process merges generated
// containers, horizontally with a large grant and vertically with a small
// one; each output equals the stable sort of all input rows, and a
// redelivered job reports its committed output without merging again.
func TestMergeoutEqualsReference(t *testing.T) {
	d := newDeployment(t)
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 24, KeyColumns: 2, Containers: 6, RowsPerContainer: 4000, BlockRows: 1024, Seed: 1})
	want := referenceMerge(t, inputDirs(d.dataDir, ms))
	ev := d.watchEvents()
	merger := d.start("merger", "merger-1", "--memory", "256MiB")

	jobs := map[string]int64{"big": 128 << 20, "small": 2 << 20}
	for id, grant := range jobs {
		d.publish(messages.SubjectJobMergeout, id, mergeoutJob(id, "m-"+id, grant, ms))
	}
	done := ev.waitDone(t, 60*time.Second, "big", "small")
	for id := range jobs {
		e := done[id]
		if e.Output == nil || e.Output.ID != "m-"+id || e.Output.Rows != int64(len(want)) {
			t.Fatalf("job %s: done event output %+v, want m-%s with %d rows", id, e.Output, id, len(want))
		}
		if e.PeakBytes <= 0 || e.PeakBytes > jobs[id] {
			t.Errorf("job %s: peak %d bytes, grant %d", id, e.PeakBytes, jobs[id])
		}
		got := readRows(t, columnar.ContainerDir(d.dataDir, "t", "p", "m-"+id))
		compareRows(t, "merged container m-"+id, got.rows, want)
		if err := columnar.Verify(columnar.ContainerDir(d.dataDir, "t", "p", "m-"+id)); err != nil {
			t.Errorf("verify m-%s: %v", id, err)
		}
		t.Logf("job %s: plan %s, %d rows, peak %d of %d bytes", id, e.Plan, e.Output.Rows, e.PeakBytes, jobs[id])
	}
	if done["small"].Plan == done["big"].Plan {
		t.Logf("note: both grants chose plan %q", done["big"].Plan)
	}

	// The same job again (a redelivery, or a replay outside the dedup
	// window): its output exists, so it is reported done and not merged.
	before, _ := os.Stat(columnar.ContainerDir(d.dataDir, "t", "p", "m-big"))
	d.publish(messages.SubjectJobMergeout, "big-again", mergeoutJob("big", "m-big", 128<<20, ms))
	waitFor(t, 30*time.Second, "second done of job big", func() bool {
		return len(ev.find(func(e *messages.JobEvent) bool { return e.JobID == "big" && e.Type == messages.EventAccepted })) == 2
	})
	waitFor(t, 30*time.Second, "existing-output result", func() bool { return merger.metric(t, "strata_jobs_total", `result="existing"`) == 1 })
	after, _ := os.Stat(columnar.ContainerDir(d.dataDir, "t", "p", "m-big"))
	if !before.ModTime().Equal(after.ModTime()) {
		t.Error("output container rewritten by a repeated job")
	}
	committed, other := containers(t, d.dataDir, "t", "p")
	if len(committed) != len(ms)+2 || len(other) != 0 {
		t.Errorf("projection holds %v and %v; want %d inputs and 2 outputs", committed, other, len(ms))
	}
}

// TestTwoMergersShareWork: two merger processes on one consumer both run jobs.
func TestTwoMergersShareWork(t *testing.T) {
	d := newDeployment(t)
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 16, Containers: 4, RowsPerContainer: 5000, Seed: 2})
	ev := d.watchEvents()
	d.start("merger", "merger-a", "--memory", "128MiB")
	d.start("merger", "merger-b", "--memory", "128MiB")
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("share-%d", i)
		ids = append(ids, id)
		d.publish(messages.SubjectJobMergeout, id, mergeoutJob(id, "m-"+id, 64<<20, ms))
	}
	done := ev.waitDone(t, 90*time.Second, ids...)
	byWorker := map[string]int{}
	for _, e := range done {
		byWorker[e.Worker]++
	}
	if byWorker["merger-a"] == 0 || byWorker["merger-b"] == 0 {
		t.Errorf("jobs per worker %v: want both mergers to run jobs", byWorker)
	}
	t.Logf("jobs per worker: %v", byWorker)
	want := checksum(referenceMerge(t, inputDirs(d.dataDir, ms)))
	for _, id := range ids {
		if got := checksum(readRows(t, columnar.ContainerDir(d.dataDir, "t", "p", "m-"+id)).rows); got != want {
			t.Errorf("output m-%s checksum %s, want %s", id, got, want)
		}
	}
}

// TestMergerKilledMidJob: a merger SIGKILLed while merging loses its lease;
// the job is redelivered to another merger and completes; no container is
// lost or duplicated, and the output's rows equal the reference.
func TestMergerKilledMidJob(t *testing.T) {
	d := newDeployment(t)
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 64, Containers: 8, RowsPerContainer: 10000, BlockRows: 2048, Seed: 3})
	ref := referenceMerge(t, inputDirs(d.dataDir, ms))
	ev := d.watchEvents()
	victim := d.start("merger", "merger-victim", "--memory", "64MiB", "--parallelism", "1")
	// A small grant makes a vertical merge: slow enough to kill mid-job.
	d.publish(messages.SubjectJobMergeout, "crash", mergeoutJob("crash", "m-crash", 8<<20, ms))
	waitFor(t, 30*time.Second, "job accepted by the victim", func() bool {
		return len(ev.find(func(e *messages.JobEvent) bool { return e.JobID == "crash" && e.Type == messages.EventAccepted })) > 0
	})
	time.Sleep(200 * time.Millisecond)
	victim.kill()
	if len(ev.find(func(e *messages.JobEvent) bool { return e.JobID == "crash" && e.Type == messages.EventDone })) > 0 {
		t.Skip("the job finished before the kill; nothing to test on this machine")
	}
	d.start("merger", "merger-survivor", "--memory", "64MiB")
	done := ev.waitDone(t, 90*time.Second, "crash")
	if done["crash"].Worker != "merger-survivor" || done["crash"].Delivery < 2 {
		t.Errorf("done by %s on delivery %d; want merger-survivor on a redelivery", done["crash"].Worker, done["crash"].Delivery)
	}
	got := readRows(t, columnar.ContainerDir(d.dataDir, "t", "p", "m-crash"))
	if len(got.rows) != len(ref) || checksum(got.rows) != checksum(ref) {
		t.Fatalf("after crash: %d rows checksum %s; want %d rows checksum %s", len(got.rows), checksum(got.rows), len(ref), checksum(ref))
	}
	committed, other := containers(t, d.dataDir, "t", "p")
	slices.Sort(committed)
	want := []string{}
	for _, m := range ms {
		want = append(want, m.ID)
	}
	want = append(want, "m-crash")
	slices.Sort(want)
	if !slices.Equal(committed, want) {
		t.Errorf("committed containers %v, want %v", committed, want)
	}
	for _, o := range other {
		t.Logf("left beside the containers: %s", o)
	}
	for _, m := range ms { // inputs untouched
		if err := columnar.Verify(filepath.Join(d.dataDir, "t", "p", m.ID)); err != nil {
			t.Errorf("input %s: %v", m.ID, err)
		}
	}
	// The survivor swept the victim's spill directory when it started:
	// only its own is left.
	spill, err := os.ReadDir(filepath.Join(d.dataDir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spill) != 1 {
		var names []string
		for _, e := range spill {
			names = append(names, e.Name())
		}
		t.Errorf("spill space holds %v, want only the live merger's directory", names)
	}
}

// TestMergerGracefulStop: a merger stopped with SIGTERM mid-job either
// finishes the job within its --stop-grace, or releases it at once (Nak)
// so another merger runs it without waiting for the lease to expire.
func TestMergerGracefulStop(t *testing.T) {
	d := newDeployment(t)
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 64, Containers: 8, RowsPerContainer: 10000, BlockRows: 2048, Seed: 6})
	ev := d.watchEvents()
	accepted := func(id string) func() bool {
		return func() bool {
			return len(ev.find(func(e *messages.JobEvent) bool { return e.JobID == id && e.Type == messages.EventAccepted })) > 0
		}
	}

	// With a long grace the job finishes before the process exits.
	patient := d.start("merger", "merger-patient", "--memory", "64MiB", "--parallelism", "1", "--stop-grace", "60s")
	d.publish(messages.SubjectJobMergeout, "finish", mergeoutJob("finish", "m-finish", 8<<20, ms))
	waitFor(t, 30*time.Second, "job accepted", accepted("finish"))
	patient.stop(t)
	if done := ev.find(func(e *messages.JobEvent) bool { return e.JobID == "finish" && e.Type == messages.EventDone }); len(done) != 1 || done[0].Worker != "merger-patient" {
		t.Fatalf("after a graceful stop: done events %v, want one by merger-patient", done)
	}

	// With no grace the job is handed back and another merger takes it at once.
	hasty := d.start("merger", "merger-hasty", "--memory", "64MiB", "--parallelism", "1", "--stop-grace", "1ms")
	d.publish(messages.SubjectJobMergeout, "release", mergeoutJob("release", "m-release", 8<<20, ms))
	waitFor(t, 30*time.Second, "job accepted", accepted("release"))
	hasty.stop(t)
	stopped := time.Now()
	d.start("merger", "merger-next", "--memory", "64MiB")
	done := ev.waitDone(t, 60*time.Second, "release")["release"]
	if done.Worker != "merger-next" || done.Delivery != 2 {
		t.Errorf("released job done by %s on delivery %d; want merger-next on delivery 2", done.Worker, done.Delivery)
	}
	t.Logf("released job done %v after the stop (lease %v)", time.Since(stopped).Round(time.Millisecond), d.topo.JobAckWait)
	ref := checksum(referenceMerge(t, inputDirs(d.dataDir, ms)))
	for _, out := range []string{"m-finish", "m-release"} {
		if got := checksum(readRows(t, columnar.ContainerDir(d.dataDir, "t", "p", out)).rows); got != ref {
			t.Errorf("%s checksum %s, want %s", out, got, ref)
		}
	}
	if _, other := containers(t, d.dataDir, "t", "p"); len(other) != 0 {
		t.Errorf("left beside the containers: %v", other)
	}
}
