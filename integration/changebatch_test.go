package integration

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// TestChangeBatchBacklog: a walwriter that starts with 80MB of change
// batches waiting (160 batches of 1000 changes with 480-byte strings)
// takes them without overrunning its NATS client's 64MB pending limit:
// its pull requests are bounded in bytes, not only in messages. Before
// they were, it pulled all 160 at once, the client dropped what passed
// the limit as a slow consumer's, and those batches came back only after
// their AckWait. Every change is visible at the end, as the model has it.
func TestChangeBatchBacklog(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "walwriter", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	m := loadKeyed(t, d, "acct", 50)

	const batches, perBatch = 160, 1000
	for i := range batches {
		b := &messages.ChangeBatch{BatchID: fmt.Sprintf("backlog-%d", i), Table: "acct", Columns: keyedTypes}
		for j := range perBatch {
			id := int64(1 + j)
			row := []any{id, int64(i % 5), float64(i), fmt.Sprintf("%03d-%s", i, strings.Repeat("z", 476))}
			key, err := messages.EncodeRow(keyedTypes[:1], []any{id})
			if err != nil {
				t.Fatal(err)
			}
			newRow, err := messages.EncodeRow(keyedTypes, row)
			if err != nil {
				t.Fatal(err)
			}
			b.Changes = append(b.Changes, messages.Change{Op: messages.OpUpdate, Key: key, NewRow: newRow})
			m[id] = row
		}
		d.publish(messages.SubjectUpdates("acct"), b.BatchID, b)
	}

	w := d.start("walwriter", "walwriter-1", "--flush-interval", "200ms")
	took := waitApplied(t, d, 3*time.Minute)
	t.Logf("%d changes in %d batches visible %v after the walwriter started", batches*perBatch, batches, took)
	got := queryKeyed(t, d, "acct")
	if !slices.Equal(got, m.rows()) {
		compareRows(t, "after the backlog", got, m.rows())
	}
	log, err := os.ReadFile(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "slow consumer") {
		t.Errorf("the walwriter's NATS client dropped messages as a slow consumer's:\n%s", tail(grepLines(string(log), "slow consumer"), 5))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
