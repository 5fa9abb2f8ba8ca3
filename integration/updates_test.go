package integration

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

var updateColumns = []messages.RowType{messages.RowInt64, messages.RowText, messages.RowFloat64, messages.RowBool}

// updateEvent is the i-th update of a small table: 25 keys, each updated
// over and over with a slowly changing row.
func updateEvent(t *testing.T, i int) *messages.UpdateEvent {
	t.Helper()
	key := i % 25
	row := func(v int) []byte {
		if v < 0 {
			return nil
		}
		b, err := messages.EncodeRow(updateColumns, []any{int64(key), fmt.Sprintf("customer %d, address line that rarely changes", key), float64(v) * 1.5, v%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return &messages.UpdateEvent{
		EventID: fmt.Sprintf("ev-%06d", i), Table: "accounts", Columns: updateColumns,
		Key: fmt.Appendf(nil, "k%03d", key), OldRow: row(i - 25), NewRow: row(i),
	}
}

// TestWALHoldsEveryEventOnce: a walwriter process logs update events;
// events published twice (no dedup by NATS) are written once; after a
// graceful stop the WAL holds every event exactly once with its new row.
func TestWALHoldsEveryEventOnce(t *testing.T) {
	d := newDeployment(t)
	w := d.start("walwriter", "walwriter-1", "--apply=false")
	const n = 600
	sent := map[string][]byte{}
	for i := range n {
		ev := updateEvent(t, i)
		sent[ev.EventID] = ev.NewRow
		d.publish(messages.SubjectUpdates(ev.Table), "", ev)
		if i%20 == 0 { // a producer retry: the same event again
			d.publish(messages.SubjectUpdates(ev.Table), "", ev)
		}
	}
	const published = n + n/20
	waitFor(t, 60*time.Second, "every event acked", func() bool { return w.metric(t, "strata_wal_events_total") >= published })
	if dups := w.metric(t, "strata_wal_duplicates_total"); dups != n/20 {
		t.Errorf("WAL dropped %v duplicates, want %d", dups, n/20)
	}
	t.Logf("wal: %v records, %v bytes (%v as full images), %v fsyncs",
		w.metric(t, "strata_wal_records_total"), w.metric(t, "strata_wal_bytes_total"),
		w.metric(t, "strata_wal_full_image_bytes_total"), w.metric(t, "strata_wal_fsyncs_total"))
	w.stop(t)

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
		if rec.EventID == "" {
			continue // checkpoint
		}
		seen[rec.EventID]++
		want, err := messages.SplitRow(updateColumns, sent[rec.EventID])
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Row) != len(want) {
			t.Fatalf("event %s: %d values, want %d", rec.EventID, len(rec.Row), len(want))
		}
		for c := range want {
			if !slices.Equal(rec.Row[c], want[c]) {
				t.Fatalf("event %s column %d: %q, want %q", rec.EventID, c, rec.Row[c], want[c])
			}
		}
	}
	if len(seen) != n {
		t.Errorf("WAL holds %d distinct events, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s written %d times", id, c)
		}
	}
	rep, err := walwriter.Verify(filepath.Join(d.dataDir, "wal"))
	if err != nil {
		t.Errorf("verify WAL: %v (%+v)", err, rep)
	}
}
