package columnar

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
