package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// keyedTypes are the change-event columns of the keyed table the apply
// tests load: id int64 (the key), g int64, v double, s text.
var keyedTypes = []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowFloat64, messages.RowText}

// keyedModel is the reference: the table as a replay of its changes.
type keyedModel map[int64][]any

func (m keyedModel) rows() []string {
	var out []string
	for id, r := range m {
		s := ""
		if r[3] != nil {
			s = r[3].(string)
		}
		out = append(out, fmt.Sprintf("%d|%d|%g|%s", id, r[1].(int64), r[2].(float64), s))
	}
	slices.Sort(out)
	return out
}

// loadKeyed writes a CSV of n rows (ids 1..n) and loads it keyed on id.
func loadKeyed(t *testing.T, d *deployment, table string, n int) keyedModel {
	t.Helper()
	m := keyedModel{}
	var b strings.Builder
	b.WriteString("id,g,v,s\n")
	for id := int64(1); id <= int64(n); id++ {
		s := any(strings.Repeat("x", int(id%7)*5) + strconv.FormatInt(id, 10))
		field := s.(string)
		if id%9 == 0 {
			s, field = nil, ""
		}
		m[id] = []any{id, id % 5, float64(id) * 0.5, s}
		fmt.Fprintf(&b, "%d,%d,%g,%s\n", id, id%5, float64(id)*0.5, field)
	}
	path := filepath.Join(t.TempDir(), table+".csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cli("load", "--table", table, "--csv", path, "--schema", "id int64, g int64, v double, s varchar",
		"--sort-key", "g, id", "--primary-key", "id", "--block-rows", "16")
	return m
}

// changeEvent makes the event of one change and applies it to m.
func changeEvent(t *testing.T, m keyedModel, table string, i int, rng *rand.Rand) *messages.UpdateEvent {
	t.Helper()
	id := 1 + rng.Int64N(80)
	key, err := messages.EncodeRow(keyedTypes[:1], []any{id})
	if err != nil {
		t.Fatal(err)
	}
	ev := &messages.UpdateEvent{EventID: fmt.Sprintf("%s-change-%d", table, i), Table: table, Columns: keyedTypes, Key: key}
	if rng.IntN(4) == 0 {
		ev.Op = messages.OpDelete
		delete(m, id)
		return ev
	}
	ev.Op = messages.OpUpdate
	if _, ok := m[id]; !ok {
		ev.Op = messages.OpInsert
	}
	var s any = strings.Repeat("y", rng.IntN(40))
	if rng.IntN(6) == 0 {
		s = nil
	}
	row := []any{id, rng.Int64N(5), float64(rng.IntN(1000)) / 4, s}
	if ev.NewRow, err = messages.EncodeRow(keyedTypes, row); err != nil {
		t.Fatal(err)
	}
	m[id] = row
	return ev
}

// queryKeyed reads the table through a window query and returns its rows
// as the model prints them.
func queryKeyed(t *testing.T, d *deployment, table string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "q.csv")
	d.cli("window", "--out", out, fmt.Sprintf("SELECT id, g, v, s, count(*) OVER (PARTITION BY g) AS n FROM %s", table))
	var rows []string
	for _, r := range readCSVRows(t, out) {
		f := strings.Split(r, "|")
		if f[3] == "NULL" {
			f[3] = ""
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatalf("row %q: %v", r, err)
		}
		rows = append(rows, fmt.Sprintf("%s|%s|%g|%s", f[0], f[1], v, f[3]))
	}
	slices.Sort(rows)
	return rows
}

// waitApplied waits until the walwriter consumer's ack floor reaches
// every event published: each is then visible or dead-lettered.
func waitApplied(t *testing.T, d *deployment, timeout time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	s, err := d.js.Stream(ctx, messages.StreamUpdates)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := info.State.LastSeq
	c, err := d.js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, timeout, fmt.Sprintf("the walwriter's ack floor to reach %d", last), func() bool {
		ci, err := c.Info(ctx)
		return err == nil && ci.AckFloor.Stream >= last
	})
	return time.Since(start)
}

// TestChangesReachQueries: a keyed table loaded from CSV takes inserts,
// updates and deletes by key through the walwriter; a window query sees
// exactly the replay of the changes, after a SIGKILL of the walwriter in
// the middle of them and after a mergeout that folds them. The windower
// keeps a block cache: the queries read the blocks the ones before kept,
// of containers the changes and the mergeout add and remove.
func TestChangesReachQueries(t *testing.T) {
	for _, b := range []string{"scheduler", "merger", "windower", "walwriter", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	win := d.start("windower", "windower-1", "--memory", "512MiB", "--block-cache", "64MiB")
	d.start("merger", "merger-1", "--memory", "256MiB")
	walArgs := []string{"--flush-interval", "200ms"}
	w := d.start("walwriter", "walwriter-1", walArgs...)

	m := loadKeyed(t, d, "acct", 60)
	if got := queryKeyed(t, d, "acct"); !slices.Equal(got, m.rows()) {
		t.Fatalf("loaded table:\n got %v\nwant %v", got, m.rows())
	}
	rng := rand.New(rand.NewPCG(5, 6))
	i := 0
	// Half the changes travel one per event, half as change batches of 1
	// to 40, which change a key several times and then keep its last.
	publish := func(n int) {
		for n > 0 {
			if rng.IntN(2) == 0 {
				ev := changeEvent(t, m, "acct", i, rng)
				d.publish(messages.SubjectUpdates("acct"), ev.EventID, ev)
				i, n = i+1, n-1
				continue
			}
			b := &messages.ChangeBatch{BatchID: fmt.Sprintf("acct-batch-%d", i), Table: "acct", Columns: keyedTypes}
			for range min(n, 1+rng.IntN(40)) {
				ev := changeEvent(t, m, "acct", i, rng)
				b.Changes = append(b.Changes, messages.Change{Op: ev.Op, Key: ev.Key, NewRow: ev.NewRow})
				i, n = i+1, n-1
			}
			d.publish(messages.SubjectUpdates("acct"), b.BatchID, b)
		}
	}
	publish(200)
	took := waitApplied(t, d, 60*time.Second)
	t.Logf("200 changes visible %v after the last publish", took)
	compareRows(t, "after 200 changes", queryKeyed(t, d, "acct"), m.rows())

	// The walwriter killed with changes durable and not yet applied: its
	// restart applies them from the WAL, and the events redelivered to
	// it are not applied twice.
	publish(150)
	time.Sleep(100 * time.Millisecond)
	w.kill()
	publish(100)
	w = d.start("walwriter", "walwriter-1", walArgs...)
	waitApplied(t, d, 90*time.Second)
	compareRows(t, "after a SIGKILL of the walwriter", queryKeyed(t, d, "acct"), m.rows())

	// A mergeout of every container folds the changes: one container,
	// holding exactly the live rows.
	d.cli("mergeout", "acct")
	waitFor(t, 60*time.Second, "one merged container", func() bool {
		committed, _ := containers(t, d.dataDir, "acct", "p")
		return len(liveOf(t, d, "acct")) == 1 && len(committed) > 0
	})
	compareRows(t, "after the mergeout", queryKeyed(t, d, "acct"), m.rows())
	live := liveOf(t, d, "acct")
	if live[0].Rows != int64(len(m)) {
		t.Errorf("merged container holds %d rows, the table %d", live[0].Rows, len(m))
	}
	// Every change was at or below the change floor: the fold froze them
	// all (version 0, as loaded) and the table is frozen through the floor.
	man, err := columnar.ReadManifest(columnar.ContainerDir(d.dataDir, "acct", "p", live[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if c := man.Changes; c == nil || c.MinVersion != 0 || c.MaxVersion != 0 || c.Markers != 0 {
		t.Errorf("merged container's change statistics %+v, want every version frozen to 0 and no marker", man.Changes)
	}
	// Changes after the fold resolve against the frozen rows.
	publish(80)
	waitApplied(t, d, 60*time.Second)
	compareRows(t, "after changes to the frozen table", queryKeyed(t, d, "acct"), m.rows())
	// strata ops --applies shows the flushes.
	var applies []map[string]any
	if err := json.Unmarshal([]byte(d.cli("ops", "--applies", "--table", "acct", "--limit", "0", "--format", "json")), &applies); err != nil {
		t.Fatal(err)
	}
	if len(applies) == 0 || applies[0]["table"] != "acct" || applies[0]["wal"] == nil || applies[0]["rows"] == nil {
		t.Errorf("strata ops --applies: %v", applies)
	}
	if hits := win.metric(t, "strata_block_cache_hits_total"); hits == 0 {
		t.Error("the windower's block cache served no block to the queries that read the same containers again")
	}
	w.stop(t)
}

// liveOf returns the live containers of table's projection p.
func liveOf(t *testing.T, d *deployment, table string) []messages.ContainerRef {
	t.Helper()
	var rep messages.CatalogReply
	d.request(messages.SubjectAPICatalog, &messages.CatalogRequest{Table: table, Projection: "p"}, &rep)
	if len(rep.Projections) == 0 {
		return nil
	}
	return rep.Projections[0].Live
}

// TestChangeEventsRefused: change events (and a change batch) that cannot be applied — their
// table unknown or without a primary key, their key not their row's, their
// columns not the table's, a delete whose key does not decode — are
// dead-lettered with a reason; nothing of them is applied, the walwriter
// stays up and healthy, and a good change after them is applied.
func TestChangeEventsRefused(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "walwriter", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	w := d.start("walwriter", "walwriter-1", "--flush-interval", "200ms")
	m := loadKeyed(t, d, "acct", 10)
	d.cli("load", "--table", "plain", "--columns", "3", "--containers", "1", "--rows", "10")

	row := func(id int64) []byte {
		b, err := messages.EncodeRow(keyedTypes, []any{id, int64(1), 2.5, "x"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := func(id int64) []byte {
		b, err := messages.EncodeRow(keyedTypes[:1], []any{id})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := []struct {
		ev   *messages.UpdateEvent
		want string // in the reason
	}{
		{&messages.UpdateEvent{Table: "ghost", Columns: keyedTypes, Key: key(1), NewRow: row(1)}, "not in the catalog"},
		{&messages.UpdateEvent{Table: "plain", Columns: keyedTypes, Key: key(1), NewRow: row(1)}, "no primary key"},
		{&messages.UpdateEvent{Table: "acct", Columns: keyedTypes, Key: key(2), NewRow: row(1)}, "not the encoding of the row's key"},
		{&messages.UpdateEvent{Table: "acct", Columns: []messages.RowType{messages.RowText}, Key: []byte{2, 'a'}, NewRow: []byte{2, 'a'}}, "do not match"},
		{&messages.UpdateEvent{Table: "acct", Op: messages.OpDelete, Columns: keyedTypes, Key: []byte{9, 9}}, "key does not encode"},
	}
	for i, b := range bad {
		b.ev.EventID = fmt.Sprintf("bad-%d", i)
		d.publish(messages.SubjectUpdates(b.ev.Table), b.ev.EventID, b.ev)
	}
	// A batch with one bad change is refused whole: its good change is
	// not applied.
	badBatch := &messages.ChangeBatch{BatchID: "bad-batch", Table: "acct", Columns: keyedTypes, Changes: []messages.Change{
		{Op: messages.OpUpdate, Key: key(4), NewRow: row(4)},
		{Op: messages.OpUpdate, Key: key(6), NewRow: row(5)},
	}}
	d.publish(messages.SubjectUpdates("acct"), badBatch.BatchID, badBatch)
	bad = append(bad, struct {
		ev   *messages.UpdateEvent
		want string
	}{&messages.UpdateEvent{EventID: "bad-batch"}, "batch bad-batch: change 1: key"})
	good := &messages.UpdateEvent{EventID: "good", Table: "acct", Op: messages.OpUpdate, Columns: keyedTypes, Key: key(3), NewRow: row(3)}
	d.publish(messages.SubjectUpdates("acct"), good.EventID, good)
	m[3] = []any{int64(3), int64(1), 2.5, "x"}
	waitApplied(t, d, 60*time.Second)
	compareRows(t, "after the refused events and one good one", queryKeyed(t, d, "acct"), m.rows())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dl, err := d.js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	cons, err := dl.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{messages.SubjectDeadLetter(messages.SubjectUpdatesAll)}})
	if err != nil {
		t.Fatal(err)
	}
	for len(reasons) < len(bad) {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("%d of %d dead letters: %v", len(reasons), len(bad), err)
		}
		r := msg.Headers().Get(messages.HeaderReason)
		for i := range bad {
			if strings.Contains(r, bad[i].ev.EventID+":") || strings.Contains(r, bad[i].want) {
				reasons[fmt.Sprint(i)] = r
			}
		}
	}
	for i, b := range bad {
		if r := reasons[fmt.Sprint(i)]; !strings.Contains(r, b.want) {
			t.Errorf("event %d: dead-letter reason %q, want one saying %q", i, r, b.want)
		}
	}
	if !w.alive() {
		t.Fatal("the walwriter died of the bad events")
	}
	w.waitHealthy(t)
}
