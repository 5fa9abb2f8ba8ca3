package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// catalogOf asks the scheduler for a table's catalog.
func (d *deployment) catalogOf(table string) *messages.CatalogReply {
	d.t.Helper()
	data, err := messages.Marshal(&messages.CatalogRequest{Table: table})
	if err != nil {
		d.t.Fatal(err)
	}
	msg, err := d.nc.Request(messages.SubjectAPICatalog, data, 10*time.Second)
	if err != nil {
		d.t.Fatal(err)
	}
	reply := new(messages.CatalogReply)
	if err := messages.Unmarshal(msg.Data, reply); err != nil {
		d.t.Fatal(err)
	}
	return reply
}

// TestForgedEventsDeleteNothing: with no merger running, a table's
// mergeout stays pending; forged done events for it — from a worker that
// never accepted it, naming another output, or a window done whose output
// points outside the data directory — are dead-lettered as rejected, and
// every container and row of the table is still there, in the catalog
// and on disk, and nothing outside the data directory is touched.
func TestForgedEventsDeleteNothing(t *testing.T) {
	for _, b := range []string{"scheduler", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	outside := filepath.Join(filepath.Dir(d.dataDir), "outside", "victim")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	sentinel := filepath.Join(outside, "keep")
	if err := os.WriteFile(sentinel, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	sched := d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.cli("load", "--table", "victim", "--columns", "4", "--containers", "32", "--rows", "2000", "--seed", "3")
	const jobID = "mergeout.victim.p.1"
	waitFor(t, 30*time.Second, "the mergeout pending", func() bool {
		cr := d.catalogOf("victim")
		return len(cr.Projections) == 1 && len(cr.Projections[0].Running) == 1 && cr.Projections[0].Running[0] == jobID
	})

	forged := []*messages.JobEvent{
		{JobID: jobID, Operation: "mergeout", Type: messages.EventDone, Worker: "attacker"},
		{JobID: jobID, Operation: "mergeout", Type: messages.EventDone, Worker: "attacker", RowsTotal: 64000,
			Output: &messages.ContainerRef{Table: "victim", Projection: "p", ID: "c0000", Rows: 64000}},
		{JobID: "mergeout.victim.p.7", Operation: "mergeout", Type: messages.EventDone, Worker: "merger-1"},
		{JobID: "window.victim.p.2", Operation: "window", Type: messages.EventDone, Worker: "attacker",
			Output: &messages.ContainerRef{Table: "victim", Projection: "p", ID: "../../../../outside/victim"}},
	}
	for _, ev := range forged {
		d.publish(messages.SubjectEventDone, "", ev)
	}
	waitFor(t, 30*time.Second, "forged claims dead-lettered", func() bool {
		return sched.metric(t, "strata_rejected_messages_total", `class="rejected"`) == 3 &&
			sched.metric(t, "strata_rejected_messages_total", `class="malformed"`) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dl, err := d.js.Stream(ctx, "DEADLETTER")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dl.Info(ctx); err != nil || info.State.Msgs < 4 {
		t.Fatalf("dead-letter stream %+v, %v; want the 4 forged events", info, err)
	}

	cr := d.catalogOf("victim")
	if len(cr.Projections) != 1 {
		t.Fatalf("catalog %+v", cr)
	}
	p := cr.Projections[0]
	var rows int64
	for _, c := range p.Live {
		rows += c.Rows
	}
	if len(p.Live) != 32 || rows != 64000 || len(p.Dead) != 0 || len(p.Running) != 1 {
		t.Fatalf("catalog after forged events: %d live (%d rows), %d dead, running %v", len(p.Live), rows, len(p.Dead), p.Running)
	}
	committed, _ := containers(t, d.dataDir, "victim", "p")
	rows = 0
	for _, id := range committed {
		m, err := columnar.ReadManifest(columnar.ContainerDir(d.dataDir, "victim", "p", id))
		if err != nil {
			t.Fatal(err)
		}
		rows += m.Rows
	}
	if len(committed) != 32 || rows != 64000 {
		t.Fatalf("on disk: %d containers, %d rows; want 32 and 64000", len(committed), rows)
	}
	if b, err := os.ReadFile(sentinel); err != nil || string(b) != "keep" {
		t.Fatalf("outside the data directory: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(d.dataDir)); len(ents) != 3 { // data, nats-server, outside
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("beside the data directory: %v", names)
	}
}
