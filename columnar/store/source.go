package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/strata-db/strata/columnar"
)

// Source is the columnar.Source of a committed container in a store: the
// engines read its column files block by block with one ranged read per
// block (and one for each file's header), so a job holds no more of a
// container than its readers' blocks and fetches each block once. In a
// pack, a column file is its range of the pack object.
type Source struct {
	ctx    context.Context
	st     Store
	c      *Container
	counts columnar.FetchCounts
}

var _ columnar.Source = (*Source)(nil)

// OpenSource resolves the committed container table/projection/id in st
// (Resolve) and returns the Source of its files. Reads made through it
// use ctx. A container not in st wraps columnar.ErrNotFound.
func OpenSource(ctx context.Context, st Store, table, projection, id string) (*Source, *columnar.Manifest, error) {
	c, err := Resolve(ctx, st, table, projection, id)
	if err != nil {
		return nil, nil, err
	}
	return &Source{ctx: ctx, st: st, c: c}, c.Manifest, nil
}

// Fetched returns the blocks and bytes read through s.
func (s *Source) Fetched() (blocks, bytes int64) { return s.counts.Fetched() }

func (s *Source) String() string { return s.c.where }

// Container is the container resolved: where its column files are.
func (s *Source) Container() *Container { return s.c }

// Prefix is the key prefix of the container's committed attempt
// (Committed).
func (s *Source) Prefix() string { return s.c.Prefix }

// ReadManifest returns the manifest read by OpenSource.
func (s *Source) ReadManifest() ([]byte, error) { return s.c.manifest, nil }

// OpenFile returns the column file name of size bytes (as the manifest
// says; a shorter object fails its reads, a changed one its checksums).
// It makes no request.
func (s *Source) OpenFile(name string, size int64) (columnar.File, error) {
	if err := checkKey(name, false); err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", s.c.where, name, err)
	}
	i := s.c.FileIndex(name)
	if i < 0 {
		if s.c.Pack != "" {
			return nil, fmt.Errorf("open %s/%s: not a file of the manifest: %w", s.c.where, name, fs.ErrNotExist)
		}
		return &RemoteFile{ctx: s.ctx, st: s.st, key: s.c.Prefix + name, size: size, counts: &s.counts}, nil
	}
	key, base := s.c.File(i)
	return &RemoteFile{ctx: s.ctx, st: s.st, key: key, base: base, size: size, fm: &s.c.Manifest.Files[i], counts: &s.counts, where: s.c.where}, nil
}

// RemoteFile is an object of a store, or a range of one, read by ranges,
// as a columnar.File.
type RemoteFile struct {
	ctx    context.Context
	st     Store
	key    string
	base   int64 // the file's offset in the object
	size   int64
	fm     *columnar.FileMeta    // to count blocks and name them; nil counts none
	counts *columnar.FetchCounts // nil counts nothing
	where  string                // the container, for errors; "" if none
}

// NewRemoteFile returns the object at key, size bytes long, read by
// ranges with ctx.
func NewRemoteFile(ctx context.Context, st Store, key string, size int64) *RemoteFile {
	return &RemoteFile{ctx: ctx, st: st, key: key, size: size}
}

// ReadAt reads len(p) bytes at off with one ranged GET. An object that
// ends before the range does is a *columnar.CorruptError naming the
// container, the file and the block, where they are known.
func (f *RemoteFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > f.size {
		return 0, fmt.Errorf("read %s from %s: range [%d, %d) outside its %d bytes", f.key, f.st, off, off+int64(len(p)), f.size)
	}
	r, err := f.st.NewRangeReader(f.ctx, f.key, f.base+off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		reason := fmt.Sprintf("object %s is shorter than its manifest says: %d of %d bytes at offset %d", f.key, n, len(p), f.base+off)
		if f.fm != nil && f.where != "" {
			return n, &columnar.CorruptError{Container: f.where, File: f.fm.Name, Block: BlockAt(f.fm, off+int64(n)), Reason: reason}
		}
		err = fmt.Errorf("read %s from %s: %s", f.key, f.st, reason)
	} else if err != nil {
		err = fmt.Errorf("read %s from %s: %w", f.key, f.st, err)
	}
	if err == nil && f.counts != nil {
		f.counts.Add(f.fm, off, off+int64(n))
	}
	return n, err
}

// Local is always false: every read is a request.
func (f *RemoteFile) Local(off, length int64) bool { return false }

// Size is the size given to NewRemoteFile.
func (f *RemoteFile) Size() int64 { return f.size }

// Close does nothing: a RemoteFile holds no connection between reads.
func (f *RemoteFile) Close() error { return nil }
