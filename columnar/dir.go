package columnar

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-db/strata/internal/fsutil"
)

// List returns the IDs of the committed containers of a projection under
// dataDir, sorted. Temporary directories of unfinished writes (names with
// a leading dot) are skipped. A projection with no directory has none.
func List(dataDir, table, projection string) ([]string, error) {
	dir := filepath.Join(dataDir, table, projection)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list containers of %s/%s: %w", table, projection, err)
	}
	var ids []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), ManifestName)); err == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Remove deletes a container. It first renames the directory to a
// temporary name beside it (syncing the parent), so a crash in the middle
// never leaves a half container under the real name. Removing a container
// that does not exist is not an error.
func Remove(dir string) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".rm-")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove container %s: %w", dir, err)
	}
	target := filepath.Join(tmp, "c")
	if err := os.Rename(dir, target); err != nil {
		os.Remove(tmp)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove container %s: %w", dir, err)
	}
	if err := fsutil.SyncDir(parent); err != nil {
		return fmt.Errorf("remove container %s: %w", dir, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove container %s: %w", dir, err)
	}
	return nil
}

// tempPrefix is the name prefix of the temporary directories a Writer of
// the container at dir works in, beside dir, until Commit renames one to dir.
func tempPrefix(dir string) string { return "." + filepath.Base(dir) + ".tmp-" }

// TempDirs lists the temporary directories that writes of the container at
// dir left beside it: a writer still at work, or one that died before
// Commit. Deciding which are stale is the caller's.
func TempDirs(dir string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(filepath.Dir(dir), tempPrefix(dir)+"*"))
	if err != nil {
		return nil, fmt.Errorf("temporary directories of %s: %w", dir, err)
	}
	return dirs, nil
}

// RemoveTemp deletes the temporary directories unfinished writes and
// removals left under a projection (after a crash). Call it only when no
// writer of the projection is running.
func RemoveTemp(dataDir, table, projection string) error {
	dir := filepath.Join(dataDir, table, projection)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean %s/%s: %w", table, projection, err)
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), ".") && (strings.Contains(e.Name(), ".tmp-") || strings.Contains(e.Name(), ".rm-")) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("clean %s/%s: %w", table, projection, err)
			}
		}
	}
	return nil
}
