package columnar

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrOutsideRoot marks a name that would leave the data directory: an
// empty or dot element, a separator, a NUL, or a symbolic link on the way.
var ErrOutsideRoot = errors.New("columnar: name leaves the data directory")

// DataDir is the data directory, opened once as an os.Root: every file a
// service opens, creates or removes under it is resolved through the root,
// so no table, projection or container name — whatever a validator let
// through — can reach outside it. Containers are DATA/<table>/<projection>/<id>/.
type DataDir struct {
	root *os.Root
	path string
	seq  atomic.Uint64
}

// OpenDataDir creates dir if needed and opens it as the confined root.
func OpenDataDir(dir string) (*DataDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	return &DataDir{root: r, path: abs}, nil
}

// Path returns the data directory's absolute path.
func (d *DataDir) Path() string { return d.path }

// Close releases the root.
func (d *DataDir) Close() error { return d.root.Close() }

// checkElem accepts one path element: not empty, not "." or "..", no
// separator or NUL, at most 255 bytes. It is deliberately looser than the
// wire's name rule (writers' temporary directories begin with a dot); the
// root is what confines.
func checkElem(s string) error {
	if s == "" || s == "." || s == ".." || len(s) > 255 || strings.ContainsAny(s, "/\\\x00") || !filepath.IsLocal(s) {
		return fmt.Errorf("%w: element %q", ErrOutsideRoot, s)
	}
	return nil
}

// rel joins checked elements into a name relative to the root.
func rel(elems ...string) (string, error) {
	for _, e := range elems {
		if err := checkElem(e); err != nil {
			return "", err
		}
	}
	return path.Join(elems...), nil
}

// resolve checks that no element of name is a symbolic link (the data
// directory has none, so one is an attempt to leave it for callers that
// open the returned path directly) and returns its absolute path.
func (d *DataDir) resolve(elems ...string) (string, error) {
	name, err := rel(elems...)
	if err != nil {
		return "", err
	}
	for i := range elems {
		fi, err := d.root.Lstat(path.Join(elems[:i+1]...))
		if errors.Is(err, fs.ErrNotExist) {
			break // the rest is created later, through the same check
		}
		if errors.Is(err, syscall.ENOTDIR) {
			// A file where a directory belongs: inside the root, and not
			// the name's fault (an I/O error, as creating it would be).
			return "", fmt.Errorf("columnar: %s: %w", name, err)
		}
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrOutsideRoot, name, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%w: %s: %s is a symbolic link", ErrOutsideRoot, name, path.Join(elems[:i+1]...))
		}
	}
	return filepath.Join(d.path, filepath.FromSlash(name)), nil
}

// ContainerDir returns the path of container id of table.projection after
// checking the names stay inside the data directory.
func (d *DataDir) ContainerDir(table, projection, id string) (string, error) {
	return d.resolve(table, projection, id)
}

// ProjectionDir returns the path of table.projection's directory, checked
// like ContainerDir.
func (d *DataDir) ProjectionDir(table, projection string) (string, error) {
	return d.resolve(table, projection)
}

// RemoveContainer deletes a container through the root: it is renamed to
// a temporary name beside it first (".<id>.rm-<unique>"), so a crash
// never leaves half a container under its real name. A container that
// does not exist is not an error: what a removal of it interrupted
// between the rename and the end left under such names is removed then,
// so that removing a container again finishes the job.
func (d *DataDir) RemoveContainer(table, projection, id string) error {
	name, err := rel(table, projection, id)
	if err != nil {
		return err
	}
	prefix := "." + id + ".rm-"
	tmp := path.Join(table, projection, prefix+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.FormatUint(d.seq.Add(1), 36))
	if err := d.root.Rename(name, tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return d.removeInterrupted(table, projection, prefix)
		}
		return fmt.Errorf("remove container %s: %w", name, err)
	}
	if err := d.root.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove container %s: %w", name, err)
	}
	return nil
}

// removeInterrupted removes the entries of a projection whose names
// start with prefix: removals of one container that were interrupted.
func (d *DataDir) removeInterrupted(table, projection, prefix string) error {
	ents, err := d.ReadDir(table, projection)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			if err := d.root.RemoveAll(path.Join(table, projection, e.Name())); err != nil {
				return fmt.Errorf("finish removing %s/%s/%s: %w", table, projection, e.Name(), err)
			}
		}
	}
	return nil
}

// RemoveAll removes the entry at the joined elements and everything under
// it, through the root. A missing entry is not an error.
func (d *DataDir) RemoveAll(elems ...string) error {
	name, err := rel(elems...)
	if err != nil {
		return err
	}
	if err := d.root.RemoveAll(name); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// RemoveEmpty removes the directory at the joined elements if it is empty;
// a missing or non-empty directory is left without error.
func (d *DataDir) RemoveEmpty(elems ...string) error {
	name, err := rel(elems...)
	if err != nil {
		return err
	}
	err = d.root.Remove(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if ents, rerr := fs.ReadDir(d.root.FS(), name); rerr == nil && len(ents) > 0 {
		return nil
	}
	return fmt.Errorf("remove %s: %w", name, err)
}

// ReadDir lists the directory at the joined elements; a missing directory
// has no entries.
func (d *DataDir) ReadDir(elems ...string) ([]fs.DirEntry, error) {
	name, err := rel(elems...)
	if err != nil {
		return nil, err
	}
	ents, err := fs.ReadDir(d.root.FS(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", name, err)
	}
	return ents, nil
}

// Open opens a file at the joined elements for reading, through the root.
func (d *DataDir) Open(elems ...string) (*os.File, error) {
	name, err := rel(elems...)
	if err != nil {
		return nil, err
	}
	return d.root.Open(name)
}

// ReadManifest reads and validates a container's manifest through the root.
func (d *DataDir) ReadManifest(table, projection, id string) (*Manifest, error) {
	name, err := rel(table, projection, id, ManifestName)
	if err != nil {
		return nil, err
	}
	data, err := d.root.ReadFile(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open container %s: %w", path.Dir(name), ErrNotFound)
		}
		return nil, fmt.Errorf("open container %s: %w", path.Dir(name), err)
	}
	m, err := DecodeManifest(data)
	if err != nil {
		return nil, corruptf(path.Dir(name), ManifestName, NoBlock, err, "invalid manifest")
	}
	return m, nil
}

// Check is the cheap check of a committed container, for accepting a
// worker's claim that it wrote one: the manifest decodes and names this
// table, projection and ID, and every column file, opened through the root,
// has the manifest's size and header checksum. It reads the manifest and
// each file's header, not the blocks (Verify reads everything). It is safe
// to call from several goroutines at once: it shares nothing but the
// root, whose methods are.
func (d *DataDir) Check(table, projection, id string) (*Manifest, error) {
	m, err := d.ReadManifest(table, projection, id)
	if err != nil {
		return nil, err
	}
	dir := path.Join(table, projection, id)
	if m.Table != table || m.Projection != projection || m.ID != id {
		return nil, corruptf(dir, ManifestName, NoBlock, nil, "manifest names %s/%s/%s", m.Table, m.Projection, m.ID)
	}
	for i := range m.Files {
		if err := d.checkFile(dir, &m.Files[i]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *DataDir) checkFile(dir string, fm *FileMeta) error {
	if err := checkElem(fm.Name); err != nil {
		return corruptf(dir, fm.Name, NoBlock, err, "file name")
	}
	f, err := d.root.Open(path.Join(dir, fm.Name))
	if err != nil {
		return corruptf(dir, fm.Name, NoBlock, err, "open")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("check %s/%s: %w", dir, fm.Name, err)
	}
	if !st.Mode().IsRegular() || st.Size() != fm.Size {
		return corruptf(dir, fm.Name, NoBlock, nil, "file is %d bytes (mode %s), manifest says %d", st.Size(), st.Mode(), fm.Size)
	}
	if fm.HeaderLen <= 0 || fm.HeaderLen > fm.Size {
		return corruptf(dir, fm.Name, NoBlock, nil, "header length %d out of range", fm.HeaderLen)
	}
	header := make([]byte, fm.HeaderLen)
	if _, err := f.ReadAt(header, 0); err != nil {
		return corruptf(dir, fm.Name, NoBlock, err, "read header")
	}
	if got := crc32.Checksum(header, castagnoli); got != fm.HeaderCRC {
		return corruptf(dir, fm.Name, NoBlock, nil, "header checksum %08x, manifest says %08x", got, fm.HeaderCRC)
	}
	return nil
}
