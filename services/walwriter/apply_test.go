package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// frozenScheduler answers strata.api.apply as the scheduler does for a
// table frozen through floor: a container whose change statistics reach
// down to the floor is refused with code frozen and the floor; any other
// is applied.
type frozenScheduler struct {
	data  string
	floor uint64

	mu      sync.Mutex
	applied []*columnar.Manifest
	refused []string
}

func (f *frozenScheduler) serve(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe(messages.SubjectAPIApply, func(msg *nats.Msg) {
		var req messages.ApplyRequest
		rep := &messages.ApplyReply{}
		if err := messages.Unmarshal(msg.Data, &req); err != nil {
			rep.Error = &messages.APIError{Code: "invalid", Message: err.Error()}
		} else if m, err := columnar.ReadManifest(columnar.ContainerDir(f.data, req.Table, req.Projection, req.Container.ID)); err != nil {
			rep.Error = &messages.APIError{Code: "invalid", Message: err.Error()}
		} else {
			f.mu.Lock()
			if m.Changes == nil || m.Changes.MinVersion <= int64(f.floor) {
				f.refused = append(f.refused, req.Container.ID)
				rep.Error = &messages.APIError{Code: messages.ErrCodeFrozen, Message: "frozen"}
				rep.FrozenThrough = f.floor
			} else {
				f.applied = append(f.applied, m)
				rep.Applied = req.To
			}
			f.mu.Unlock()
		}
		data, _ := messages.Marshal(rep)
		msg.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
}

// applyTestTable is a keyed table: id int64 key, v int64.
func applyTestTable(t *testing.T) *applier.Table {
	t.Helper()
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	cols, err := columnar.SchemaColumns(schema)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := applier.NewTable(&columnar.Manifest{Version: columnar.ManifestVersion, Table: "t", Projection: "p",
		PrimaryKey: []string{"id"}, SortKey: columnar.SortKey{{Name: "id"}}, Schema: cols})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// change is key id's row (id, v) at version.
func change(t *testing.T, tbl *applier.Table, id, v int64, version uint64) applier.Change {
	t.Helper()
	key, err := messages.EncodeRow(tbl.KeyTypes(), []any{id})
	if err != nil {
		t.Fatal(err)
	}
	row, err := messages.EncodeRow(tbl.Types(), []any{id, v})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tbl.Change(&messages.UpdateEvent{EventID: fmt.Sprint(version), Table: "t", Columns: tbl.Types(), Key: key, NewRow: row})
	if err != nil {
		t.Fatal(err)
	}
	c.Version = version
	return c
}

// TestApplyDropsFrozenChanges: refused for the table's frozen floor, a
// batch loses its changes at or below the floor (late events: dead-lettered
// or applied already), counted, and the rest is written again under
// another name and applied; the refused container is removed. A batch
// wholly at or below the floor applies nothing and is done.
func TestApplyDropsFrozenChanges(t *testing.T) {
	_, nc, _ := natstest.Start(t, natsutil.Topology{})
	data := t.TempDir()
	sched := &frozenScheduler{data: data, floor: 10}
	sched.serve(t, nc)
	tbl := applyTestTable(t)
	a := &changeApplier{data: data, state: appliedState{WAL: "wal-test"}, m: newMetrics(),
		api: &apiclient.Client{NC: nc, Timeout: 5 * time.Second, Settle: 10 * time.Second},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()

	b := &tableBatch{t: tbl, batch: tbl.NewBatch(), from: 1, to: 9}
	for _, c := range []applier.Change{
		change(t, tbl, 1, 100, 3),  // dead-lettered, replayed from the WAL
		change(t, tbl, 2, 200, 10), // at the floor
		change(t, tbl, 3, 300, 12),
		change(t, tbl, 4, 400, 11),
	} {
		b.batch.Add(c)
	}
	if err := a.applyBatch(ctx, b); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := counterValue(a.m.droppedFrozen); got != 2 {
		t.Errorf("dropped changes counted: %v, want 2", got)
	}
	if len(sched.refused) != 1 || len(sched.applied) != 1 {
		t.Fatalf("refused %v, applied %d containers; want one of each", sched.refused, len(sched.applied))
	}
	m := sched.applied[0]
	if m.Rows != 2 || m.Changes.MinVersion != 11 || m.Changes.MaxVersion != 12 || m.ID == sched.refused[0] {
		t.Fatalf("applied container %s: %d rows, versions %+v; want 2 rows of versions 11..12 under another name than %s",
			m.ID, m.Rows, m.Changes, sched.refused[0])
	}
	if _, err := os.Stat(columnar.ContainerDir(data, "t", "p", sched.refused[0])); !os.IsNotExist(err) {
		t.Errorf("refused container still there: %v", err)
	}
	var versions []uint64
	for _, c := range b.batch.Changes() {
		versions = append(versions, c.Version)
	}
	slices.Sort(versions)
	if !slices.Equal(versions, []uint64{11, 12}) {
		t.Errorf("batch after the drop: versions %v, want 11 12", versions)
	}

	// Every change at or below the floor: nothing applied, the batch done.
	late := &tableBatch{t: tbl, batch: tbl.NewBatch(), from: 20, to: 21}
	late.batch.Add(change(t, tbl, 5, 500, 4))
	late.batch.Add(change(t, tbl, 6, 600, 9))
	if err := a.applyBatch(ctx, late); err != nil {
		t.Fatalf("apply of late changes only: %v", err)
	}
	if len(sched.refused) != 2 || len(sched.applied) != 1 || late.batch.Len() != 0 {
		t.Fatalf("late changes only: refused %v, applied %d, %d left; want a second refusal, nothing applied, none left",
			sched.refused, len(sched.applied), late.batch.Len())
	}
	if got := counterValue(a.m.droppedFrozen); got != 4 {
		t.Errorf("dropped changes counted: %v, want 4", got)
	}
}

// TestApplyBatchAgainWithStore: a batch whose container reached the store
// but whose apply was not answered (the reply lost, the scheduler killed)
// is written and applied again at the next flush, its upload finding the
// container already committed; that must not stop the batch for good.
func TestApplyBatchAgainWithStore(t *testing.T) {
	_, nc, _ := natstest.Start(t, natsutil.Topology{})
	data := t.TempDir()
	sched := &frozenScheduler{data: data}
	sched.serve(t, nc)
	st, err := store.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tbl := applyTestTable(t)
	a := &changeApplier{data: data, store: st, state: appliedState{WAL: "wal-test"}, m: newMetrics(),
		api: &apiclient.Client{NC: nc, Timeout: 5 * time.Second, Settle: 10 * time.Second},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b := &tableBatch{t: tbl, batch: tbl.NewBatch(), from: 1, to: 2}
	b.batch.Add(change(t, tbl, 1, 100, 21))
	b.batch.Add(change(t, tbl, 2, 200, 22))
	// The first attempt: written and uploaded, then no answer.
	id := "wal-test-2"
	dir := columnar.ContainerDir(data, "t", "p", id)
	if _, err := b.batch.Write(dir, id, applier.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Upload(context.Background(), st, dir, "t", "p", id); err != nil {
		t.Fatal(err)
	}
	if err := a.applyBatch(context.Background(), b); err != nil {
		t.Fatalf("apply again after an unanswered attempt: %v", err)
	}
	if len(sched.applied) != 1 || sched.applied[0].ID != id {
		t.Fatalf("applied %d containers, want %s", len(sched.applied), id)
	}
}
