package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// TestApplyRefusedForFrozenFloor: through the API server and a data
// directory, an apply of a container (written as the walwriter writes
// them) whose changes reach down to the floor a full mergeout freezes the
// table through is refused with code frozen and the floor in the reply,
// taken from the container's manifest; one above the floor goes live.
func TestApplyRefusedForFrozenFloor(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	data, err := columnar.OpenDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	catalogKV, _ := js.KeyValue(ctx, messages.BucketCatalog)
	poolsKV, _ := js.KeyValue(ctx, messages.BucketPools)
	s, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, scheduler.Options{
		Logger: log, Data: dataStorage{data}, Strata: scheduler.StrataOptions{PurgeFraction: -1},
		ChangeFloor: func(context.Context) (int64, error) { return 40, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.Subscribe(messages.SubjectAPIAll, newAPIServer(s, log, prometheus.NewRegistry()).handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	call := func(subject string, req, rep messages.Message) {
		t.Helper()
		body, err := messages.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := nc.RequestWithContext(ctx, subject, body)
		if err != nil {
			t.Fatal(err)
		}
		if err := messages.Unmarshal(msg.Data, rep); err != nil {
			t.Fatal(err)
		}
	}

	ms, err := columnar.GenerateAccounts(dir, columnar.AccountsOptions{Accounts: 1000, RowsPerContainer: 500})
	if err != nil {
		t.Fatal(err)
	}
	reg := &messages.RegisterRequest{Table: "pgbench_accounts", Projection: "p"}
	for _, m := range ms {
		reg.Containers = append(reg.Containers, messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID})
	}
	var regRep messages.RegisterReply
	call(messages.SubjectAPIRegister, reg, &regRep)
	if regRep.Error != nil {
		t.Fatal(regRep.Error)
	}
	tbl, err := applier.NewTable(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	// apply writes a batch of accounts' changes at versions, as the
	// walwriter does, and asks for it to be made live at WAL position to.
	apply := func(to uint64, versions ...uint64) *messages.ApplyReply {
		t.Helper()
		b := tbl.NewBatch()
		for i, v := range versions {
			aid := int64(1 + i)
			key, _ := messages.EncodeRow(tbl.KeyTypes(), []any{aid})
			row, err := messages.EncodeRow(tbl.Types(), []any{aid, int64(1), int64(v), columnar.AccountsFiller})
			if err != nil {
				t.Fatal(err)
			}
			c, err := tbl.Change(&messages.UpdateEvent{EventID: fmt.Sprint(v), Table: tbl.Name, Columns: tbl.Types(), Key: key, NewRow: row})
			if err != nil {
				t.Fatal(err)
			}
			c.Version = v
			b.Add(c)
		}
		id := fmt.Sprintf("wal-t-%d", to)
		m, err := b.Write(columnar.ContainerDir(dir, tbl.Name, tbl.Projection, id), id, applier.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rep messages.ApplyReply
		call(messages.SubjectAPIApply, &messages.ApplyRequest{Table: tbl.Name, Projection: tbl.Projection, WAL: "wal-t", To: to,
			Container: messages.ContainerRef{Table: tbl.Name, Projection: tbl.Projection, ID: id, Rows: m.Rows}}, &rep)
		return &rep
	}
	if rep := apply(1, 12, 30); rep.Error != nil {
		t.Fatalf("apply before any fold: %+v", rep.Error)
	}
	var mrep messages.MergeoutReply
	call(messages.SubjectAPIMergeout, &messages.MergeoutRequest{Table: tbl.Name}, &mrep)
	if mrep.Error != nil || len(mrep.Jobs) != 1 {
		t.Fatalf("mergeout: %+v", mrep)
	}
	rep := apply(2, 41, 39, 50)
	if rep.Error == nil || rep.Error.Code != messages.ErrCodeFrozen || rep.FrozenThrough != 40 {
		t.Fatalf("apply from version 39 with the table frozen through 40: %+v (error %+v), want refused as frozen at 40", rep, rep.Error)
	}
	if rep := apply(3, 41, 42, 50); rep.Error != nil || rep.Applied != 3 {
		t.Fatalf("apply above the floor: %+v (error %+v)", rep, rep.Error)
	}
	var ops messages.OperationsReply
	call(messages.SubjectAPIOperations, &messages.OperationsRequest{Applies: true}, &ops)
	if len(ops.Applies) != 3 || ops.Applies[1].Refused == "" || ops.Applies[0].MinVersion != 41 || ops.Applies[2].Rows != 2 {
		t.Fatalf("applies log: %+v", ops.Applies)
	}
}
