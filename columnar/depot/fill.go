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
	"sync"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
)

// fillSuffix marks a column file being filled: ".<file>.fill-<random>".
const fillSuffix = ".fill-"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// source is the columnar.Source of an acquired container; counts are
// what was fetched for it (by its readers and its Prefetch).
type source struct {
	d      *Depot
	e      *entry
	ctx    context.Context
	counts *columnar.FetchCounts
}

// Fetched returns the blocks and bytes fetched from the store for s.
func (s *source) Fetched() (blocks, bytes int64) { return s.counts.Fetched() }

func (s *source) String() string { return s.e.dir }

func (s *source) ReadManifest() ([]byte, error) { return s.e.manifest, nil }

// OpenFile opens a column file: from disk if the depot holds it (a
// heldFile, which fetches the file again if it finds it damaged), else
// as a fill that fetches what is read and keeps it.
func (s *source) OpenFile(name string, size int64) (columnar.File, error) {
	fm := s.e.fileMeta(name)
	if fm == nil {
		return nil, fmt.Errorf("open %s/%s: not a file of the manifest: %w", s.e.dir, name, fs.ErrNotExist)
	}
	f, gen, err := s.open(fm)
	if err != nil {
		return nil, err
	}
	if _, ok := f.(*fillFile); !ok {
		return &heldFile{s: s, fm: fm, cur: f, gen: gen}, nil
	}
	return f, nil
}

// open opens column file fm: the file the depot holds (a
// *columnar.LocalFile or, in a pack, a *packFile; and the generation of
// the file, for drop) or, if it holds none, a *fillFile. A held file
// missing from disk or not of the manifest's size (a pack too short to
// hold it) is dropped and filled.
func (s *source) open(fm *columnar.FileMeta) (columnar.File, uint64, error) {
	d, e, name := s.d, s.e, fm.Name
	var loc *store.Container
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		switch e.present[name] {
		case heldUnchecked:
			d.mu.Unlock()
			s.check(fm)
			d.mu.Lock()
			continue
		case heldChecked:
			f, err := d.openHeld(e, fm)
			if err != nil || f != nil {
				return f, e.gens[name], err
			}
			continue // dropped: fill it
		}
		if loc == nil { // a file to fetch: where is it?
			d.mu.Unlock()
			l, err := s.locate()
			d.mu.Lock()
			if err != nil {
				return nil, 0, err
			}
			loc = l
			continue
		}
		f := e.fills[name]
		if f == nil {
			i := loc.FileIndex(name)
			if i < 0 {
				return nil, 0, fmt.Errorf("depot: %s has no column file %s", loc.Where(), name)
			}
			key, objOff := loc.File(i)
			f = &fill{
				d: d, e: e, fm: fm, segs: segments(fm),
				key: key, objOff: objOff, loc: loc, locIdx: i,
				completed: make(chan struct{}),
			}
			if e.pack != nil {
				// Into the column file's range of the pack: no file to create.
				f.w, f.idx, f.base = e.pack.f, e.files[name], e.pack.base[e.files[name]]
			} else {
				tmp, err := os.CreateTemp(e.dir, "."+name+fillSuffix+"*")
				if err != nil {
					return nil, 0, fmt.Errorf("depot: fill %s/%s: %w", e.dir, name, err)
				}
				d.created.Add(1)
				f.w, f.tmp = tmp, true
			}
			e.fills[name] = f
		}
		if !f.completing {
			f.refs++
			return &fillFile{f: f, ctx: s.ctx, counts: s.counts}, 0, nil
		}
		// Its last reader is making it the file: wait, then read that.
		d.mu.Unlock()
		select {
		case <-f.completed:
		case <-s.ctx.Done():
			d.mu.Lock()
			return nil, 0, s.ctx.Err()
		}
		d.mu.Lock()
	}
}

// openHeld opens the column file fm the depot holds. One gone from disk
// or not of the manifest's size (cut short, or grown, since it was taken
// in; in a pack, a pack too short to hold it) is dropped and nil
// returned. d.mu is held.
func (d *Depot) openHeld(e *entry, fm *columnar.FileMeta) (columnar.File, error) {
	if p := e.pack; p != nil {
		i := e.files[fm.Name]
		size, err := p.size()
		if err != nil {
			return nil, fmt.Errorf("depot: %s: %w", p.path, err)
		}
		if end := p.base[i] + fm.Size; size < end {
			d.dropLocked(e, fm, fmt.Sprintf("pack cut short: %d bytes, the column file ends at %d", size, end))
			return nil, nil
		}
		return &packFile{p: p, base: p.base[i], size: fm.Size}, nil
	}
	f, err := columnar.OpenLocalFile(filepath.Join(e.dir, fm.Name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.dropLocked(e, fm, "gone from disk")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("depot: %w", err)
	case f.Size() != fm.Size:
		f.Close()
		d.dropLocked(e, fm, fmt.Sprintf("%d bytes on disk, manifest says %d", f.Size(), fm.Size))
		return nil, nil
	}
	return f, nil
}

// check reads a file found on disk at Open whole and compares it with the
// manifest's CRC-32C: a match is heldChecked from now on; a mismatch (what
// a crash can leave of a file never synced) is dropped, to be fetched
// again.
func (s *source) check(fm *columnar.FileMeta) {
	d, e := s.d, s.e
	path := filepath.Join(e.dir, fm.Name)
	ok := false
	if e.pack != nil {
		ok = e.pack.checkColumn(e.files[fm.Name], fm)
	} else if f, err := os.Open(path); err == nil {
		h := crc32.New(castagnoli)
		n, err := io.Copy(h, f)
		f.Close()
		ok = err == nil && n == fm.Size && h.Sum32() == fm.CRC
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.present[fm.Name] != heldUnchecked {
		return // another reader checked it first
	}
	if ok {
		e.present[fm.Name] = heldChecked
		return
	}
	d.dropLocked(e, fm, "found at start not matching its manifest's checksum")
}

// locate returns where the container's files are in the store, resolving
// its commit the first time for a container the depot took in from disk
// or published itself.
func (s *source) locate() (*store.Container, error) {
	d, e := s.d, s.e
	d.mu.Lock()
	loc := e.loc
	d.mu.Unlock()
	if loc != nil {
		return loc, nil
	}
	loc, err := store.Resolve(s.ctx, d.st, e.table, e.projection, e.id)
	if err != nil {
		return nil, fmt.Errorf("depot: %w", err)
	}
	if len(loc.Manifest.Files) != len(e.m.Files) {
		return nil, fmt.Errorf("depot: %s: the store's manifest has %d column files, the depot's %d", loc.Where(), len(loc.Manifest.Files), len(e.m.Files))
	}
	for i := range e.m.Files {
		if a, b := &loc.Manifest.Files[i], &e.m.Files[i]; a.Name != b.Name || a.Size != b.Size || a.CRC != b.CRC {
			return nil, fmt.Errorf("depot: %s: the store's column file %d (%s) is not the one the depot's manifest names (%s)", loc.Where(), i, a.Name, b.Name)
		}
	}
	d.mu.Lock()
	e.loc = loc
	d.mu.Unlock()
	return loc, nil
}

func (e *entry) fileMeta(name string) *columnar.FileMeta {
	if i, ok := e.files[name]; ok {
		return &e.m.Files[i]
	}
	return nil
}

// segmentBytes bounds the bytes one request fetches into a fill: a file
// is fetched in segments of whole blocks (the first with the header, the
// last with the footer) of up to this size, each streamed to disk. A
// small file is one request; a large one is read as far ahead as its
// readers read, a segment at a time.
var segmentBytes int64 = 4 << 20 // a variable for tests

// fill is a column file of an entry being fetched, segment by segment,
// into its range of the container's pack file (or, in a container of
// column files, into a temporary file). It is shared by every reader of
// the file until the last one closes; then, if every segment was fetched,
// the file is checked and marked held in the pack (or renamed into
// place).
type fill struct {
	d  *Depot
	e  *entry
	fm *columnar.FileMeta
	// key is the store object holding the column file, at objOff (a
	// pack's range, or an object of its own at 0); loc is the container
	// resolved, locIdx the file's index in it.
	key    string
	objOff int64
	loc    *store.Container
	locIdx int
	w      *os.File // the pack, or the temporary file
	tmp    bool     // w is a temporary file of its own, not the pack
	idx    int      // in a pack: the column file's index
	base   int64    // the column file's offset in w
	segs   []segment
	// refs counts open fillFiles, and completing is set once the last
	// has closed; guarded by Depot.mu. completed is closed when the fill
	// is the file or is dropped.
	refs       int
	completing bool
	completed  chan struct{}

	mu sync.Mutex // guards segs[i]'s state, written, sum and wake
}

// segment is the byte range [start, end) of a fill fetched by one
// request, the column file's blocks from block on. A request streams its
// bytes to disk in order, and readers read those written while the rest
// is on its way: a reader of the first blocks of a 4MiB segment waits for
// them, not for the segment.
type segment struct {
	start, end int64
	block      int // the first block it holds (0 for the first segment)
	state      segmentState
	// written counts the bytes from start that are in the file (while
	// fetching, and all of them once present); sum, once present, is the
	// segment's CRC-32C as it streamed in: the fill's is its segments'
	// combined (crcCombine).
	written int64
	sum     uint32
	// wake is closed when written reaches wakeAt (the least a waiter
	// needs) or the fetch ends; nil if no one waits.
	wake   chan struct{}
	wakeAt int64
}

type segmentState int

const (
	segmentAbsent segmentState = iota
	segmentFetching
	segmentPresent
)

// segments cuts a column file into fetch segments at block boundaries.
func segments(fm *columnar.FileMeta) []segment {
	var segs []segment
	start, first := int64(0), 0
	for i, b := range fm.Blocks {
		if b.Offset < start || b.Length <= 0 || b.Offset+b.Length > fm.Size {
			// Not the layout of a valid file: fetch it whole, and let
			// the block checksums say what is wrong.
			return []segment{{start: 0, end: fm.Size}}
		}
		end := b.Offset + b.Length
		if i == len(fm.Blocks)-1 {
			end = fm.Size
		}
		if end-start > segmentBytes && b.Offset > start {
			segs = append(segs, segment{start: start, end: b.Offset, block: first})
			start, first = b.Offset, i
		}
		if i == len(fm.Blocks)-1 || end-start >= segmentBytes {
			segs = append(segs, segment{start: start, end: end, block: first})
			start, first = end, i+1
		}
	}
	if start < fm.Size {
		segs = append(segs, segment{start: start, end: fm.Size, block: first})
	}
	return segs
}

// fillFile is one reader's handle on a fill; ctx is its job's.
type fillFile struct {
	f      *fill
	ctx    context.Context
	counts *columnar.FetchCounts
	closed bool
	behind sync.WaitGroup // the requests it started (fetchBehind)
}

// ReadAt reads from the fill's file once the segments that hold the
// range are there, fetching those that are not (and waiting for those
// another reader is fetching).
func (ff *fillFile) ReadAt(p []byte, off int64) (int, error) {
	f := ff.f
	end := off + int64(len(p))
	if off < 0 || end > f.fm.Size {
		return 0, fmt.Errorf("read %s: range [%d, %d) outside its %d bytes", f.key, off, end, f.fm.Size)
	}
	if err := ff.ensureRange(off, end); err != nil {
		return 0, err
	}
	n, err := f.w.ReadAt(p, f.base+off)
	if (err != nil || n < len(p)) && !f.tmp {
		// The pack was cut short (or failed) under the fill after the
		// range was fetched: fetch it again.
		f.mu.Lock()
		for i := range f.segs {
			if s := &f.segs[i]; s.end > off && s.start < end && s.state == segmentPresent {
				s.state = segmentAbsent
			}
		}
		f.mu.Unlock()
		if err := ff.ensureRange(off, end); err != nil {
			return 0, err
		}
		n, err = f.w.ReadAt(p, f.base+off)
	}
	return n, err
}

// ensureRange returns once the bytes [off, end) are in the fill's file:
// their segments there, or being fetched and streamed that far.
func (ff *fillFile) ensureRange(off, end int64) error {
	f := ff.f
	for i := range f.segs {
		s := &f.segs[i]
		if s.end <= off || s.start >= end {
			continue
		}
		if err := ff.ensure(i, min(end, s.end)-s.start); err != nil {
			return err
		}
	}
	return nil
}

// ensure returns once the first need bytes of segment i are in the fill's
// file: fetched, or streamed that far by the request fetching it, which
// it waits on. A segment no request is fetching it fetches, behind it
// (fetchBehind): it goes on once its bytes are in, as if another reader
// had asked first, and returns the request's error if it fails.
func (ff *fillFile) ensure(i int, need int64) error {
	f := ff.f
	var fetched <-chan error // the request this reader started, if any
	for {
		f.mu.Lock()
		s := &f.segs[i]
		if s.state == segmentPresent || s.state == segmentFetching && s.written >= need {
			f.mu.Unlock()
			return nil
		}
		if s.state == segmentAbsent && fetched == nil {
			s.claim()
			f.mu.Unlock()
			fetched = ff.fetchBehind(i)
			continue
		}
		if s.state == segmentAbsent {
			// The request this reader started ended, the segment not
			// in: its error says why.
			f.mu.Unlock()
			if err := <-fetched; err != nil {
				return err
			}
			fetched = nil
			continue
		}
		if s.wake == nil || need < s.wakeAt {
			s.wakeAt = need
		}
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake := s.wake
		f.mu.Unlock()
		select {
		case <-wake:
			// Further along, present, or failed (fetched here, then).
		case err := <-fetched:
			if err != nil {
				return err
			}
			fetched = nil // present
		case <-ff.ctx.Done():
			return ff.ctx.Err()
		}
	}
}

// fetchBehind fetches segment i (claimed) in the background, and returns
// where its error comes once it ends. It runs under the reader's ctx (a
// job that ends stops it), and the reader's Close waits for it: a file a
// job has read whole is held once the job has closed it.
func (ff *fillFile) fetchBehind(i int) <-chan error {
	done := make(chan error, 1)
	ff.behind.Add(1)
	go func() {
		defer ff.behind.Done()
		done <- ff.fetch(i)
	}()
	return done
}

// fetch streams segment i (claimed) of the column file into the fill's
// file, and settles it: present, or absent again if the request failed.
func (ff *fillFile) fetch(i int) error {
	f := ff.f
	start, end := f.segs[i].start, f.segs[i].end
	n, err := segmentWriter(ff, i).fetch(ff.ctx, f.key, f.objOff+start, end-start)
	switch {
	case err != nil:
		return fmt.Errorf("depot: fetch %s of %s into %s: %w", f.fm.Name, f.key, f.w.Name(), err)
	case n != end-start:
		return f.loc.Corrupt(f.locIdx, start+n, fmt.Sprintf("object %s is shorter than its manifest says: %d of %d bytes at offset %d", f.key, n, end-start, f.objOff+start), nil)
	}
	return nil
}

// Local reports whether the range is in the fill's file or being fetched
// by another reader: reading it makes no new request.
func (ff *fillFile) Local(off, length int64) bool {
	f := ff.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.segs {
		s := &f.segs[i]
		if s.end > off && s.start < off+length && s.state == segmentAbsent {
			return false
		}
	}
	return true
}

func (ff *fillFile) Size() int64 { return ff.f.fm.Size }

// Close ends this reader's use of the fill; the last one completes it or
// throws it away.
func (ff *fillFile) Close() error {
	if ff.closed {
		return nil
	}
	ff.closed = true
	ff.behind.Wait()
	f := ff.f
	d, e := f.d, f.e
	d.mu.Lock()
	f.refs--
	last := f.refs == 0
	if last {
		f.completing = true
	}
	d.mu.Unlock()
	if !last {
		return nil
	}
	err := f.complete()
	if err != nil && f.tmp {
		f.w.Close()
		os.Remove(f.w.Name())
	}
	d.mu.Lock()
	delete(e.fills, f.fm.Name)
	if err == nil {
		e.present[f.fm.Name] = heldChecked
		e.size += f.fm.Size
		d.used += f.fm.Size
		d.evict()
	}
	d.mu.Unlock()
	close(f.completed)
	if err == nil {
		d.filesFetched.Add(1)
		return nil
	}
	if !errors.Is(err, errIncomplete) {
		d.log.Warn("depot: keep fetched file", "file", filepath.Join(e.dir, f.fm.Name), "err", err)
	}
	return nil
}

// errIncomplete is complete's error for a fill whose readers did not read
// every segment.
var errIncomplete = errors.New("not every block was read")

// complete makes the fill the column file: it checks the whole file's
// CRC-32C (its segments' sums, taken as they streamed in, combined), then
// sets its presence byte in the pack (or renames the temporary file into
// place). It does not sync: the depot is a cache, and
// a file a crash damaged is found by the check of every file taken in at
// Open before its first read (heldUnchecked).
func (f *fill) complete() error {
	var sum uint32
	f.mu.Lock()
	for _, s := range f.segs {
		if s.state != segmentPresent {
			f.mu.Unlock()
			return errIncomplete
		}
		sum = crcCombine(sum, s.sum, s.end-s.start)
	}
	f.mu.Unlock()
	fm := f.fm
	if sum != fm.CRC {
		return fmt.Errorf("checksum %08x, manifest says %08x", sum, fm.CRC)
	}
	if !f.tmp {
		return f.e.pack.setHeld(f.idx, true)
	}
	if err := f.w.Close(); err != nil {
		return err
	}
	return os.Rename(f.w.Name(), filepath.Join(f.e.dir, fm.Name))
}
