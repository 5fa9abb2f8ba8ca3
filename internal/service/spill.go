package service

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/internal/fsutil"
)

// Spill space.
//
// Workers on one host share a spill root (--temp, default DATA/tmp). Each
// worker process spills only under a directory of its own,
// ROOT/<name>-<pid>.<random>, and holds an exclusive lock on the file
// "lock" inside it for as long as it lives (flock: the kernel drops it when
// the process dies, however it dies). A worker that starts removes every
// directory of the root whose lock it can take: what workers killed in the
// middle of a job left behind. A job's own spill files go away when the
// job ends, on every path (the engines remove them on success and on
// error); the sweep at start covers the paths no code runs on.

// spillLockName is the lock file in a worker's spill directory.
const spillLockName = "lock"

// SpillDir is a worker process's own spill directory, locked for its
// lifetime.
type SpillDir struct {
	Path string
	lock *os.File
}

// OpenSpillDir sweeps root of the spill directories of dead workers and
// makes and locks a new one for this process. Locks are taken with flock;
// where the platform has none, nothing is swept.
func OpenSpillDir(root, name string, log *slog.Logger) (*SpillDir, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	removed, freed, err := sweepSpill(root)
	if err != nil {
		return nil, fmt.Errorf("spill directory %s: %w", root, err)
	}
	if removed > 0 {
		log.Info("removed the spill directories of dead workers", "dirs", removed, "bytes", freed, "root", root)
	}
	dir, err := os.MkdirTemp(root, fmt.Sprintf("%s-%d.", name, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("spill directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, spillLockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("spill directory lock: %w", err)
	}
	if ok, err := fsutil.TryLock(f); err != nil || !ok {
		f.Close()
		os.RemoveAll(dir)
		if err == nil {
			err = errors.New("held by another process")
		}
		return nil, fmt.Errorf("lock spill directory %s: %w", dir, err)
	}
	return &SpillDir{Path: dir, lock: f}, nil
}

// Close removes the directory and drops its lock.
func (s *SpillDir) Close() error {
	err := os.RemoveAll(s.Path)
	s.lock.Close()
	return err
}

// sweepSpill removes the directories of root whose lock file no live
// process holds, and reports how many and their bytes. Entries that are
// not worker spill directories (no lock file) are left alone.
func sweepSpill(root string) (removed int, bytes int64, err error) {
	if !fsutil.CanLock {
		return 0, 0, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		f, err := os.OpenFile(filepath.Join(dir, spillLockName), os.O_RDWR, 0)
		if err != nil {
			continue // not a worker's spill directory, or just made
		}
		ok, err := fsutil.TryLock(f)
		if err != nil || !ok {
			f.Close()
			continue // its worker lives
		}
		n := dirBytes(dir)
		rerr := os.RemoveAll(dir)
		f.Close()
		if rerr != nil {
			return removed, bytes, rerr
		}
		removed++
		bytes += n
	}
	return removed, bytes, nil
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
