package messages

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleUpdate(t *testing.T) *UpdateEvent {
	t.Helper()
	cols := []RowType{RowInt64, RowText}
	oldRow, err := EncodeRow(cols, []any{int64(1), "before"})
	if err != nil {
		t.Fatal(err)
	}
	newRow, err := EncodeRow(cols, []any{int64(1), "after"})
	if err != nil {
		t.Fatal(err)
	}
	return &UpdateEvent{EventID: "p1-42", Table: "accounts", Columns: cols, Key: []byte{0, 1}, OldRow: oldRow, NewRow: newRow}
}

func TestUpdateEventRoundTrip(t *testing.T) {
	in := sampleUpdate(t)
	data, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out UpdateEvent
	if err := Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, &out) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
}

func TestUpdateEventValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(e *UpdateEvent)
		want   string
	}{
		{"no event id", func(e *UpdateEvent) { e.EventID = "" }, "event_id is empty"},
		{"no key", func(e *UpdateEvent) { e.Key = nil }, "key is empty"},
		{"bad table", func(e *UpdateEvent) { e.Table = "a/b" }, "table"},
		{"unknown column type", func(e *UpdateEvent) { e.Columns[1] = "decimal" }, "unknown type"},
		{"row of other columns", func(e *UpdateEvent) { e.Columns = e.Columns[:1] }, "new_row"},
		{"bad old row", func(e *UpdateEvent) { e.OldRow = []byte{9} }, "old_row"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := sampleUpdate(t)
			c.mutate(e)
			err := e.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error about %q", err, c.want)
			}
			// Unmarshal refuses it as malformed.
			data, merr := Marshal(e)
			if merr != nil {
				t.Fatal(merr)
			}
			if err := Unmarshal(data, &UpdateEvent{}); !errors.Is(err, ErrMalformed) {
				t.Fatalf("unmarshal: %v, want ErrMalformed", err)
			}
		})
	}
}
