package integration

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// TestPipelineOverStore runs the pipeline with containers in an S3 bucket
// (an S3 server in this process, over real HTTP) and nothing else shared
// but NATS: the scheduler, a merger, a windower and the CLI each have
// their own data directory, and the workers their own depot. The CLI
// loads into the bucket, the merger merges, the windower runs a query;
// the merged container and the window result equal the local reference,
// the retired inputs are deleted from the bucket, and an upload a killed
// worker left without a commit is swept at the scheduler's restart.
func TestPipelineOverStore(t *testing.T) {
	for _, b := range []string{"scheduler", "merger", "windower", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	srv := s3test.Start(t, "strata") // sets the AWS variables the children inherit
	url := srv.URL
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	d := newDeployment(t)
	gen := columnar.GenOptions{Table: "t", Projection: "p", Columns: 6, Containers: 8, RowsPerContainer: 500, Seed: 7, BlockRows: 256}
	refDir := t.TempDir()
	ref := generate(t, refDir, gen)
	refRows := referenceMerge(t, inputDirs(refDir, ref))

	own := ownDir(t)
	sdir := own("scheduler")
	sched := d.start("scheduler", "scheduler", "--data", sdir, "--store", url)
	mdir := own("merger")
	merger := d.start("merger", "merger-1", "--memory", "128MiB", "--data", mdir, "--store", url, "--depot", filepath.Join(mdir, "depot"), "--depot-size", "64MiB")
	wdir := own("windower")
	windower := d.start("windower", "windower-1", "--memory", "512MiB", "--data", wdir, "--store", url, "--depot", filepath.Join(wdir, "depot"))

	d.cli("load", "--data", own("cli-load"), "--store", url, "--table", "t", "--columns", "6", "--containers", "8", "--rows", "500", "--seed", "7", "--block-rows", "256")
	d.cli("mergeout", "t")

	merged := waitMerged(t, st, len(refRows))
	checkMerged(t, st, merged, refRows)
	if n := merger.metric(t, "strata_depot_misses_total"); n != 8 {
		t.Errorf("merger fetched %v inputs, want 8", n)
	}
	if n := merger.metric(t, "strata_depot_fetched_bytes_total"); n <= 0 {
		t.Errorf("merger fetched %v bytes", n)
	}
	if _, err := os.Stat(filepath.Join(sdir, "t")); err == nil {
		t.Errorf("the scheduler's data directory holds containers")
	}

	// A window query over the merged container, read from the bucket.
	out := filepath.Join(t.TempDir(), "window.csv")
	d.cli("window", "--data", own("cli-window"), "--store", url, "--out", out, windowSQL)
	compareRows(t, "window result", readCSVRows(t, out), referenceWindow(t, inputDirs(refDir, ref)))
	if n := windower.metric(t, "strata_depot_misses_total"); n != 1 {
		t.Errorf("windower fetched %v inputs, want 1", n)
	}

	// A worker killed mid-upload leaves column files of an attempt and no
	// commit; the scheduler's sweep at start removes them, not the live
	// container.
	src := columnar.ContainerDir(refDir, "t", "p", ref[0].ID)
	for _, fm := range ref[0].Files[:2] {
		if err := st.Put(t.Context(), store.ContainerPrefix("t", "p", "c9999")+"a0000000000000001/"+fm.Name, filepath.Join(src, fm.Name), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	sched.stop(t)
	d.start("scheduler", "scheduler-2", "--data", own("scheduler-2"), "--store", url, "--orphan-grace", "10ms")
	waitFor(t, 30*time.Second, "the unfinished upload swept", func() bool {
		objs, err := st.List(t.Context(), "t/p/c9999/")
		return err == nil && len(objs) == 0
	})
	if _, err := store.Check(t.Context(), st, "t", "p", merged); err != nil {
		t.Errorf("the live container after the sweep: %v", err)
	}
}

// ownDir returns a function making a directory of a name under the
// test's temporary directory, for a process of its own.
func ownDir(t *testing.T) func(name string) string {
	return func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
}

// waitMerged waits until the bucket's projection t/p holds one container,
// committed, of rows rows (the mergeout done and its retired inputs
// deleted), and returns its ID.
func waitMerged(t *testing.T, st store.Store, rows int) string {
	t.Helper()
	var merged string
	waitFor(t, 60*time.Second, "one merged container, alone in the bucket", func() bool {
		objs, err := st.List(t.Context(), "t/p/")
		if err != nil {
			t.Fatal(err)
		}
		ents := store.Prefixes(objs, "t/p/")
		if len(ents) != 1 {
			return false
		}
		m, err := store.ReadManifest(t.Context(), st, "t", "p", ents[0].Name)
		if err != nil || m.Rows != int64(rows) {
			return false
		}
		merged = ents[0].Name
		return true
	})
	return merged
}

// checkMerged fetches container t/p/merged from the bucket and checks it
// is sorted and holds the reference rows.
func checkMerged(t *testing.T, st store.Store, merged string, refRows []string) {
	t.Helper()
	local := filepath.Join(t.TempDir(), "t", "p", merged)
	if _, _, err := store.Fetch(t.Context(), st, "t", "p", merged, local); err != nil {
		t.Fatal(err)
	}
	got := readRows(t, local)
	for i := 1; i < len(got.keys); i++ {
		if bytes.Compare(got.keys[i-1], got.keys[i]) > 0 {
			t.Fatalf("merged container %s out of order at row %d", merged, i)
		}
	}
	gotSorted, wantSorted := slices.Clone(got.rows), slices.Clone(refRows)
	slices.Sort(gotSorted)
	slices.Sort(wantSorted)
	compareRows(t, "merged container (as a set)", gotSorted, wantSorted)
}

// TestStoreWorkerKilledMidUpload: a merger SIGKILLed while its output is
// being uploaded, its pack in the bucket and its commit not, leaves an
// attempt no commit names. Another merger takes the redelivered job, uploads
// and commits an attempt of its own; the output equals the reference, the
// half-upload stays until the scheduler's sweep past the grace period and
// then goes, and the committed attempt is untouched.
func TestStoreWorkerKilledMidUpload(t *testing.T) {
	for _, b := range []string{"scheduler", "merger", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	srv := s3test.Start(t, "strata")
	url := srv.URL
	st, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	d := newDeployment(t)
	gen := columnar.GenOptions{Table: "t", Projection: "p", Columns: 6, Containers: 8, RowsPerContainer: 500, Seed: 7, BlockRows: 256}
	refDir := t.TempDir()
	ref := generate(t, refDir, gen)
	refRows := referenceMerge(t, inputDirs(refDir, ref))

	own := ownDir(t)
	sched := d.start("scheduler", "scheduler", "--data", own("scheduler"), "--store", url)
	merger := func(name string) *proc {
		dir := own(name)
		return d.start("merger", name, "--memory", "128MiB", "--data", dir, "--store", url, "--depot", filepath.Join(dir, "depot"))
	}
	m1 := merger("merger-1")
	d.cli("load", "--data", own("cli-load"), "--store", url, "--table", "t", "--columns", "6", "--containers", "8", "--rows", "500", "--seed", "7", "--block-rows", "256")

	// The output's commit is held: its pack is in the bucket, the
	// container is not committed.
	held, release := srv.HoldPuts("t/p/*/commit")
	mergeout := make(chan error, 1) // the CLI waits for the job
	go func() {
		_, stderr, err := d.cliErr("mergeout", "t")
		if err != nil {
			err = fmt.Errorf("%v\n%s", err, tail(stderr, 30))
		}
		mergeout <- err
	}()
	var key string
	select {
	case key = <-held:
	case err := <-mergeout:
		t.Fatalf("strata mergeout ended before the upload was held: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no upload of the merge's output was seen")
	}
	m1.kill()
	release()
	output := strings.Split(key, "/")[2] // t/p/<output>/commit
	objs, err := st.List(t.Context(), store.ContainerPrefix("t", "p", output))
	if err != nil || len(objs) != 1 || path.Base(objs[0].Key) != store.PackName {
		t.Fatalf("the killed upload left %v (%v), want its pack alone", keys(objs), err)
	}
	half := path.Dir(objs[0].Key) + "/"

	merger("merger-2")
	merged := waitMerged(t, st, len(refRows))
	if merged != output {
		t.Fatalf("merged container %s, the job's output is %s", merged, output)
	}
	checkMerged(t, st, merged, refRows)
	select {
	case err := <-mergeout:
		if err != nil {
			t.Fatalf("strata mergeout: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("strata mergeout still waiting after the output was committed")
	}
	_, committed, err := store.Committed(t.Context(), st, "t", "p", merged)
	if err != nil || committed == half {
		t.Fatalf("committed attempt %s (%v), the killed one was %s", committed, err, half)
	}
	if objs, _ := st.List(t.Context(), half); len(objs) != 1 {
		t.Errorf("the half-upload went before the sweep: %v", keys(objs))
	}

	// The scheduler's sweep at start, past the grace period.
	time.Sleep(50 * time.Millisecond)
	sched.stop(t)
	d.start("scheduler", "scheduler-2", "--data", own("scheduler-2"), "--store", url, "--orphan-grace", "10ms")
	waitFor(t, 30*time.Second, "the half-upload swept", func() bool {
		objs, err := st.List(t.Context(), half)
		return err == nil && len(objs) == 0
	})
	if _, err := store.Check(t.Context(), st, "t", "p", merged); err != nil {
		t.Errorf("the merged container after the sweep: %v", err)
	}
	checkMerged(t, st, merged, refRows)
}

func keys(objs []store.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}
