package service

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/fsutil"
)

// TestSpillSweep checks that a worker starting removes the spill
// directories of dead workers (lock file not held), keeps those of live
// ones and anything that is not a spill directory, and removes its own on
// Close.
func TestSpillSweep(t *testing.T) {
	if !fsutil.CanLock {
		t.Skip("no flock on this platform: spill directories are not swept")
	}
	root := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	live, err := OpenSpillDir(root, "merger", log)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// A dead worker's directory: a lock file nobody holds, and a run.
	dead := filepath.Join(root, "merger-999999.abc")
	if err := os.MkdirAll(filepath.Join(dead, "strata-mergeout-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dead, spillLockName), filepath.Join(dead, "strata-mergeout-1", "run-0")} {
		if err := os.WriteFile(f, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(root, "not-a-spill-dir")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(live.Path, "run-0"), []byte("in use"), 0o644); err != nil {
		t.Fatal(err)
	}

	next, err := OpenSpillDir(root, "windower", log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead worker's spill directory is still there (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(live.Path, "run-0")); err != nil {
		t.Errorf("the live worker's spill file was removed: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory that is not a spill directory was removed: %v", err)
	}
	if filepath.Dir(next.Path) != root || next.Path == live.Path {
		t.Errorf("new spill directory %s, want a new one under %s", next.Path, root)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(next.Path); !os.IsNotExist(err) {
		t.Errorf("Close left %s (stat: %v)", next.Path, err)
	}
	// Once the live worker is gone, the next start sweeps its directory.
	live.Close()
	os.Mkdir(live.Path, 0o755)
	os.WriteFile(filepath.Join(live.Path, spillLockName), nil, 0o644)
	last, err := OpenSpillDir(root, "merger", log)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	if _, err := os.Stat(live.Path); !os.IsNotExist(err) {
		t.Errorf("an unlocked spill directory survived a start (stat: %v)", err)
	}
}
