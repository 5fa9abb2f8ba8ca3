package fsutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, data := range [][]byte{[]byte("first"), []byte("second, longer")} {
		if err := WriteFile(path, data); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want the file alone", len(ents))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Error("write into a missing directory: no error")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("sync of a missing directory: no error")
	}
}
