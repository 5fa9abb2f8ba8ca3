package depot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/fsutil"
)

// SetSegmentBytes sets the fetch segment size for a test and returns what
// restores it.
func SetSegmentBytes(n int64) func() {
	old := segmentBytes
	segmentBytes = n
	return func() { segmentBytes = old }
}

// CanLock reports whether Open locks the depot directory here.
const CanLock = fsutil.CanLock

// HeldAt returns the file on disk that holds column file name of the
// depot's container directory dir, and the column file's offset in it:
// the container's pack, or (old layout, outputs) the column file itself.
func HeldAt(dir, name string) (path string, off int64, err error) {
	p, _, m, _, err := openPack(dir)
	if errors.Is(err, errNoPack) {
		return filepath.Join(dir, name), 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	defer p.f.Close()
	i := slices.IndexFunc(m.Files, func(fm columnar.FileMeta) bool { return fm.Name == name })
	if i < 0 {
		return "", 0, fmt.Errorf("%s: no column file %s in %s", dir, name, m.ID)
	}
	return p.path, p.base[i], nil
}

// Holds reports whether the depot's container directory dir holds column
// file name whole, as a reopened depot would take it in (before its
// check).
func Holds(dir, name string) bool {
	p, _, m, held, err := openPack(dir)
	if errors.Is(err, errNoPack) {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	if err != nil {
		return false
	}
	defer p.f.Close()
	for i := range m.Files {
		if m.Files[i].Name == name {
			return held[i]
		}
	}
	return false
}

// Verify checks that the depot's container directory dir holds every
// column file of its manifest, each matching its CRC-32C.
func Verify(dir string) error {
	p, _, m, held, err := openPack(dir)
	if errors.Is(err, errNoPack) {
		return columnar.Verify(dir)
	}
	if err != nil {
		return err
	}
	defer p.f.Close()
	for i := range m.Files {
		if !held[i] {
			return fmt.Errorf("%s: %s not held", p.path, m.Files[i].Name)
		}
		if !p.checkColumn(i, &m.Files[i]) {
			return fmt.Errorf("%s: %s does not match its checksum", p.path, m.Files[i].Name)
		}
	}
	return nil
}

// SetRunBytes sets the most bytes a prefetch request reads from a pack
// for a test and returns what restores it.
func SetRunBytes(n int64) func() {
	old := runBytes
	runBytes = n
	return func() { runBytes = old }
}
