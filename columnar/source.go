package columnar

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
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
	// ReadAt reads len(p) bytes at off.
	io.ReaderAt
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

// DirSources returns the DirSource of each directory.
func DirSources(dirs []string) []Source {
	srcs := make([]Source, len(dirs))
	for i, d := range dirs {
		srcs[i] = DirSource(d)
	}
	return srcs
}

// ReadSourceManifest reads and decodes src's manifest (through the
// process's manifest cache: the caller gets its own copy). A container
// without one gives an error wrapping ErrNotFound; a bad one a
// *CorruptError.
func ReadSourceManifest(src Source) (*Manifest, error) {
	data, err := src.ReadManifest()
	if err != nil {
		return nil, err
	}
	m, err := manifests.decode(data)
	if err != nil {
		return nil, corruptf(src.String(), ManifestName, NoBlock, err, "invalid manifest")
	}
	return m, nil
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

// ReadAt reads len(p) bytes at off.
func (l *LocalFile) ReadAt(p []byte, off int64) (int, error) { return l.f.ReadAt(p, off) }

// Local is always true.
func (l *LocalFile) Local(off, length int64) bool { return true }

// Size is the file's size when it was opened.
func (l *LocalFile) Size() int64 { return l.size }

// Close closes the file.
func (l *LocalFile) Close() error { return l.f.Close() }

// A FetchCounter is a Source that reads from a remote store and counts
// what it fetched for its reader: the blocks (wholly within the ranges
// fetched) and the bytes. The engines report the sum over their inputs
// as blocks_fetched and bytes_fetched.
type FetchCounter interface {
	Fetched() (blocks, bytes int64)
}

// Fetched sums Fetched over the sources that count.
func Fetched(srcs []Source) (blocks, bytes int64) {
	for _, s := range srcs {
		if fc, ok := s.(FetchCounter); ok {
			b, n := fc.Fetched()
			blocks += b
			bytes += n
		}
	}
	return blocks, bytes
}

// FetchCounts are a FetchCounter's counters, safe for concurrent use.
type FetchCounts struct {
	blocks, bytes atomic.Int64
}

// Add counts the range [start, end) of file fm as fetched.
func (c *FetchCounts) Add(fm *FileMeta, start, end int64) {
	c.bytes.Add(end - start)
	if fm == nil {
		return
	}
	// Blocks are in offset order: count from the first at or after start.
	var n int64
	for i := sort.Search(len(fm.Blocks), func(i int) bool { return fm.Blocks[i].Offset >= start }); i < len(fm.Blocks); i++ {
		if b := fm.Blocks[i]; b.Offset+b.Length > end {
			break
		}
		n++
	}
	c.blocks.Add(n)
}

// Fetched returns the blocks and bytes counted.
func (c *FetchCounts) Fetched() (blocks, bytes int64) { return c.blocks.Load(), c.bytes.Load() }
