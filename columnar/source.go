package columnar

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A Source is where the files of one committed container are read from:
// a directory on this host (DirSource), or an object store read by ranges
// (package store), or a worker's depot that keeps what it fetches
// (package depot). Open reads a container from a directory; OpenSource
// from any Source.
type Source interface {
	// String names the container in errors and logs: its directory, or
	// the store's URL and the container's key.
	String() string
	// ReadManifest returns the bytes of the container's manifest; a
	// container without one gives an error wrapping ErrNotFound.
	ReadManifest() ([]byte, error)
	// OpenFile opens the column file name, which the manifest says is
	// size bytes long. A missing file gives an error wrapping
	// fs.ErrNotExist.
	OpenFile(name string, size int64) (File, error)
}

// File is an open column file of a Source.
type File interface {
	// ReadRange reads len(p) bytes at off, as io.ReaderAt does; fetched
	// reports whether they came from a remote store rather than a local
	// file.
	ReadRange(p []byte, off int64) (n int, fetched bool, err error)
	// Local reports whether reading length bytes at off would be served
	// from this host, with no request to a remote store. A reader reads
	// ahead only what is not local.
	Local(off, length int64) bool
	// Size is the file's length in bytes.
	Size() int64
	Close() error
}

// DirSource is the Source of a container directory: the files of
// DIR/<table>/<projection>/<id>/ as the writer committed them.
type DirSource string

func (d DirSource) String() string { return string(d) }

// ReadManifest reads DIR/manifest.json.
func (d DirSource) ReadManifest() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(string(d), ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open container %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open container %s: %w", d, err)
	}
	return data, nil
}

// OpenFile opens DIR/name.
func (d DirSource) OpenFile(name string, _ int64) (File, error) {
	return OpenLocalFile(filepath.Join(string(d), name))
}

// LocalFile is a File on this host's filesystem.
type LocalFile struct {
	f    *os.File
	size int64
}

// OpenLocalFile opens the file at path for reading.
func OpenLocalFile(path string) (*LocalFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &LocalFile{f: f, size: st.Size()}, nil
}

// ReadRange reads len(p) bytes at off; fetched is always false.
func (l *LocalFile) ReadRange(p []byte, off int64) (int, bool, error) {
	n, err := l.f.ReadAt(p, off)
	return n, false, err
}

// Local is always true.
func (l *LocalFile) Local(off, length int64) bool { return true }

// Size is the file's size when it was opened.
func (l *LocalFile) Size() int64 { return l.size }

// Close closes the file.
func (l *LocalFile) Close() error { return l.f.Close() }
