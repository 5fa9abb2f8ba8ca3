package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/messages"
)

// replyFaults are the ways a client can lose the outcome of a request the
// scheduler carried out, injected by the scheduler's test failpoint
// (STRATA_TEST_API_FAULT): the reply comes after the client stopped
// waiting, it is lost, or the scheduler dies between its catalog write
// and its reply (and is started again).
var replyFaults = []struct {
	name, fault string
	restart     bool
}{
	{"reply late", "delay=3s", false},
	{"reply lost", "drop=1", false},
	{"killed before the reply", "exit", true},
}

// faultedCLI runs a CLI command against a scheduler started with the
// failpoint OP:FAULT; when the fault kills the scheduler, it starts a new
// one (without the failpoint) once the first has died, as a supervisor
// would. It returns the command's stdout and stderr, failing the test if
// the command failed.
func (d *deployment) faultedCLI(t *testing.T, op string, fault string, restart bool, schedArgs []string, words string, args ...string) (string, string) {
	t.Helper()
	sched := d.startEnv([]string{"STRATA_TEST_API_FAULT=" + op + ":" + fault}, "scheduler", "scheduler", schedArgs...)
	args = append(append(strings.Fields(words), "--nats", d.nats.ClientURL(), "--data", d.dataDir, "--request-timeout", "20ms"), args...)
	cmd := exec.Command(filepath.Join(binDir, "strata"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if restart {
		select {
		case <-sched.done:
		case <-time.After(time.Minute):
			t.Fatal("the scheduler did not die at its failpoint")
		}
		time.Sleep(time.Second) // the client asks a scheduler that is not there
		sched = d.start("scheduler", "scheduler", schedArgs...)
	}
	err := cmd.Wait()
	sched.stop(t)
	if err != nil {
		t.Fatalf("strata %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	return stdout.String(), stderr.String()
}

// TestLoadLateReply is the reproduction of a load whose registration
// reply came late: the CLI took the time-out for a refusal and removed the
// 16 containers the catalog had just made live. Now, with the reply late,
// lost, or never sent by a scheduler killed after its catalog write, the
// load is settled: the table ends registered with every file present, in
// the data directory and in a bucket. A load the scheduler refuses leaves
// no file.
func TestLoadLateReply(t *testing.T) {
	for _, b := range []string{"scheduler", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	srv, st := testBucket(t)
	for _, where := range []string{"local", "store"} {
		for i, f := range replyFaults {
			t.Run(where+"/"+f.name, func(t *testing.T) {
				t.Parallel() // each has its deployment; most of it is waiting
				d := newDeployment(t)
				table := "r" + string(rune('a'+i))
				var schedArgs, loadArgs []string
				if where == "store" {
					schedArgs = []string{"--data", ownDir(t)("scheduler"), "--store", srv.URL}
					loadArgs = []string{"--store", srv.URL}
				}
				loadArgs = append(loadArgs, "--table", table, "--columns", "40", "--containers", "16", "--rows", "4000")
				_, errOut := d.faultedCLI(t, "register", f.fault, f.restart, schedArgs, "load", loadArgs...)
				if !strings.Contains(errOut, "registered: "+table+".p has 16 live containers") {
					t.Fatalf("load's stderr:\n%s", errOut)
				}
				d.start("scheduler", "scheduler", schedArgs...)
				live := liveIDs(t, d.catalogOf(table))
				if len(live) != 16 {
					t.Fatalf("%d live containers, want 16: %v", len(live), live)
				}
				if where == "local" {
					checkLocalContainers(t, d.dataDir, table, live)
				} else {
					checkStoreContainers(t, st, table, live)
				}
			})
		}
		t.Run(where+"/refused", func(t *testing.T) {
			t.Parallel()
			d := newDeployment(t)
			table := "refused"
			schedArgs := []string{"--max-containers", "8"}
			loadArgs := []string{"--table", table, "--columns", "4", "--containers", "16", "--rows", "100"}
			if where == "store" {
				schedArgs = append(schedArgs, "--data", ownDir(t)("scheduler"), "--store", srv.URL)
				loadArgs = append(loadArgs, "--store", srv.URL)
			}
			d.start("scheduler", "scheduler", schedArgs...)
			_, errOut, err := d.cliErr("load", loadArgs...)
			if err == nil || !strings.Contains(errOut, "too many containers") || !strings.Contains(errOut, "were removed") {
				t.Fatalf("load past the limit: %v\n%s", err, errOut)
			}
			if live := liveIDs(t, d.catalogOf(table)); len(live) != 0 {
				t.Fatalf("live after a refused load: %v", live)
			}
			if where == "local" {
				checkLocalContainers(t, d.dataDir, table, nil)
			} else {
				checkStoreContainers(t, st, table, nil)
			}
		})
	}
}

// testBucket starts an S3 server in the test's process and opens its
// bucket.
func testBucket(t *testing.T) (*s3test.Server, store.Store) {
	t.Helper()
	srv := s3test.Start(t, "strata")
	st, err := store.Open(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return srv, st
}

// TestRequestsLateReply: the other requests that change something are
// settled the same way: sent again with their request ID until the
// scheduler answers, which answers the first time's way and does not do
// it twice.
func TestRequestsLateReply(t *testing.T) {
	for _, b := range []string{"scheduler", "merger", "windower", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	for _, f := range replyFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			d := newDeployment(t)
			d.start("windower", "windower-1", "--memory", "256MiB")
			d.start("merger", "merger-1", "--memory", "256MiB")
			sched := d.start("scheduler", "scheduler")
			d.cli("load", "--table", "t", "--columns", "4", "--containers", "6", "--rows", "500")
			sched.stop(t)

			// A window query: one job, one result table.
			out, _ := d.faultedCLI(t, "window", f.fault, f.restart, nil, "window", "--format", "csv", "--rows", "1",
				"SELECT k0, count(*) OVER () AS n FROM t")
			if !strings.Contains(out, ",3000") {
				t.Fatalf("window printed %q", out)
			}
			if n := d.jobsPublished(t, messages.SubjectJobWindow); n != 1 {
				t.Fatalf("%d window jobs, want 1", n)
			}

			// A pool: created once, answered as done.
			d.faultedCLI(t, "pools.create", f.fault, f.restart, nil, "pools create", "etl", "--memorysize", "64MiB")

			// A drop: answered with what it dropped, not "not live".
			live := liveIDs(t, d.catalogOfRestarted(t, "t"))
			out, errOut := d.faultedCLI(t, "containers.drop", f.fault, f.restart, nil, "containers drop", "t", live[0])
			if !strings.Contains(out, live[0]) || !strings.Contains(errOut, "dropped 1 containers from t.p; 5 live") {
				t.Fatalf("drop printed %q, %q", out, errOut)
			}

			// A mergeout: one job over the five left.
			d.faultedCLI(t, "mergeout", f.fault, f.restart, nil, "mergeout", "t")
			if n := d.jobsPublished(t, messages.SubjectJobMergeout); n != 1 {
				t.Fatalf("%d mergeouts, want 1", n)
			}
			d.start("scheduler", "scheduler")
			if live := liveIDs(t, d.catalogOf("t")); len(live) != 1 {
				t.Fatalf("live after the mergeout: %v", live)
			}
			var pools messages.PoolsReply
			d.request(messages.SubjectAPIPools, &messages.PoolsRequest{}, &pools)
			if !slices.ContainsFunc(pools.Pools, func(p messages.PoolStatus) bool { return p.Config.Name == "etl" }) {
				t.Fatalf("pool etl missing: %+v", pools.Pools)
			}
		})
	}
}

// catalogOfRestarted starts a scheduler, reads the table's catalog and
// stops it again.
func (d *deployment) catalogOfRestarted(t *testing.T, table string) *messages.CatalogReply {
	t.Helper()
	sched := d.start("scheduler", "scheduler")
	defer sched.stop(t)
	return d.catalogOf(table)
}

// request asks the scheduler and decodes its reply into rep.
func (d *deployment) request(subject string, req, rep messages.Message) {
	d.t.Helper()
	data, err := messages.Marshal(req)
	if err != nil {
		d.t.Fatal(err)
	}
	msg, err := d.nc.Request(subject, data, 10*time.Second)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := messages.Unmarshal(msg.Data, rep); err != nil {
		d.t.Fatal(err)
	}
}

// jobsPublished counts the jobs stored in JOBS on subject (a job published
// again is stored once, deduplicated by its ID).
func (d *deployment) jobsPublished(t *testing.T, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.js.Stream(ctx, messages.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

func liveIDs(t *testing.T, cat *messages.CatalogReply) []string {
	t.Helper()
	if cat.Error != nil {
		t.Fatal(cat.Error)
	}
	var ids []string
	for _, p := range cat.Projections {
		for _, c := range p.Live {
			ids = append(ids, c.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// checkLocalContainers checks that the table's projection directory holds
// exactly the live containers, each whole.
func checkLocalContainers(t *testing.T, dataDir, table string, live []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, table, "p"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var onDisk []string
	for _, e := range entries {
		onDisk = append(onDisk, e.Name())
	}
	if !slices.Equal(onDisk, live) {
		t.Fatalf("containers on disk %v, live %v", onDisk, live)
	}
	for _, id := range live {
		if err := columnar.Verify(columnar.ContainerDir(dataDir, table, "p", id)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkStoreContainers checks that the bucket holds exactly the live
// containers of the table, each committed and whole.
func checkStoreContainers(t *testing.T, st store.Store, table string, live []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := store.Join(table, "p") + "/"
	objs, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var inBucket []string
	for _, e := range store.Prefixes(objs, prefix) {
		inBucket = append(inBucket, e.Name)
	}
	slices.Sort(inBucket)
	if !slices.Equal(inBucket, live) {
		t.Fatalf("containers in the bucket %v, live %v", inBucket, live)
	}
	for _, id := range live {
		if _, err := store.Check(ctx, st, table, "p", id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentLoadsNumbered: two loads into one table at once, from two
// "hosts" (data directories of their own) sharing a bucket, each seeing
// nothing of the other's files: the scheduler's reservations number their
// containers apart, so both are registered whole. Before, each listed the
// bucket, took the same next free numbers, and one load's commit lost.
func TestConcurrentLoadsNumbered(t *testing.T) {
	for _, b := range []string{"scheduler", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	srv, st := testBucket(t)
	d := newDeployment(t)
	own := ownDir(t)
	d.start("scheduler", "scheduler", "--data", own("scheduler"), "--store", srv.URL)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			args := []string{"load", "--nats", d.nats.ClientURL(), "--data", own(fmt.Sprintf("host%d", i)), "--store", srv.URL,
				"--table", "both", "--columns", "6", "--containers", "8", "--rows", "500", "--seed", fmt.Sprint(i + 1)}
			out, err := exec.Command(filepath.Join(binDir, "strata"), args...).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("load %d: %v\n%s", i, err, out)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	live := liveIDs(t, d.catalogOf("both"))
	if len(live) != 16 {
		t.Fatalf("%d live containers after two loads of 8: %v", len(live), live)
	}
	checkStoreContainers(t, st, "both", live)
}
