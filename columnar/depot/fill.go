package depot

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
)

// fillSuffix marks a column file being filled: ".<file>.fill-<random>".
const fillSuffix = ".fill-"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// source is the columnar.Source of an acquired container.
type source struct {
	d   *Depot
	e   *entry
	ctx context.Context
}

func (s *source) String() string { return s.e.dir }

func (s *source) ReadManifest() ([]byte, error) { return s.e.manifest, nil }

// OpenFile opens a column file: from disk if the depot holds it, else as a
// fill that fetches what is read and keeps it.
func (s *source) OpenFile(name string, size int64) (columnar.File, error) {
	fm := s.e.fileMeta(name)
	if fm == nil {
		return nil, fmt.Errorf("open %s/%s: not a file of the manifest: %w", s.e.dir, name, fs.ErrNotExist)
	}
	d, e := s.d, s.e
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.present[name] {
		return columnar.OpenLocalFile(filepath.Join(e.dir, name))
	}
	f := e.fills[name]
	if f == nil {
		tmp, err := os.CreateTemp(e.dir, "."+name+fillSuffix+"*")
		if err != nil {
			return nil, fmt.Errorf("depot: fill %s/%s: %w", e.dir, name, err)
		}
		f = &fill{
			d: d, e: e, fm: fm, tmp: tmp,
			key: store.ContainerPrefix(e.table, e.projection, e.id) + name,
		}
		e.fills[name] = f
	}
	f.refs++
	return &fillFile{f: f, ctx: s.ctx}, nil
}

func (e *entry) fileMeta(name string) *columnar.FileMeta {
	for i := range e.m.Files {
		if e.m.Files[i].Name == name {
			return &e.m.Files[i]
		}
	}
	return nil
}

// fill is a column file of an entry being fetched block by block into a
// temporary file. It is shared by every reader of the file until the last
// one closes; then, if every block and the header were read, the footer
// is fetched, the file checked, synced and renamed into place.
type fill struct {
	d   *Depot
	e   *entry
	fm  *columnar.FileMeta
	key string
	tmp *os.File
	// refs counts open fillFiles; guarded by Depot.mu.
	refs int

	mu       sync.Mutex
	have     ranges                  // bytes written to tmp
	inflight map[int64]*inflightRead // fetches under way, by offset
}

// inflightRead is a range being fetched; done is closed when it ends.
type inflightRead struct {
	length int64
	done   chan struct{}
}

// fillFile is one reader's handle on a fill; ctx is its job's.
type fillFile struct {
	f      *fill
	ctx    context.Context
	closed bool
}

// ReadRange serves a range written already from the fill's file, else
// fetches it from the store and writes it there. A reader of a range
// another reader is fetching waits for that fetch.
func (ff *fillFile) ReadRange(p []byte, off int64) (int, bool, error) {
	f := ff.f
	end := off + int64(len(p))
	f.mu.Lock()
	for !f.have.covers(off, end) {
		in := f.inflight[off]
		if in == nil || in.length < int64(len(p)) {
			break
		}
		f.mu.Unlock()
		select {
		case <-in.done:
		case <-ff.ctx.Done():
			return 0, false, ff.ctx.Err()
		}
		f.mu.Lock() // done: written, or failed and fetched again below
	}
	if f.have.covers(off, end) {
		f.mu.Unlock()
		n, err := f.tmp.ReadAt(p, off)
		return n, false, err
	}
	in := &inflightRead{length: int64(len(p)), done: make(chan struct{})}
	if f.inflight == nil {
		f.inflight = map[int64]*inflightRead{}
	}
	if f.inflight[off] == nil {
		f.inflight[off] = in
	}
	f.mu.Unlock()
	n, kept, err := ff.fetch(p, off)
	f.mu.Lock()
	if kept {
		f.have.add(off, off+int64(n))
	}
	if f.inflight[off] == in {
		delete(f.inflight, off)
	}
	f.mu.Unlock()
	close(in.done)
	return n, true, err
}

// fetch reads p at off from the store and writes it to the fill's file;
// kept reports whether it was written there.
func (ff *fillFile) fetch(p []byte, off int64) (n int, kept bool, err error) {
	f := ff.f
	n, _, err = store.NewRemoteFile(ff.ctx, f.d.st, f.key, f.fm.Size).ReadRange(p, off)
	f.d.fetched.Add(int64(n))
	if err != nil {
		return n, false, err
	}
	if _, werr := f.tmp.WriteAt(p[:n], off); werr != nil {
		// A full depot disk costs the cache, not the job: the range is
		// not marked written, so the file is never completed.
		f.d.log.Warn("depot: keep fetched bytes", "file", f.tmp.Name(), "err", werr)
		return n, false, nil
	}
	return n, true, nil
}

// Local reports whether the range is in the fill's file or being fetched
// by another reader: reading it makes no new request.
func (ff *fillFile) Local(off, length int64) bool {
	ff.f.mu.Lock()
	defer ff.f.mu.Unlock()
	if in := ff.f.inflight[off]; in != nil && in.length >= length {
		return true
	}
	return ff.f.have.covers(off, off+length)
}

func (ff *fillFile) Size() int64 { return ff.f.fm.Size }

// Close ends this reader's use of the fill; the last one completes it or
// throws it away.
func (ff *fillFile) Close() error {
	if ff.closed {
		return nil
	}
	ff.closed = true
	f := ff.f
	d, e := f.d, f.e
	d.mu.Lock()
	f.refs--
	last := f.refs == 0
	if last {
		delete(e.fills, f.fm.Name)
	}
	d.mu.Unlock()
	if !last {
		return nil
	}
	err := f.complete(ff.ctx)
	if err == nil {
		d.mu.Lock()
		e.present[f.fm.Name] = true
		e.size += f.fm.Size
		d.used += f.fm.Size
		d.evict()
		d.mu.Unlock()
		d.filesFetched.Add(1)
		return nil
	}
	f.tmp.Close()
	os.Remove(f.tmp.Name())
	if !errors.Is(err, errIncomplete) {
		d.log.Warn("depot: keep fetched file", "file", filepath.Join(e.dir, f.fm.Name), "err", err)
	}
	return nil
}

// errIncomplete is complete's error for a fill whose readers did not read
// every block.
var errIncomplete = errors.New("not every block was read")

// complete makes the fill the column file: it fetches what no reader read
// after the last block (the footer), checks the whole file's CRC-32C,
// syncs it and renames it into place.
func (f *fill) complete(ctx context.Context) error {
	fm := f.fm
	bodyEnd := fm.HeaderLen
	if n := len(fm.Blocks); n > 0 {
		last := fm.Blocks[n-1]
		bodyEnd = last.Offset + last.Length
	}
	f.mu.Lock()
	whole := f.have.covers(0, bodyEnd)
	f.mu.Unlock()
	if !whole || bodyEnd > fm.Size {
		return errIncomplete
	}
	if tail := fm.Size - bodyEnd; tail > 0 {
		buf := make([]byte, tail)
		n, _, err := store.NewRemoteFile(ctx, f.d.st, f.key, fm.Size).ReadRange(buf, bodyEnd)
		f.d.fetched.Add(int64(n))
		if err != nil {
			return err
		}
		if _, err := f.tmp.WriteAt(buf, bodyEnd); err != nil {
			return err
		}
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(f.tmp, 0, fm.Size)); err != nil {
		return err
	}
	if got := h.Sum32(); got != fm.CRC {
		return fmt.Errorf("checksum %08x, manifest says %08x", got, fm.CRC)
	}
	if err := f.tmp.Sync(); err != nil {
		return err
	}
	if err := f.tmp.Close(); err != nil {
		return err
	}
	return os.Rename(f.tmp.Name(), filepath.Join(f.e.dir, fm.Name))
}

// ranges is a set of byte ranges [start, end), sorted and disjoint.
type ranges [][2]int64

func (r ranges) covers(start, end int64) bool {
	if start >= end {
		return true
	}
	i := sort.Search(len(r), func(i int) bool { return r[i][1] > start })
	return i < len(r) && r[i][0] <= start && r[i][1] >= end
}

func (r *ranges) add(start, end int64) {
	if start >= end {
		return
	}
	s := *r
	// The ranges that touch [start, end) are s[i:j].
	i := sort.Search(len(s), func(i int) bool { return s[i][1] >= start })
	j := i
	for j < len(s) && s[j][0] <= end {
		start, end = min(start, s[j][0]), max(end, s[j][1])
		j++
	}
	s = append(s[:i], append([][2]int64{{start, end}}, s[j:]...)...)
	*r = s
}

// writeFileSynced writes data to dir/name through a temporary file, synced
// and renamed into place.
func writeFileSynced(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+fillSuffix+"*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
