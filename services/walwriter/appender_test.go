package main

import (
	"strings"
	"testing"

	"github.com/strata-db/strata/messages"
)

func TestToUpdate(t *testing.T) {
	cols := []messages.RowType{messages.RowInt64, messages.RowText, messages.RowDate}
	oldRow, _ := messages.EncodeRow(cols, []any{int64(1), "a", nil})
	newRow, _ := messages.EncodeRow(cols, []any{int64(1), "b", int32(19000)})
	ev := &messages.UpdateEvent{EventID: "e1", Table: "accounts", Columns: cols, Key: []byte("k1"), OldRow: oldRow, NewRow: newRow}
	u, table, err := toUpdate(ev)
	if err != nil {
		t.Fatal(err)
	}
	if table.Name != "accounts" || len(table.Columns) != 3 || table.Columns[0] != messages.RowInt64 || table.Columns[1] != messages.RowText || table.Columns[2] != messages.RowDate {
		t.Errorf("table %+v", table)
	}
	if u.EventID != "e1" || string(u.Key) != "k1" || len(u.Row) != 3 || string(u.Row[1]) != "b" {
		t.Errorf("update %+v", u)
	}
	if len(u.Old) != 3 || u.Old[2] != nil {
		t.Errorf("old row %q: want the NULL date as nil", u.Old)
	}
	insert := *ev
	insert.OldRow = nil
	if u, _, err := toUpdate(&insert); err != nil || u.Old != nil {
		t.Errorf("insert: old %q, err %v", u.Old, err)
	}
}

func TestToUpdateRejects(t *testing.T) {
	cols := []messages.RowType{messages.RowInt64}
	row, _ := messages.EncodeRow(cols, []any{int64(1)})
	for name, ev := range map[string]*messages.UpdateEvent{
		"unknown type": {EventID: "e", Table: "t", Columns: []messages.RowType{"decimal"}, Key: []byte("k"), NewRow: row},
		"short row":    {EventID: "e", Table: "t", Columns: []messages.RowType{messages.RowInt64, messages.RowInt64}, Key: []byte("k"), NewRow: row},
		"bad old row":  {EventID: "e", Table: "t", Columns: cols, Key: []byte("k"), NewRow: row, OldRow: []byte{0xff}},
	} {
		if _, _, err := toUpdate(ev); err == nil || !strings.Contains(err.Error(), "event e") {
			t.Errorf("%s: err %v, want one naming the event", name, err)
		}
	}
}
