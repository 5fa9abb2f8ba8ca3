package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// account is a row of the pgbench_accounts test table.
type account struct {
	aid, balance, version int64
	deleted               bool
}

// writeAccounts writes a container of pgbench_accounts (aid int32 key,
// bid int32, abalance int32, filler) holding rows, sorted by aid.
func writeAccounts(t *testing.T, data, id string, rows []account) messages.ContainerRef {
	t.Helper()
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "aid", Type: arrow.PrimitiveTypes.Int32},
		{Name: "bid", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "abalance", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "filler", Type: arrow.BinaryTypes.String, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	w, err := columnar.Create(columnar.ContainerDir(data, "pgbench_accounts", "p", id), columnar.WriterOptions{
		Table: "pgbench_accounts", Projection: "p", ID: id, Schema: schema,
		SortKey: columnar.SortKey{{Name: "aid"}}, PrimaryKey: []string{"aid"}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(int32(r.aid))
		if r.deleted {
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
			b.Field(3).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(1)
			b.Field(2).(*array.Int32Builder).Append(int32(r.balance))
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("filler %d", r.aid))
		}
		b.Field(4).(*array.Int64Builder).Append(r.version)
		b.Field(5).(*array.BooleanBuilder).Append(r.deleted)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows}
}

// TestUpdatesAccounts: strata updates reads the current rows of the
// accounts it draws (versions resolved: aid 2's newer row, aid 3 deleted)
// and publishes update events setting abalance += delta: each event's old
// row is the account's row before it, its new row that row with the new
// balance, its key the aid's encoding. aid 3, without a row, is skipped.
func TestUpdatesAccounts(t *testing.T) {
	data := t.TempDir()
	base := writeAccounts(t, data, "c0000", []account{{1, 0, 0, false}, {2, 0, 0, false}, {3, 0, 0, false}, {4, 0, 0, false}})
	newer := writeAccounts(t, data, "c0001", []account{{2, 70, 10, false}, {3, 0, 11, true}})
	url := fakeCatalog(t, messages.ProjectionCatalog{Table: "pgbench_accounts", Projection: "p", PrimaryKey: []string{"aid"},
		Live: []messages.ContainerRef{base, newer}})
	js := connectJS(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *messages.UpdateEvent, 100)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		// Events come in change batches (--batch, 1000 by default): each
		// change of a batch in order.
		b := new(messages.ChangeBatch)
		if err := messages.Unmarshal(msg.Data(), b); err != nil {
			t.Error(err)
		}
		msg.Ack()
		for i := range b.Changes {
			got <- b.Event(i)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	code, _, errText := run(t, "updates", "--events", "40", "--seed", "7", "--wait", "--wait-timeout", "30s", "--nats", url, "--data", data)
	if code != 0 || !strings.Contains(errText, "visible") {
		t.Fatalf("exit %d:\n%s", code, errText)
	}
	// --keys defaults to the table's current rows: 3 (aids 1, 2 and 4), so
	// aids are drawn from 1..3 and aid 3 is skipped.
	if !strings.Contains(errText, "have no row and were skipped") || !strings.Contains(errText, "(1..3)") {
		t.Errorf("no word of the skipped aid 3 drawn from 1..3:\n%s", errText)
	}
	types := []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowText}
	balance := map[int64]int64{1: 0, 2: 70}
	var n int
	if i := strings.Index(errText, "published "); i < 0 {
		t.Fatalf("no count of events published:\n%s", errText)
	} else if _, err := fmt.Sscanf(errText[i:], "published %d update events", &n); err != nil {
		t.Fatalf("%v:\n%s", err, errText)
	}
	for range n {
		var ev *messages.UpdateEvent
		select {
		case ev = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("no event taken")
		}
		key, err := messages.DecodeRow([]messages.RowType{messages.RowInt64}, ev.Key)
		if err != nil {
			t.Fatal(err)
		}
		aid := key[0].(int64)
		oldRow, err := messages.DecodeRow(types, ev.OldRow)
		if err != nil {
			t.Fatal(err)
		}
		newRow, err := messages.DecodeRow(types, ev.NewRow)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := balance[aid]
		if !ok {
			t.Fatalf("event %s updates aid %d, which has no row", ev.EventID, aid)
		}
		delta := newRow[2].(int64) - oldRow[2].(int64)
		if ev.Op != messages.OpUpdate || oldRow[0] != aid || newRow[0] != aid || oldRow[2] != want || delta < -5000 || delta > 5000 ||
			newRow[1] != int64(1) || newRow[3] != fmt.Sprintf("filler %d", aid) || !slices.Equal(ev.Columns, types) {
			t.Errorf("event %s: op %q key %v old %v new %v; want aid %d's balance %d + delta", ev.EventID, ev.Op, key, oldRow, newRow, aid, want)
		}
		balance[aid] = newRow[2].(int64)
	}
	if n < 20 || n >= 40 {
		t.Errorf("%d events, want about two thirds of 40 (aid 3 skipped)", n)
	}

	select {
	case ev := <-got:
		t.Errorf("event %s beyond the %d published", ev.EventID, n)
	case <-time.After(100 * time.Millisecond):
	}

	code, _, errText = run(t, "updates", "--table", "accounts", "--nats", url, "--data", data)
	if code != 1 || !strings.Contains(errText, "table accounts is not in the catalog") || !strings.Contains(errText, "dead-letters") {
		t.Errorf("a table not loaded: exit %d:\n%s", code, errText)
	}
}
