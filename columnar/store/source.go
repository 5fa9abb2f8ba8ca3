package store

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-db/strata/columnar"
)

// Source is the columnar.Source of a committed container in a store: the
// engines read its column files block by block with one ranged read per
// block (and one for each file's header), so a job holds no more of a
// container than its readers' blocks and fetches each block once.
type Source struct {
	ctx      context.Context
	st       Store
	name     string // store URL and container key, for errors
	prefix   string // key prefix of the container's files
	m        *columnar.Manifest
	manifest []byte
	counts   columnar.FetchCounts
}

var _ columnar.Source = (*Source)(nil)

// OpenSource reads the manifest of the committed container
// table/projection/id in st (Committed) and returns the Source of its
// files. Reads
// made through it use ctx. A container not in st wraps
// columnar.ErrNotFound.
func OpenSource(ctx context.Context, st Store, table, projection, id string) (*Source, *columnar.Manifest, error) {
	m, prefix, data, err := committed(ctx, st, table, projection, id)
	if err != nil {
		return nil, nil, err
	}
	s := &Source{
		ctx:      ctx,
		st:       st,
		name:     st.String() + "/" + Join(table, projection, id),
		prefix:   prefix,
		m:        m,
		manifest: data,
	}
	return s, m, nil
}

// Fetched returns the blocks and bytes read through s.
func (s *Source) Fetched() (blocks, bytes int64) { return s.counts.Fetched() }

func (s *Source) String() string { return s.name }

// Prefix is the key prefix of the container's files: its committed
// attempt's (Committed).
func (s *Source) Prefix() string { return s.prefix }

// ReadManifest returns the manifest read by OpenSource.
func (s *Source) ReadManifest() ([]byte, error) { return s.manifest, nil }

// OpenFile returns the column file name of size bytes (as the manifest
// says; a shorter object fails its reads, a changed one its checksums).
// It makes no request.
func (s *Source) OpenFile(name string, size int64) (columnar.File, error) {
	if err := checkKey(name, false); err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", s.name, name, err)
	}
	f := &RemoteFile{ctx: s.ctx, st: s.st, key: s.prefix + name, size: size, counts: &s.counts}
	for i := range s.m.Files {
		if s.m.Files[i].Name == name {
			f.fm = &s.m.Files[i]
		}
	}
	return f, nil
}

// RemoteFile is an object of a store read by ranges, as a columnar.File.
type RemoteFile struct {
	ctx    context.Context
	st     Store
	key    string
	size   int64
	fm     *columnar.FileMeta    // to count blocks; nil counts none
	counts *columnar.FetchCounts // nil counts nothing
}

// NewRemoteFile returns the object at key, size bytes long, read by
// ranges with ctx.
func NewRemoteFile(ctx context.Context, st Store, key string, size int64) *RemoteFile {
	return &RemoteFile{ctx: ctx, st: st, key: key, size: size}
}

// ReadAt reads len(p) bytes at off with one ranged GET.
func (f *RemoteFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > f.size {
		return 0, fmt.Errorf("read %s from %s: range [%d, %d) outside its %d bytes", f.key, f.st, off, off+int64(len(p)), f.size)
	}
	r, err := f.st.NewRangeReader(f.ctx, f.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = fmt.Errorf("read %s from %s: %d of %d bytes at offset %d: object shorter than its manifest says", f.key, f.st, n, len(p), off)
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
