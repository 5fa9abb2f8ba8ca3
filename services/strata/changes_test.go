package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// changesSchema is the keyed test table: every type a change carries, and
// a two-column key (region, id) whose order is not the schema's.
func changesSchema() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "atz", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "region", Type: arrow.BinaryTypes.String},
	}
	return arrow.NewSchema(append(fields, columnar.ChangeFields()...), nil)
}

// writeChangesTable writes one container of the keyed test table (rows
// (region "eu", id 1..rows)) under data and returns its manifest.
func writeChangesTable(t *testing.T, data, table string, rows int) *columnar.Manifest {
	t.Helper()
	schema := changesSchema()
	w, err := columnar.Create(columnar.ContainerDir(data, table, "p", "c0000"), columnar.WriterOptions{
		Table: table, Projection: "p", ID: "c0000", Schema: schema,
		SortKey: columnar.SortKey{{Name: "region"}, {Name: "id"}}, PrimaryKey: []string{"region", "id"}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range rows {
		for c, f := range schema.Fields() {
			switch f.Name {
			case "id":
				b.Field(c).(*array.Int32Builder).Append(int32(i + 1))
			case "region":
				b.Field(c).(*array.StringBuilder).Append("eu")
			case columnar.VersionColumn:
				b.Field(c).(*array.Int64Builder).Append(0)
			case columnar.DeletedColumn:
				b.Field(c).(*array.BooleanBuilder).Append(false)
			default:
				b.Field(c).AppendNull()
			}
		}
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
	return m
}

func changesTable(t *testing.T) *applier.Table {
	t.Helper()
	kt, err := applier.NewTable(writeChangesTable(t, t.TempDir(), "t", 1))
	if err != nil {
		t.Fatal(err)
	}
	return kt
}

const changesHeader = "op,id,name,amount,small,flag,day,at,atz,blob,region\n"

func readAll(t *testing.T, kt *applier.Table, csv string, nulls ...string) ([]*change, error) {
	t.Helper()
	if nulls == nil {
		nulls = convert.DefaultNulls
	}
	var out []*change
	_, err := readChanges(strings.NewReader(csv), "c.csv", kt, nulls, func(ch *change) error {
		out = append(out, ch)
		return nil
	})
	return out, err
}

func TestChangesCSVValues(t *testing.T) {
	kt := changesTable(t)
	csv := "\ufeff" + changesHeader +
		"insert,1,plain,2.5,-7,true,2024-01-15,2024-01-15 10:30:00,2024-01-15T10:30:00.123456+02:00,aGk=,eu\n" +
		"U,2,\"comma, and \"\"quotes\"\"\",NaN,32767,f,1969-12-31,2024-01-15T10:30,2024-01-15 08:00:00Z,,eu\n" +
		"\n" + // blank lines are skipped
		"d,3,,,,,,,,,eu\n" +
		"Delete,4,ignored but checked,1e3,,,,,,,eu\n" +
		"i,5,\"two\nlines\",,,,,2024-02-29,,,\"u\"\"s\"\n" +
		"UPDATE,6,NULL,,,,,,,,eu\n"
	got, err := readAll(t, kt, csv)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(s string) any {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMicro()
	}
	// Values in schema order: id, name, amount, small, flag, day, at, atz, blob, region.
	want := []struct {
		line int
		op   string
		row  []any
	}{
		{2, messages.OpInsert, []any{int64(1), "plain", 2.5, int64(-7), true, int32(19737), ts("2024-01-15T10:30:00Z"), ts("2024-01-15T08:30:00.123456Z"), []byte("hi"), "eu"}},
		{3, messages.OpUpdate, []any{int64(2), `comma, and "quotes"`, nil, int64(32767), false, int32(-1), ts("2024-01-15T10:30:00Z"), ts("2024-01-15T08:00:00Z"), nil, "eu"}},
		{5, messages.OpDelete, []any{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, "eu"}},
		{6, messages.OpDelete, []any{int64(4), nil, nil, nil, nil, nil, nil, nil, nil, "eu"}},
		{7, messages.OpInsert, []any{int64(5), "two\nlines", nil, nil, nil, nil, ts("2024-02-29T00:00:00Z"), nil, nil, `u"s`}},
		{9, messages.OpUpdate, []any{int64(6), nil, nil, nil, nil, nil, nil, nil, nil, "eu"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d changes, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.line != w.line || g.op != w.op {
			t.Errorf("change %d: line %d op %q, want line %d op %q", i, g.line, g.op, w.line, w.op)
		}
		if i == 1 {
			// NaN is not equal to itself: check it, then compare the rest.
			if f, ok := g.row[2].(float64); !ok || f == f {
				t.Errorf("change 1 amount = %v, want NaN", g.row[2])
			}
			g.row[2] = nil
		}
		if fmt.Sprintf("%#v", g.row) != fmt.Sprintf("%#v", w.row) {
			t.Errorf("line %d:\n got %#v\nwant %#v", w.line, g.row, w.row)
		}
	}
}

// TestChangesEvents: the events built from a file decode back to exactly
// the file's values: the table's row types, the key in the key's order
// (region, id), the new row of an insert or update, no row for a delete.
func TestChangesEvents(t *testing.T) {
	kt := changesTable(t)
	wantTypes := []messages.RowType{messages.RowInt64, messages.RowText, messages.RowFloat64, messages.RowInt64, messages.RowBool,
		messages.RowDate, messages.RowTimestamp, messages.RowTimestamp, messages.RowBytes, messages.RowText}
	if !slices.Equal(kt.Types(), wantTypes) {
		t.Fatalf("row types %v, want %v", kt.Types(), wantTypes)
	}
	got, err := readAll(t, kt, changesHeader+
		"u,7,\"a, \"\"b\"\"\",-0.5,3,1,2000-01-01,,,AAE=,north\n"+
		"d,8,,,,,,,,,south\n")
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range got {
		ev, err := ch.event(kt, fmt.Sprintf("ev-%d", ch.line))
		if err != nil {
			t.Fatal(err)
		}
		data, err := messages.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back messages.UpdateEvent
		if err := messages.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if back.EventID != fmt.Sprintf("ev-%d", ch.line) || back.Table != "t" || !slices.Equal(back.Columns, wantTypes) || len(back.OldRow) != 0 {
			t.Errorf("event %d: %+v", i, back)
		}
		key, err := messages.DecodeRow(kt.KeyTypes(), back.Key)
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			if back.Op != messages.OpUpdate || fmt.Sprint(key) != "[north 7]" {
				t.Errorf("update: op %q key %v", back.Op, key)
			}
			row, err := messages.DecodeRow(back.Columns, back.NewRow)
			if err != nil {
				t.Fatal(err)
			}
			want := []any{int64(7), `a, "b"`, -0.5, int64(3), true, int32(10957), nil, nil, []byte{0, 1}, "north"}
			if fmt.Sprintf("%#v", row) != fmt.Sprintf("%#v", want) {
				t.Errorf("update row:\n got %#v\nwant %#v", row, want)
			}
		case 1:
			if back.Op != messages.OpDelete || fmt.Sprint(key) != "[south 8]" || len(back.NewRow) != 0 || !back.IsDelete() {
				t.Errorf("delete: op %q key %v new row %x", back.Op, key, back.NewRow)
			}
		}
		if err := back.Validate(); err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
}

// TestChangesCSVErrors: every error names the file, the line and, for a
// field, the column.
func TestChangesCSVErrors(t *testing.T) {
	kt := changesTable(t)
	row := func(fields ...string) string {
		// op and id, then name..blob empty unless given, region eu.
		f := []string{"u", "1", "", "", "", "", "", "", "", "", "eu"}
		for i := 0; i+1 < len(fields); i += 2 {
			f[slices.Index(strings.Split(strings.TrimSpace(changesHeader), ","), fields[i])] = fields[i+1]
		}
		return strings.Join(f, ",") + "\n"
	}
	for _, tt := range []struct {
		name, csv string
		line      int
		column    string
		msg       string
	}{
		{"empty file", "", 1, "", "no header row"},
		{"op not first", "id,op,name,amount,small,flag,day,at,atz,blob,region\n", 1, "id", "the first column must be op"},
		{"missing column", "op,id,name,small,flag,day,at,atz,blob,region\n", 1, "", `missing column "amount"`},
		{"unknown column", strings.TrimSuffix(changesHeader, "\n") + ",colour\n", 1, "", `unknown column "colour"`},
		{"missing and unknown", "op,id,nme,amount,small,flag,day,at,atz,blob,region\n", 1, "", `missing column "name"; unknown column "nme"`},
		{"change column", strings.TrimSuffix(changesHeader, "\n") + "," + columnar.VersionColumn + "\n", 1, "", `unknown column "_strata_version"`},
		{"column twice", strings.TrimSuffix(changesHeader, "\n") + ",id\n", 1, "id", "named twice"},
		{"bad op", changesHeader + row() + row("op", "upsert"), 3, "op", `op "upsert": want insert, update or delete`},
		{"empty op", changesHeader + row("op", ""), 2, "op", `op ""`},
		{"bad integer", changesHeader + row("id", "x1"), 2, "id", `cannot parse "x1" as int32`},
		{"int16 out of range", changesHeader + row("small", "40000"), 2, "small", `cannot parse "40000" as int16: out of range`},
		{"int32 key out of range", changesHeader + row("id", "3000000000"), 2, "id", "out of range"},
		{"NULL key", changesHeader + row("id", ""), 2, "id", "NULL in a key column"},
		{"NULL key spelled NULL", changesHeader + row("region", "NULL"), 2, "region", "NULL in a key column"},
		{"hex float", changesHeader + row("amount", "0x1p3"), 2, "amount", `cannot parse "0x1p3" as float64`},
		{"bad bool", changesHeader + row("flag", "yes"), 2, "flag", `cannot parse "yes" as bool`},
		{"bad date", changesHeader + row("day", "2023-02-29"), 2, "day", "want YYYY-MM-DD"},
		{"zone in a naive timestamp", changesHeader + row("at", "2024-01-15 10:30:00+02"), 2, "at", "zone offset"},
		{"nanoseconds", changesHeader + row("atz", "2024-01-15 10:30:00.123456789Z"), 2, "atz", "more precise than microseconds"},
		{"bad base64", changesHeader + row("blob", "!!"), 2, "blob", "want base64"},
		{"too few fields", changesHeader + "u,1,eu\n", 2, "", "3 fields, the header has 11"},
		{"bare quote", changesHeader + "u,1,a\"b,,,,,,,,eu\n", 2, "", `bare " in non-quoted-field`},
		{"delete checks its other fields", changesHeader + row("op", "d", "small", "x"), 2, "small", `cannot parse "x" as int16`},
		{"field after a line break", changesHeader + "u,1,\"two\nlines\",oops,,,,,,,eu\n", 3, "amount", `cannot parse "oops"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(t, kt, tt.csv)
			var ce *convert.CSVError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *convert.CSVError", err, err)
			}
			if ce.Name != "c.csv" || ce.Line != tt.line || ce.Column != tt.column || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q (line %d, column %q), want line %d, column %q, containing %q", err, ce.Line, ce.Column, tt.line, tt.column, tt.msg)
			}
			prefix := fmt.Sprintf("c.csv:%d: ", tt.line)
			if tt.column != "" {
				prefix += fmt.Sprintf("column %q: ", tt.column)
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not begin %q", err, prefix)
			}
		})
	}
}

func TestChangesCSVNullSpellings(t *testing.T) {
	kt := changesTable(t)
	// With --null \N only, the empty field is an empty string and NULL a word.
	_, err := readAll(t, kt, changesHeader+"u,1,,,,,,,,,eu\nu,2,NULL,\\N,,,,,,,eu\n", `\N`)
	if err == nil || !strings.Contains(err.Error(), `c.csv:2: column "amount": cannot parse "" as float64`) {
		t.Fatalf("empty float with --null \\N: %v", err)
	}
	got, err := readAll(t, kt, changesHeader+"u,1,,\\N,\\N,\\N,\\N,\\N,\\N,\\N,eu\nu,2,NULL,\\N,\\N,\\N,\\N,\\N,\\N,\\N,eu\n", `\N`)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].row[1] != "" || got[1].row[1] != "NULL" || got[0].row[2] != nil {
		t.Errorf("names %#v and %#v, amount %#v; want \"\", \"NULL\", nil", got[0].row[1], got[1].row[1], got[0].row[2])
	}
}

// TestChangesFileIDs: the event IDs derive from the table and the file's
// bytes, so the same file gives the same IDs and another file or table
// others.
func TestChangesFileIDs(t *testing.T) {
	kt := changesTable(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.csv", changesHeader+"u,1,x,,,,,,,,eu\nd,2,,,,,,,,,eu\n")
	b := write("b.csv", changesHeader+"u,1,y,,,,,,,,eu\nd,2,,,,,,,,,eu\n")
	sumA, rows, err := scanChangeFile(a, kt, convert.DefaultNulls, nil)
	if err != nil || rows != 2 || len(sumA) != 64 {
		t.Fatalf("scan: %q, %d rows, %v", sumA, rows, err)
	}
	again, _, _ := scanChangeFile(a, kt, convert.DefaultNulls, nil)
	sumB, _, _ := scanChangeFile(b, kt, convert.DefaultNulls, nil)
	other := *kt
	other.Name = "u"
	sumU, _, _ := scanChangeFile(a, &other, convert.DefaultNulls, nil)
	if again != sumA || sumB == sumA || sumU == sumA {
		t.Errorf("sums: a %s, a again %s, b %s, a for table u %s", sumA, again, sumB, sumU)
	}
}

// TestChangesCommand runs strata changes against a JetStream server, with
// the test in the walwriter's place: it takes each event from the
// walwriter's consumer and acks it, but dead-letters the event of line 3
// first. The command publishes one event per row with Nats-Msg-Id = event
// ID, waits for the ack floor and fails naming line 3; the same file sent
// again is stored once.
func TestChangesCommand(t *testing.T) {
	data := t.TempDir()
	m := writeChangesTable(t, data, "t", 3)
	url := fakeCatalog(t, messages.ProjectionCatalog{Table: "t", Projection: "p", PrimaryKey: []string{"region", "id"},
		Live: []messages.ContainerRef{{Table: "t", Projection: "p", ID: m.ID, Rows: m.Rows}}})
	js := connectJS(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *messages.UpdateEvent, 100)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		ev := new(messages.UpdateEvent)
		if err := messages.Unmarshal(msg.Data(), ev); err != nil {
			t.Error(err)
		}
		if id := msg.Headers().Get(messages.HeaderMsgID); id != ev.EventID {
			t.Errorf("Nats-Msg-Id %q, event ID %q", id, ev.EventID)
		}
		if strings.HasSuffix(ev.EventID, "-3") {
			dl := natsutil.DeadLetterFromMsg(msg, "walwriter", "key does not match the key columns")
			if err := natsutil.PublishDeadLetter(ctx, js, dl); err != nil {
				t.Error(err)
			}
			msg.Term()
		} else {
			msg.Ack()
		}
		got <- ev
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	file := filepath.Join(t.TempDir(), "changes.csv")
	if err := os.WriteFile(file, []byte(changesHeader+
		"update,1,one,1.5,,,,,,,eu\n"+
		"i,9,\"nine, new\",,,,,,,,eu\n"+
		"D,2,,,,,,,,,eu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"changes", "--table", "t", "--csv", file, "--nats", url, "--data", data, "--wait-timeout", "30s", "--batch", "1"}
	code, _, errText := run(t, args...)
	if code != 1 || !strings.Contains(errText, "published 3 changes") ||
		!strings.Contains(errText, "line 3 (stream sequence 2): key does not match the key columns") ||
		!strings.Contains(errText, "1 of 3 changes were dead-lettered") {
		t.Fatalf("exit %d, want 1 naming line 3:\n%s", code, errText)
	}
	var evs []*messages.UpdateEvent
	for range 3 {
		select {
		case ev := <-got:
			evs = append(evs, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events taken, want 3", len(evs))
		}
	}
	prefix := strings.TrimSuffix(evs[0].EventID, "2")
	for i, want := range []struct {
		op  string
		key string
		row string
	}{
		{messages.OpUpdate, "[eu 1]", `[1 one 1.5 <nil> <nil> <nil> <nil> <nil> <nil> eu]`},
		{messages.OpInsert, "[eu 9]", `[9 nine, new <nil> <nil> <nil> <nil> <nil> <nil> <nil> eu]`},
		{messages.OpDelete, "[eu 2]", ""},
	} {
		ev := evs[i]
		key, err := messages.DecodeRow([]messages.RowType{messages.RowText, messages.RowInt64}, ev.Key)
		if err != nil {
			t.Fatal(err)
		}
		row := ""
		if len(ev.NewRow) > 0 {
			vals, err := messages.DecodeRow(ev.Columns, ev.NewRow)
			if err != nil {
				t.Fatal(err)
			}
			row = fmt.Sprint(vals)
		}
		if ev.EventID != fmt.Sprintf("%s%d", prefix, i+2) || ev.Op != want.op || fmt.Sprint(key) != want.key || row != want.row {
			t.Errorf("event %d: id %s op %q key %s row %s; want id %s%d op %q key %s row %s",
				i, ev.EventID, ev.Op, key, row, prefix, i+2, want.op, want.key, want.row)
		}
	}
	if !strings.HasPrefix(prefix, "chg-") || len(prefix) != len("chg-")+16+1 {
		t.Errorf("event ID prefix %q, want chg-<16 hex digits>-", prefix)
	}

	// The same file again: stored once, nothing new to wait for.
	code, _, errText = run(t, args...)
	if code != 0 || !strings.Contains(errText, "3 of them were already in the stream") || !strings.Contains(errText, "visible") {
		t.Errorf("the same file again: exit %d:\n%s", code, errText)
	}
	s, err := js.Stream(ctx, messages.StreamUpdates)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 3 {
		t.Errorf("stream holds %d events, want 3", n)
	}
	select {
	case ev := <-got:
		t.Errorf("event %s delivered again", ev.EventID)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestChangesCommandBatches is TestChangesCommand with the default
// --batch: the file's changes travel as one change batch, with
// Nats-Msg-Id = batch ID; a batch dead-lettered for its second change is
// reported as the batch's lines, naming line 3; the same file sent again
// is stored once.
func TestChangesCommandBatches(t *testing.T) {
	data := t.TempDir()
	m := writeChangesTable(t, data, "t", 3)
	url := fakeCatalog(t, messages.ProjectionCatalog{Table: "t", Projection: "p", PrimaryKey: []string{"region", "id"},
		Live: []messages.ContainerRef{{Table: "t", Projection: "p", ID: m.ID, Rows: m.Rows}}})
	js := connectJS(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cons, err := js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *messages.ChangeBatch, 100)
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		b := new(messages.ChangeBatch)
		if err := messages.Unmarshal(msg.Data(), b); err != nil {
			t.Error(err)
		}
		if id := msg.Headers().Get(messages.HeaderMsgID); id != b.BatchID {
			t.Errorf("Nats-Msg-Id %q, batch ID %q", id, b.BatchID)
		}
		dl := natsutil.DeadLetterFromMsg(msg, "walwriter", fmt.Sprintf("batch %s: change 1: key does not match the key columns", b.BatchID))
		if err := natsutil.PublishDeadLetter(ctx, js, dl); err != nil {
			t.Error(err)
		}
		msg.Term()
		got <- b
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	file := filepath.Join(t.TempDir(), "changes.csv")
	if err := os.WriteFile(file, []byte(changesHeader+
		"update,1,one,1.5,,,,,,,eu\n"+
		"i,9,\"nine, new\",,,,,,,,eu\n"+
		"D,2,,,,,,,,,eu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"changes", "--table", "t", "--csv", file, "--nats", url, "--data", data, "--wait-timeout", "30s"}
	code, _, errText := run(t, args...)
	if code != 1 || !strings.Contains(errText, "published 3 changes") ||
		!strings.Contains(errText, "the 3 lines of one batch, 2 to 4, for line 3 (stream sequence 1)") ||
		!strings.Contains(errText, "3 of 3 changes were dead-lettered") {
		t.Fatalf("exit %d, want 1 naming the batch and line 3:\n%s", code, errText)
	}
	var b *messages.ChangeBatch
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch taken")
	}
	if len(b.Changes) != 3 || b.Changes[0].Op != messages.OpUpdate || b.Changes[1].Op != messages.OpInsert || b.Changes[2].Op != messages.OpDelete ||
		len(b.Changes[2].NewRow) != 0 || !strings.HasPrefix(b.BatchID, "chg-") || !strings.HasSuffix(b.BatchID, "-2+3") {
		t.Errorf("batch %s: %+v, want the update, insert and delete of lines 2..4", b.BatchID, b.Changes)
	}
	if err := b.Validate(); err != nil {
		t.Error(err)
	}

	// The same file again: stored once.
	code, _, errText = run(t, args...)
	if !strings.Contains(errText, "3 of them were already in the stream") {
		t.Errorf("the same file again: exit %d:\n%s", code, errText)
	}
	select {
	case b := <-got:
		t.Errorf("batch %s delivered again", b.BatchID)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestChangesCommandRefusals(t *testing.T) {
	data := t.TempDir()
	m := writeChangesTable(t, data, "t", 1)
	url := fakeCatalog(t,
		messages.ProjectionCatalog{Table: "t", Projection: "p", PrimaryKey: []string{"region", "id"},
			Live: []messages.ContainerRef{{Table: "t", Projection: "p", ID: m.ID}}},
		messages.ProjectionCatalog{Table: "plain", Projection: "p", Live: []messages.ContainerRef{{Table: "plain", Projection: "p", ID: "c0000"}}})
	file := filepath.Join(t.TempDir(), "c.csv")
	if err := os.WriteFile(file, []byte("op,id,region\nu,1,eu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--csv", file, "--nats", url, "--data", data, "--no-wait"}
	for _, tt := range []struct {
		table string
		code  int
		msg   string
	}{
		{"missing", 1, "table missing is not in the catalog"},
		{"plain", 1, "table plain has no primary key"},
		{"t", 1, `c.csv:1: missing columns "name", "amount"`},
	} {
		code, _, errText := run(t, append([]string{"changes", "--table", tt.table}, conn...)...)
		if code != tt.code || !strings.Contains(errText, tt.msg) {
			t.Errorf("--table %s: exit %d, want %d with %q:\n%s", tt.table, code, tt.code, tt.msg, errText)
		}
	}
	if code, _, errText := run(t, "changes", "--table", "t", "--nats", url); code != 2 || !strings.Contains(errText, "want --csv FILE") {
		t.Errorf("without --csv: exit %d:\n%s", code, errText)
	}
}

// connectJS connects to the test server at url.
func connectJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
