package messages

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkGolden fails the test unless m encodes to the hex bytes stored at
// path, and returns those bytes. With STRATA_UPDATE_GOLDEN=1 it first
// rewrites the file, after a deliberate change of the wire format.
func checkGolden(t *testing.T, path string, m Message) []byte {
	t.Helper()
	data, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("STRATA_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(hex.EncodeToString(data)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (STRATA_UPDATE_GOLDEN=1 writes it): %v", err)
	}
	if got := hex.EncodeToString(data); got != strings.TrimSpace(string(want)) {
		t.Fatalf("wire bytes changed:\n got %s\nwant %s", got, want)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(want)))
	if err != nil {
		t.Fatalf("golden %s: %v", path, err)
	}
	return raw
}
