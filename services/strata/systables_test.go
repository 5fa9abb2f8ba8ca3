package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// TestAppliesTable: strata ops --applies shows each flush with its table,
// rows, versions, WAL position and time; a refused one with its reason
// and no live count.
func TestAppliesTable(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).UnixNano()
	rows := []messages.AppliedBatch{
		{Table: "acc", Projection: "p", Container: "wal-1-90", WAL: "wal-1", To: 90, Rows: 1200, Bytes: 4096,
			MinVersion: 301, MaxVersion: 1500, Live: 7, At: at},
		{Table: "acc", Projection: "p", Container: "wal-2-40", WAL: "wal-2", To: 40, Rows: 3, MinVersion: 12, MaxVersion: 14,
			At: at - int64(time.Second), Refused: "apply to acc.p refused: ... frozen"},
	}
	var buf bytes.Buffer
	if err := appliesTable(rows).print(&buf, "table"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "versions") || !strings.Contains(lines[1], "2026-12-03 12:00:00") ||
		!strings.Contains(lines[1], "301..1500") || !strings.Contains(lines[1], "wal-1") || !strings.Contains(lines[2], "frozen") {
		t.Fatalf("applies table:\n%s", buf.String())
	}
	buf.Reset()
	if err := appliesTable(rows).print(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"table": "acc", "rows": float64(1200), "to": float64(90), "wal": "wal-1", "bytes": float64(4096),
		"versions": "301..1500", "live": float64(7), "at": "2026-12-03T12:00:00Z", "refused": nil, "container": "wal-1-90"} {
		if v, ok := got[0][key]; !ok || v != want {
			t.Errorf("%s = %#v (present %v), want %#v", key, v, ok, want)
		}
	}
	if got[1]["live"] != nil || got[1]["refused"] == nil {
		t.Errorf("refused row: %v", got[1])
	}
}
