package messages

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func sampleBatch(t *testing.T) *ChangeBatch {
	t.Helper()
	cols := []RowType{RowInt64, RowText}
	row := func(k int64, s string) []byte {
		b, err := EncodeRow(cols, []any{k, s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := func(k int64) []byte {
		b, err := EncodeRow(cols[:1], []any{k})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return &ChangeBatch{BatchID: "p1-7", Table: "accounts", Columns: cols, Changes: []Change{
		{Op: OpInsert, Key: key(1), NewRow: row(1, "a")},
		{Op: OpUpdate, Key: key(2), NewRow: row(2, ""), OldRow: row(2, "b")},
		{Op: OpDelete, Key: key(1)},
		{Key: key(3), NewRow: row(3, strings.Repeat("x", 300))},
	}}
}

func TestChangeBatchRoundTrip(t *testing.T) {
	b := sampleBatch(t)
	data, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var out ChangeBatch
	if err := Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.BatchID != b.BatchID || out.Table != b.Table || len(out.Changes) != len(b.Changes) {
		t.Fatalf("round trip: got %+v", out)
	}
	for i := range b.Changes {
		g, w := out.Event(i), b.Event(i)
		if g.EventID != w.EventID || g.Op != w.Op || string(g.Key) != string(w.Key) ||
			string(g.NewRow) != string(w.NewRow) || string(g.OldRow) != string(w.OldRow) {
			t.Errorf("change %d: got %+v, want %+v", i, g, w)
		}
	}
	if got := out.Event(2).EventID; got != "p1-7/2" {
		t.Errorf("event ID of change 2 = %q", got)
	}
	// A batch is not an update event, nor the other way round.
	if err := Unmarshal(data, &UpdateEvent{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("batch decoded as an update event: %v", err)
	}
}

func TestChangeBatchLastPerKey(t *testing.T) {
	b := sampleBatch(t)
	got := b.LastPerKey()
	want := []int{1, 2, 3} // key 1's insert is followed by its delete
	if len(got) != len(want) {
		t.Fatalf("LastPerKey = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("LastPerKey = %v, want %v", got, want)
		}
	}
}

func TestChangeBatchValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(b *ChangeBatch)
		want   string
	}{
		{"no batch id", func(b *ChangeBatch) { b.BatchID = "" }, "batch_id is empty"},
		{"long batch id", func(b *ChangeBatch) { b.BatchID = strings.Repeat("i", 1001) }, "exceeds 1000"},
		{"no changes", func(b *ChangeBatch) { b.Changes = nil }, "no changes"},
		{"bad table", func(b *ChangeBatch) { b.Table = "a b" }, "batch p1-7: table"},
		{"unknown column type", func(b *ChangeBatch) { b.Columns[1] = "decimal" }, "column 1: unknown type"},
		{"delete with a row", func(b *ChangeBatch) { b.Changes[2].NewRow = b.Changes[0].NewRow }, "change 2: a delete carries the key only"},
		{"update without a row", func(b *ChangeBatch) { b.Changes[1].NewRow = nil }, "change 1: new_row is empty"},
		{"bad old row", func(b *ChangeBatch) { b.Changes[1].OldRow = []byte{9} }, "change 1: old_row"},
		{"row of other columns", func(b *ChangeBatch) { b.Changes[3].NewRow = []byte{1} }, "change 3"},
		{"unknown op", func(b *ChangeBatch) { b.Changes[1].Op = "merge" }, "change 1"},
		{"no key", func(b *ChangeBatch) { b.Changes[1].Key = nil }, "change 1: key is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleBatch(t)
			tc.mutate(b)
			err := b.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error with %q", err, tc.want)
			}
			data, merr := Marshal(b)
			if merr != nil {
				return
			}
			if err := Unmarshal(data, &ChangeBatch{}); !errors.Is(err, ErrMalformed) {
				t.Errorf("Unmarshal of an invalid batch = %v, want ErrMalformed", err)
			}
		})
	}
}

func FuzzChangeBatch(f *testing.F) {
	b := &ChangeBatch{BatchID: "b-1", Table: "t", Columns: []RowType{RowInt64}, Changes: []Change{{Key: []byte{9, 0x80, 0, 0, 0, 0, 0, 0, 1}, NewRow: []byte{9, 0x80, 0, 0, 0, 0, 0, 0, 1}}}}
	if data, err := Marshal(b); err == nil {
		f.Add(data)
	}
	f.Add([]byte{0x93, 1, 0xac})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out ChangeBatch
		if err := Unmarshal(data, &out); err == nil {
			if err := out.Validate(); err != nil {
				t.Fatalf("decoded batch does not validate: %v", err)
			}
			_ = out.LastPerKey()
		}
	})
}

// TestChangeBatchGolden pins the wire bytes of a batch: producers outside
// this repository encode it by hand.
func TestChangeBatchGolden(t *testing.T) {
	checkGolden(t, filepath.Join("testdata", "changes", "change_batch.hex"), sampleBatch(t))
}

// TestBatcher: events are packed in order into batches bounded by count
// and bytes, a new table starts a new batch, every batch encodes within
// MaxBytes, and the batch IDs name the first event and the count.
func TestBatcher(t *testing.T) {
	cols := []RowType{RowInt64, RowText}
	ev := func(table string, i int, text int) *UpdateEvent {
		key, _ := EncodeRow(cols[:1], []any{int64(i)})
		row, _ := EncodeRow(cols, []any{int64(i), strings.Repeat("t", text)})
		return &UpdateEvent{EventID: "e-" + strconv.Itoa(i), Table: table, Columns: cols, Key: key, NewRow: row, OldRow: row, Op: OpUpdate}
	}
	const maxBytes = 64 << 10
	b := &Batcher{MaxChanges: 100, MaxBytes: maxBytes}
	var out []*ChangeBatch
	for i := range 1000 {
		table := "a"
		if i >= 900 {
			table = "b"
		}
		if full := b.Add(ev(table, i, (i*37)%2000)); full != nil {
			out = append(out, full)
		}
	}
	if last := b.Flush(); last != nil {
		out = append(out, last)
	}
	if b.Flush() != nil || b.Len() != 0 {
		t.Fatal("a flushed batcher is not empty")
	}
	next := 0
	for _, c := range out {
		data, err := Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > maxBytes || len(c.Changes) > 100 || len(c.Changes) == 0 {
			t.Errorf("batch %s: %d changes, %d bytes", c.BatchID, len(c.Changes), len(data))
		}
		if want := "e-" + strconv.Itoa(next) + "+" + strconv.Itoa(len(c.Changes)); c.BatchID != want {
			t.Errorf("batch ID %s, want %s", c.BatchID, want)
		}
		for i := range c.Changes {
			if got := ev(c.Table, next, (next*37)%2000); string(c.Changes[i].Key) != string(got.Key) || c.Table != got.Table {
				t.Fatalf("batch %s change %d is not event %d of table %s", c.BatchID, i, next, got.Table)
			}
			next++
		}
	}
	if next != 1000 {
		t.Fatalf("%d events in the batches, want 1000", next)
	}
}
