package applier

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// testTable is a keyed table (name text, id int64 key; v float32; d date)
// sorted on v then the key, described by its manifest as the walwriter
// finds it.
func testTable(t *testing.T) *Table {
	t.Helper()
	m := &columnar.Manifest{Version: columnar.ManifestVersion, Table: "t", Projection: "p", PrimaryKey: []string{"id", "name"},
		SortKey: columnar.SortKey{{Name: "v", Desc: true}, {Name: "id"}, {Name: "name"}}}
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "v", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	cols, err := columnar.SchemaColumns(schema)
	if err != nil {
		t.Fatal(err)
	}
	m.Schema = cols
	tbl, err := NewTable(m)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func event(t *testing.T, tbl *Table, op string, name string, id int64, v any, d any) *messages.UpdateEvent {
	t.Helper()
	key, err := messages.EncodeRow(tbl.KeyTypes(), []any{id, name})
	if err != nil {
		t.Fatal(err)
	}
	ev := &messages.UpdateEvent{EventID: "e", Table: "t", Columns: tbl.Types(), Key: key, Op: op}
	if op != messages.OpDelete {
		if ev.NewRow, err = messages.EncodeRow(tbl.Types(), []any{name, id, v, d}); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

// Events are checked against the table: columns, key, row.
func TestChangeChecks(t *testing.T) {
	tbl := testTable(t)
	if got := tbl.KeyTypes(); len(got) != 2 || got[0] != messages.RowInt64 || got[1] != messages.RowText {
		t.Fatalf("key types %v, want the key's order: int64, text", got)
	}
	if _, err := tbl.Change(event(t, tbl, messages.OpInsert, "a", 1, 2.5, int32(3))); err != nil {
		t.Fatalf("a good insert: %v", err)
	}
	if c, err := tbl.Change(event(t, tbl, messages.OpDelete, "a", 1, nil, nil)); err != nil || !c.Delete || c.Row != nil {
		t.Fatalf("a good delete: %+v, %v", c, err)
	}
	bad := event(t, tbl, messages.OpUpdate, "a", 1, 2.5, nil)
	bad.Key, _ = messages.EncodeRow(tbl.KeyTypes(), []any{int64(2), "a"})
	if _, err := tbl.Change(bad); err == nil || !strings.Contains(err.Error(), "not the encoding of the row's key") {
		t.Fatalf("a key not the row's: %v", err)
	}
	wrong := event(t, tbl, messages.OpUpdate, "a", 1, 2.5, nil)
	wrong.Columns = wrong.Columns[:3]
	if _, err := tbl.Change(wrong); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Fatalf("columns of another table: %v", err)
	}
	nullKey := event(t, tbl, messages.OpUpdate, "a", 1, nil, nil)
	nullKey.NewRow, _ = messages.EncodeRow(tbl.Types(), []any{nil, int64(1), nil, nil})
	if _, err := tbl.Change(nullKey); err == nil || !strings.Contains(err.Error(), "NULL") {
		t.Fatalf("a NULL key column: %v", err)
	}
	del := event(t, tbl, messages.OpDelete, "a", 1, nil, nil)
	del.Key = []byte{0xff}
	if _, err := tbl.Change(del); err == nil {
		t.Fatal("a delete whose key does not decode was taken")
	}
}

// A batch keeps the highest version of each key, whatever the order the
// changes come in, and writes a container sorted on the table's sort key
// with a delete marker for each key it deletes; values read back through
// Value as they went in; a value out of its column's range is refused.
func TestBatchWrite(t *testing.T) {
	tbl := testTable(t)
	b := tbl.NewBatch()
	add := func(ev *messages.UpdateEvent, version uint64) {
		t.Helper()
		c, err := tbl.Change(ev)
		if err != nil {
			t.Fatal(err)
		}
		c.Version = version
		b.Add(c)
	}
	add(event(t, tbl, messages.OpInsert, "x", 1, 1.5, int32(10)), 5)
	add(event(t, tbl, messages.OpUpdate, "x", 1, 9.5, nil), 3) // older: loses
	add(event(t, tbl, messages.OpInsert, "y", 2, 7.25, int32(-1)), 6)
	add(event(t, tbl, messages.OpDelete, "z", 3, nil, nil), 8)
	add(event(t, tbl, messages.OpInsert, "y", 2, 0.5, nil), 9)
	if b.Len() != 3 || b.Deletes() != 1 {
		t.Fatalf("batch of %d keys, %d deletes; want 3 and 1", b.Len(), b.Deletes())
	}
	dir := filepath.Join(t.TempDir(), "w-9")
	m, err := b.Write(dir, "w-9", WriteOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 3 || len(m.PrimaryKey) != 2 || m.Changes == nil || m.Changes.Markers != 1 || m.Changes.MaxVersion != 9 {
		t.Fatalf("manifest: %d rows, key %v, changes %+v", m.Rows, m.PrimaryKey, m.Changes)
	}
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	br, err := c.OpenColumns([]int{0, 1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	rec, err := br.Next()
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var got []string
	for r := range int(rec.NumRows()) {
		var vals []string
		for col := range 6 {
			vals = append(vals, fmtValue(Value(rec.Column(col), r)))
		}
		got = append(got, strings.Join(vals, " "))
	}
	// v DESC (NULLs last by default), then id, name.
	want := []string{"x 1 1.5 10 5 false", "y 2 0.5 <nil> 9 false", "z 3 <nil> <nil> 8 true"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("rows:\n%v\nwant\n%v", got, want)
	}

	big := tbl.NewBatch()
	ev := event(t, tbl, messages.OpInsert, "w", 1<<40, 1.0, nil)
	ch, err := tbl.Change(ev)
	if err != nil {
		t.Fatal(err)
	}
	big.Add(ch)
	if _, err := big.Record(memory.DefaultAllocator); err == nil || !strings.Contains(err.Error(), "out of the range") {
		t.Fatalf("an id beyond int32: %v", err)
	}
}

func fmtValue(v any) string {
	if v == nil {
		return "<nil>"
	}
	return fmt.Sprint(v)
}
