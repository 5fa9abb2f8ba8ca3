package depot_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar/depot"
)

// A depot directory is its worker's alone: a second Open of it fails at
// once, naming the directory and the holder's pid, until the first
// depot is closed. (flock locks are per open file description, so two
// opens in one process exclude each other as two processes would.)
func TestDirLocked(t *testing.T) {
	if !depot.CanLock {
		t.Skip("no flock on this platform: depot directories are not locked")
	}
	st, _ := bucket(t, 0)
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = depot.Open(dir, st, depot.Options{})
	if err == nil {
		t.Fatal("a second Open of a depot directory in use succeeded")
	}
	t.Log(err)
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second Open: %v; want the directory and the holder's pid named", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if s := d2.Stats(); s.Containers != 0 {
		t.Errorf("the lock file was taken for a container: %+v", s)
	}
	d2.Close()
}
