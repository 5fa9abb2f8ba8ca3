package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// In both formats a duration is a number of seconds and a size a number of
// bytes, whatever the call site passed.
func TestLogValuesTyped(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	log.With("service", "merger").Info("job done", "elapsed", 1500*time.Millisecond, "grant", int64(100<<20), "peak_bytes", int64(12<<20))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	if v, ok := rec["elapsed"].(float64); !ok || v != 1.5 {
		t.Errorf("elapsed = %#v; want 1.5 (seconds)", rec["elapsed"])
	}
	if v, ok := rec["grant"].(float64); !ok || v != 100<<20 {
		t.Errorf("grant = %#v; want %d (bytes)", rec["grant"], 100<<20)
	}
	if _, ok := rec["time"].(string); !ok {
		t.Errorf("time = %#v; want the RFC 3339 time", rec["time"])
	}

	buf.Reset()
	text, _ := NewLogger(&buf, "text", "info")
	text.Info("stopping", "grace", time.Minute)
	if !strings.Contains(buf.String(), "grace=60") {
		t.Errorf("text log %q; want grace=60", buf.String())
	}
}
