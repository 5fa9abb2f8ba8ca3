package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

func TestTableFormats(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tb := newTable("order id", "amount", "size:size_bytes", "took:took_seconds", "when", "ok", "note")
	tb.add("1", int64(7), size(690688), 22*time.Millisecond, start, true, "two\nlines")
	tb.add("2", nil, nil, nil, nil, false, nil)
	for _, tc := range []struct{ format, want string }{
		{"csv", "order id,amount,size_bytes,took_seconds,when,ok,note\n" +
			"1,7,690688,0.022,2026-12-01T10:00:00Z,true,\"two\nlines\"\n" +
			"2,,,,,false,\n"},
		{"json", "[\n" +
			`  {"order id": "1", "amount": 7, "size_bytes": 690688, "took_seconds": 0.022, "when": "2026-12-01T10:00:00Z", "ok": true, "note": "two\nlines"},` + "\n" +
			`  {"order id": "2", "amount": null, "size_bytes": null, "took_seconds": null, "when": null, "ok": false, "note": null}` + "\n]\n"},
		{"table", "order id  amount  size      took  when                     ok   note\n" +
			"1         7       674.5KiB  22ms  2026-12-01 10:00:00.000  YES  two\\nlines\n" +
			"2         -       -         -     -                        no   -\n"},
	} {
		var buf bytes.Buffer
		if err := tb.print(&buf, tc.format); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.format, buf.String(), tc.want)
		}
	}
	var buf bytes.Buffer
	if err := newTable("a").print(&buf, "json"); err != nil || buf.String() != "[]\n" {
		t.Errorf("an empty table in JSON: %q, %v", buf.String(), err)
	}
}

func TestOpsJSON(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	op := messages.Operation{JobID: "mergeout.t.p.1", Operation: "mergeout", Status: "failed", Table: "t", Projection: "p", Inputs: 3,
		Start: start, End: start + int64(1500*time.Millisecond), Grant: messages.Grant{Pool: "tm", Bytes: 100 << 20}, Reason: "disk full"}
	var buf bytes.Buffer
	if err := opsTable([]messages.Operation{op}).print(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	for key, want := range map[string]any{"job_id": "mergeout.t.p.1", "pool": "tm", "grant_bytes": float64(100 << 20), "duration_seconds": 1.5,
		"reason": "disk full", "start": "2026-12-01T10:00:00Z", "inputs": float64(3), "peak_bytes": nil, "worker": nil} {
		if got, ok := r[key]; !ok || got != want {
			t.Errorf("%s = %#v (present %v), want %#v", key, got, ok, want)
		}
	}
	if _, ok := r["grant"]; ok {
		t.Errorf("the grant is not flattened: %s", buf.String())
	}
	// Keys in column order: start first, reason last.
	if s := buf.String(); strings.Index(s, `"start"`) > strings.Index(s, `"reason"`) {
		t.Errorf("keys out of column order: %s", s)
	}
}

// TestPrintRows: window rows as JSON lines with typed values, CSV with a
// header even without rows and NULL empty.
func TestPrintRows(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "order id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	write := func(rows int) string {
		dir := filepath.Join(t.TempDir(), "c0000")
		w, err := columnar.Create(dir, columnar.WriterOptions{Schema: schema, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for i := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(i + 1))
			if i == 0 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Float64Builder).Append(2.5)
			}
		}
		if rows > 0 {
			rec := b.NewRecordBatch()
			defer rec.Release()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	full, empty := write(3), write(0)
	for _, tc := range []struct {
		dir, format, null string
		n                 int
		want              string
	}{
		{full, "json", "", 2, `{"order id":1,"amount":null}` + "\n" + `{"order id":2,"amount":2.5}` + "\n"},
		{full, "csv", "", 5, "order id,amount\n1,\n2,2.5\n3,2.5\n"},
		{full, "csv", "NULL", 1, "order id,amount\n1,NULL\n"},
		{full, "table", "", 1, "order id  amount\n1         NULL\n"},
		{empty, "csv", "", 5, "order id,amount\n"},
		{empty, "json", "", 5, ""},
	} {
		out, err := capture(t, func() error { return printRows(tc.dir, tc.n, tc.format, tc.null) })
		if err != nil || out != tc.want {
			t.Errorf("printRows(%d rows, %s, null %q) = %q, %v; want %q", tc.n, tc.format, tc.null, out, err, tc.want)
		}
	}
}

// capture runs fn with stdout going to a file and returns what it wrote.
func capture(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = f
	err = fn()
	os.Stdout = old
	f.Close()
	out, _ := os.ReadFile(f.Name())
	return string(out), err
}
