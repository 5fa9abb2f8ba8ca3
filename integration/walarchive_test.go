package integration

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// TestWALArchiveRestore: a walwriter with --store copies its sealed
// segments to an S3 bucket while it takes update events, and on a clean
// stop the segment it was writing; `strata wal restore` makes of the bucket
// a WAL with exactly the walwriter's records. Restarted, it finds that
// segment archived and uploads nothing again.
func TestWALArchiveRestore(t *testing.T) {
	if !haveBinary("strata") {
		t.Skip("strata CLI is not built")
	}
	srv := s3test.Start(t, "strata") // sets the AWS variables the children inherit
	d := newDeployment(t)
	args := []string{"--store", srv.URL, "--archive-prefix", "wal/w1/", "--segment-size", "128KiB", "--no-delta", "--apply=false"}
	w := d.start("walwriter", "walwriter-1", args...)
	const n = 3000
	for i := range n {
		ev := updateEvent(t, i)
		d.publish(messages.SubjectUpdates(ev.Table), "", ev)
	}
	waitFor(t, 60*time.Second, "every event acked", func() bool { return w.metric(t, "strata_wal_events_total") >= n })
	waitFor(t, 30*time.Second, "sealed segments archived", func() bool {
		return w.metric(t, "strata_wal_archived_segments_total") >= 2 && w.metric(t, "strata_wal_archive_lag_segments") == 0
	})
	w.stop(t) // SIGTERM: the segment being written goes up too

	dst := filepath.Join(t.TempDir(), "restored")
	cmd := exec.Command(filepath.Join(binDir, "strata"), "wal", "restore", "--from", srv.URL, "--prefix", "wal/w1/", dst)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("strata wal restore: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "records 3000") {
		t.Errorf("strata wal restore printed:\n%s", stdout.String())
	}
	want, got := walRecords(t, filepath.Join(d.dataDir, "wal")), walRecords(t, dst)
	if len(want) < n || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %d records, the walwriter's WAL holds %d", len(got), len(want))
	}

	w = d.start("walwriter", "walwriter-1", args...)
	waitFor(t, 30*time.Second, "the restarted walwriter's first archive pass", func() bool {
		return w.metric(t, "strata_wal_archive_stored_segments") >= 3 && w.metric(t, "strata_wal_archive_lag_segments") == 0
	})
	if n := w.metric(t, "strata_wal_archived_segments_total"); n != 0 {
		t.Errorf("the restarted walwriter uploaded %v segments, want none: the stop archived them all", n)
	}
	w.stop(t)
}

// walRecords reads the LSN, event ID and row of every record of dir.
func walRecords(t *testing.T, dir string) []string {
	t.Helper()
	r, err := walwriter.NewReader(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		s := []string{rec.Kind.String(), rec.EventID}
		for _, v := range rec.Row {
			s = append(s, string(v))
		}
		out = append(out, strings.Join(s, "|"))
	}
}
