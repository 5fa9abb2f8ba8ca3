// Package fsutil holds the two file-system steps that every durable
// writer of strata takes the same way: writing a small file whole under a
// temporary name, synced, then renamed into place (WriteFile), and
// syncing a directory so that a create or rename in it survives a crash
// (SyncDir); and the lock a process holds on a directory it owns while it
// lives (TryLock: a worker's spill directory, its depot).
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempMarker is in the name of every temporary file WriteFile makes:
// ".<name>.tmp-<random>" beside the file it becomes. A crash can leave
// one; whoever owns the directory removes them.
const TempMarker = ".tmp-"

// WriteFile writes data to path through a temporary file in the same
// directory, synced before it is renamed to path, so path holds the old
// bytes or all of the new ones, readable by its owner only (0600, as
// os.CreateTemp makes it). It does not sync the directory (SyncDir).
// On error the temporary file is removed.
func WriteFile(path string, data []byte) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+name+TempMarker+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SyncDir syncs the directory dir.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
