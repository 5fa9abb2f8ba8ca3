// Package depot is a worker's local cache of the containers of a store
// (package store): a directory laid out as a data directory, bounded in
// bytes, evicting the least recently used container that no job is
// reading.
//
// A job acquires each input container (Acquire) and reads it through the
// columnar.Source the depot returns. A container the depot fetches is
// kept in one file, its pack: Acquire creates it with the manifest in its
// header, and each column file is fetched into its own byte range of the
// pack. So a container costs the depot one file created however wide it
// is (a file create is what the first layout, a file per column file,
// spent most of a cold read on). In the store a container is one object,
// its pack (package store, Format), and a column file is a range of it; a
// container uploaded before packs has an object per column file, read the
// same way.
//
// A column file the depot holds is read from its range of the pack; one
// it does not is fetched from the store into that range in segments of
// whole blocks of up to 4MiB (one ranged GET each, streamed to disk),
// each when a reader first reads a block in it: a small file is one
// request, a large one is fetched as far ahead as its readers read, and a
// reader of some columns (a windower) fetches those columns' bytes and no
// others. A reader waits for the bytes it reads, not for their segment:
// it goes on as soon as they have streamed in, the request going on
// behind it, so a job decodes a column's first blocks while the rest is
// on its way. Readers of one file share its fill; a segment one of them
// is fetching is waited for by the others, not fetched again. When the
// last reader closes a fill whose segments are all there, the depot
// checks the column file's whole range against the manifest's CRC-32C
// (its segments' sums, each taken as the segment streamed in, combined:
// nothing is read back) and marks it held in the pack, so the next job
// reads it locally; a fill read in part is not marked (its bytes are
// fetched again by the next reader).
//
// Prefetch fetches every file of an acquired container in the background,
// for a job that reads them all (a mergeout), with up to Options.Fetchers
// requests in flight over all the containers being prefetched. The column
// files adjacent in the store's pack are adjacent in the depot's too
// (both in manifest order), so Prefetch reads them together, one ranged
// GET of up to 2MiB streamed into the depot's pack for several files: a
// cold container of 100 small column files costs a few requests, not a
// hundred. A file larger than a request is fetched a segment a request,
// its segments side by side (a 16MiB column over a bucket 10ms away is in
// after about two round trips, not four). The requests of all prefetches
// share one queue, in the order a mergeout reads: the sort-key columns of
// every container first, then the others by their position, across
// containers (prefetch.go). PrefetchColumns does the same for some
// columns: a window job's, the columns its query reads, which the
// windower passes it once the query is compiled
// (windower.Options.Prefetch). A windower decodes those columns side by
// side, block by block, so their requests are queued by the rows they
// hold: the first segment of every column before the second of any, and a
// large file's segments two at a time, each chain queueing the next once
// one is in, so its last do not take the bandwidth its first need. A
// job whose inputs' files are all in the depot makes no request to the
// store. A job's output is written into the depot as a container of
// column files (columnar's layout), uploaded (Publish) and kept
// (write-through).
//
// What the depot fetches it does not sync: it is a cache of a store that
// has the data. A column file a crash left damaged is found, because
// every column file Open takes in is checked against the manifest's
// CRC-32C before its first read, and fetched again; a pack whose header
// is damaged is not taken in, and its container is fetched again.
//
// A column file damaged while the depot runs (bytes changed on disk, or
// the pack or file cut short or removed, after it was taken in) is
// fetched again at once. A reader of a file the depot holds checks each
// header and block it reads against the manifest's CRC-32C (the column
// reader checks again); a mismatch, a short read or a read error drops
// that column file, and only it: it is marked not held (in a pack; a
// column file of the first layout is removed), so the next to open it
// fills it from the store. The reader that found the damage reads the
// range again from that fill; only if the fresh copy is bad too (the
// store's is) is the read an error, a corrupt container error naming the
// container, the file and the block. Readers that had the damaged file
// open go on reading what they opened: each finds the damage itself
// when it reads it, and reads the fresh copy (the file's generation tells
// it the file was already dropped, so it does not drop the replacement).
// A held file missing or not of the manifest's size when opened (a pack
// too short to hold it) is fetched again the same way. The warning logged
// names the container, the column file and the block. Stats.Damaged
// counts the column files dropped.
//
// A depot directory is one depot's: two workers sharing one would evict
// and refetch files under each other's readers. Open takes an exclusive
// flock on the directory's lock file, writes its pid there and holds the
// lock until Close (the kernel drops it when the process dies); an Open
// of a directory another depot holds, in this process or another, fails
// at once with an error wrapping ErrLocked naming the holder's pid. Where
// there is no flock (not unix), nothing is locked.
//
// # Format
//
// The depot directory holds DIR/<table>/<projection>/<id>/ for each
// container, and the lock file DIR/.lock (the pid of the process holding
// it, in decimal, and a newline; empty once it is closed). A container
// the depot fetched is a directory holding one file, depot.pack:
//
//	offset 0   "STRATAPK"                     magic (8 bytes)
//	       8   uint32 1                       version
//	      12   uint32 M                       manifest length
//	      16   uint32                         CRC-32C of the manifest
//	      20   uint32 N                       column files (the manifest's)
//	      24   M bytes                        manifest.json, as the store has it
//	    24+M   N bytes                        presence: byte i is 1 if column
//	                                          file i is held whole, else 0
//	       D   column file 0, column file 1,  each at D plus the sizes of the
//	           ... column file N-1            ones before it; D is 24+M+N
//	                                          rounded up to a multiple of 4096
//
// Integers are little-endian. Ranges of column files not held are holes
// or stale bytes. The header is written once, when the container is
// acquired; a presence byte is set (a positioned write) once the column
// file's whole range matched the manifest's CRC-32C, and cleared when the
// column file is found damaged. Nothing is synced: Open does not take in
// a pack whose header is cut short or whose manifest does not match its
// CRC-32C (the next Acquire of the container removes it and fetches the
// container again), and takes in every column file a pack's presence
// bytes name (and whose range the file's size holds) unchecked, to be
// checked whole before its first read. No file is renamed into place.
//
// A container of the first layout (a data directory's: manifest.json and
// one file per column file, some of them absent) is read as it is; the
// depot's outputs are written so. A column file such a container lacks
// is filled in ".<file>.fill-<random>" beside it and renamed into place
// once checked; a manifest being written is ".manifest.json.tmp-<random>".
// Open removes the fills a crash left and takes every container in,
// oldest modification time least recently used, counting the column files
// held (checking each before its first read).
package depot

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/fsutil"
)

// Options configure a Depot.
type Options struct {
	// Limit is the bytes of containers the depot keeps once no job reads
	// them; 0 is no limit. Containers a job is reading are never evicted,
	// so while they are larger the depot holds more.
	Limit int64
	// Fetchers bounds the ranged GETs Prefetch keeps in flight, over
	// every container it is fetching; 0 is DefaultFetchers.
	Fetchers int
	Logger   *slog.Logger
}

// DefaultFetchers is Options.Fetchers' default.
const DefaultFetchers = 8

// Stats are a depot's counters since Open.
type Stats struct {
	Hits         int64 // inputs the depot knew (their manifest was there)
	Misses       int64 // inputs whose manifest was fetched from the store
	Evictions    int64 // containers evicted
	FilesFetched int64 // column files completed from the store
	BytesFetched int64 // bytes read from the store
	Damaged      int64 // column files found damaged on disk and dropped, to be fetched again
	FilesCreated int64 // files the depot created: a pack per container fetched, a fill per column file of an old-layout container
	Bytes        int64 // bytes held now
	Containers   int64 // containers held now
}

// Depot is a bounded local cache of a store's containers. It is safe for
// concurrent use.
type Depot struct {
	st    store.Store
	dir   *columnar.DataDir
	lock  *os.File // the directory's lock file, flocked until Close
	limit int64
	log   *slog.Logger

	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // of *entry, most recently used first; only fetched entries
	used    int64

	// queue holds the requests of every Prefetch under way.
	queue prefetchQueue

	hits, misses, evictions, filesFetched, fetched, damaged, created atomic.Int64
}

// entry is one container of the depot. Its fields other than the
// read-only ones are guarded by Depot.mu.
type entry struct {
	table, projection, id string
	dir                   string             // its local directory
	loc                   *store.Container   // where its files are in the store; nil until known
	m                     *columnar.Manifest // set before ready is closed
	manifest              []byte             // m's bytes
	files                 map[string]int     // m's column files by name: their index in m.Files and in the pack
	pack                  *pack              // its pack file; nil for a container of column files (old layout, outputs)
	size                  int64              // bytes counted in Depot.used
	present               map[string]held    // column files held whole
	fills                 map[string]*fill   // column files being filled
	gens                  map[string]uint64  // times each column file was dropped as damaged (nil: none)
	pins                  int
	elem                  *list.Element // nil while the manifest is fetched
	ready                 chan struct{} // closed when the manifest is there
	err                   error         // the manifest fetch's, read after ready
}

func key(table, projection, id string) string { return table + "/" + projection + "/" + id }

// Open opens the depot at dir (creating it) over st, locks it and takes
// in the containers already there. A directory another depot has open (a
// second worker given the same directory) gives an error wrapping
// ErrLocked, naming the holder's pid.
func Open(dir string, st store.Store, opts Options) (*Depot, error) {
	dd, err := columnar.OpenDataDir(dir)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(dd.Path())
	if err != nil {
		dd.Close()
		return nil, err
	}
	fetchers := opts.Fetchers
	if fetchers <= 0 {
		fetchers = DefaultFetchers
	}
	d := &Depot{st: st, dir: dd, lock: lock, limit: opts.Limit, log: opts.Logger, entries: map[string]*entry{}, lru: list.New()}
	d.queue = prefetchQueue{d: d, max: fetchers}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if err := d.scan(); err != nil {
		d.Close()
		return nil, err
	}
	d.mu.Lock()
	d.evict()
	d.mu.Unlock()
	return d, nil
}

// ErrLocked marks a depot directory another depot has open.
var ErrLocked = errors.New("directory locked by another depot")

// lockName is the depot directory's lock file. It begins with a dot, as
// no table name does (and scan passes over it).
const lockName = ".lock"

// lockDir takes the exclusive flock of the lock file in the depot
// directory dir and writes this process's pid into it; a lock another
// open of the file holds is an error wrapping ErrLocked naming the pid
// written there. The lock is what a process holds, not what the file
// says: the kernel drops it when the process dies, however it dies.
// Where there is no flock, nothing is locked.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("depot %s: lock: %w", dir, err)
	}
	ok, err := fsutil.TryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("depot %s: lock: %w", dir, err)
	}
	if !ok {
		holder := "holder unknown"
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
			holder = fmt.Sprintf("pid %d", pid)
			if pid == os.Getpid() {
				holder += " (this process)"
			}
		}
		f.Close()
		return nil, fmt.Errorf("depot %s: %w, %s", dir, ErrLocked, holder)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("depot %s: lock: %w", dir, err)
	}
	return f, nil
}

// scan takes in the containers under the depot directory, least recently
// modified last in the LRU, and removes unfinished fills and fetches.
func (d *Depot) scan() error {
	type found struct {
		e   *entry
		mod int64
	}
	var all []found
	tables, err := os.ReadDir(d.dir.Path())
	if err != nil {
		return fmt.Errorf("depot %s: %w", d.dir.Path(), err)
	}
	for _, t := range tables {
		if !t.IsDir() || strings.HasPrefix(t.Name(), ".") {
			continue
		}
		projs, err := d.dir.ReadDir(t.Name())
		if err != nil {
			return err
		}
		for _, p := range projs {
			if !p.IsDir() || strings.HasPrefix(p.Name(), ".") {
				continue
			}
			ids, err := d.dir.ReadDir(t.Name(), p.Name())
			if err != nil {
				return err
			}
			for _, c := range ids {
				if strings.HasPrefix(c.Name(), ".") {
					if strings.Contains(c.Name(), ".fetch-") {
						if err := d.dir.RemoveAll(t.Name(), p.Name(), c.Name()); err != nil {
							return err
						}
					}
					continue
				}
				info, err := c.Info()
				if err != nil {
					continue
				}
				e, err := d.load(t.Name(), p.Name(), c.Name(), heldUnchecked)
				if err != nil {
					continue // not a container (nor ours to remove)
				}
				e.ready = closed
				all = append(all, found{e, info.ModTime().UnixNano()})
			}
		}
	}
	// Newest first at the front.
	sort.Slice(all, func(i, j int) bool { return all[i].mod > all[j].mod })
	for _, f := range all {
		f.e.elem = d.lru.PushBack(f.e)
		d.entries[key(f.e.table, f.e.projection, f.e.id)] = f.e
		d.used += f.e.size
	}
	return nil
}

// held is the state of a column file the depot holds whole.
type held uint8

const (
	// heldUnchecked: found on disk at Open with the manifest's size. The
	// depot does not sync what it fetches, so a crash may have left it
	// damaged: it is checked against the manifest's CRC-32C before it is
	// first read.
	heldUnchecked held = iota + 1
	// heldChecked: fetched and checked in this process, or written and
	// synced by it (an output).
	heldChecked
)

// load makes the entry of a container whose manifest is in the depot: the
// column files of the manifest's size are present (in state h), fills are
// removed.
func (d *Depot) load(table, projection, id string, h held) (*entry, error) {
	dir, err := d.dir.ContainerDir(table, projection, id)
	if err != nil {
		return nil, err
	}
	data, err := columnar.DirSource(dir).ReadManifest()
	if errors.Is(err, columnar.ErrNotFound) {
		return d.loadPack(table, projection, id, dir)
	}
	if err != nil {
		return nil, err
	}
	m, err := columnar.DecodeManifest(data)
	if err != nil {
		return nil, err
	}
	e := newEntry(table, projection, id, dir, m, data)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sizes := make(map[string]int64, len(m.Files))
	for _, fm := range m.Files {
		sizes[fm.Name] = fm.Size
	}
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, ".") && (strings.Contains(name, fillSuffix) || strings.Contains(name, fsutil.TempMarker)) {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		want, ok := sizes[name]
		if !ok {
			continue
		}
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() && info.Size() == want {
			e.present[name] = h
			e.size += want
		}
	}
	return e, nil
}

// loadPack makes the entry of a container fetched into a pack file: the
// column files its presence bytes name are present, unchecked (nothing in
// a pack is synced, so each is checked before its first read). A pack
// file that is not one (a header a crash cut short) is an error: the
// container is fetched again.
func (d *Depot) loadPack(table, projection, id, dir string) (*entry, error) {
	p, data, m, held, err := openPack(dir)
	if err != nil {
		if !errors.Is(err, errNoPack) {
			d.log.Warn("depot: a pack file it cannot read; the container will be fetched again", "dir", dir, "err", err)
		}
		return nil, err
	}
	e := newEntry(table, projection, id, dir, m, data)
	e.pack = p
	for i, ok := range held {
		if ok {
			e.present[m.Files[i].Name] = heldUnchecked
			e.size += m.Files[i].Size
		}
	}
	return e, nil
}

func newEntry(table, projection, id, dir string, m *columnar.Manifest, data []byte) *entry {
	files := make(map[string]int, len(m.Files))
	for i := range m.Files {
		files[m.Files[i].Name] = i
	}
	return &entry{
		table: table, projection: projection, id: id, dir: dir, m: m, manifest: data, files: files,
		size: manifestAllowance, present: map[string]held{}, fills: map[string]*fill{},
	}
}

// closePack closes the entry's pack file, if it has one, as it leaves
// the depot (no job reads it). d.mu is held.
func (e *entry) closePack() {
	if e.pack != nil {
		e.pack.f.Close()
	}
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// manifestAllowance is the bytes a container's manifest is counted as.
const manifestAllowance = 4096

// Dir is the depot's directory, as the data directory the engines read.
func (d *Depot) Dir() *columnar.DataDir { return d.dir }

// Store is the store the depot caches.
func (d *Depot) Store() store.Store { return d.st }

// Close closes the depot's directory (not the store) and unlocks it.
func (d *Depot) Close() error {
	d.mu.Lock()
	for _, e := range d.entries {
		e.closePack()
	}
	d.mu.Unlock()
	err := d.dir.Close()
	d.lock.Truncate(0) // the pid there is no longer the holder's
	d.lock.Close()
	return err
}

// Stats returns the depot's counters.
func (d *Depot) Stats() Stats {
	d.mu.Lock()
	used, n := d.used, int64(d.lru.Len())
	d.mu.Unlock()
	return Stats{Hits: d.hits.Load(), Misses: d.misses.Load(), Evictions: d.evictions.Load(), FilesFetched: d.filesFetched.Load(), BytesFetched: d.fetched.Load(), Damaged: d.damaged.Load(), FilesCreated: d.created.Load(), Bytes: used, Containers: n}
}

// Acquire returns the Source of container table/projection/id, fetching
// its manifest from the store if the depot does not hold it, and keeps it
// in the depot until release is called; reads through the Source use
// ctx. Concurrent Acquires of one container fetch its manifest once. A
// container not in the store gives an error wrapping columnar.ErrNotFound.
func (d *Depot) Acquire(ctx context.Context, table, projection, id string) (src columnar.Source, release func(), err error) {
	dir, err := d.dir.ContainerDir(table, projection, id)
	if err != nil {
		return nil, nil, err
	}
	k := key(table, projection, id)
	d.mu.Lock()
	e, ok := d.entries[k]
	if ok {
		e.pins++
		if e.elem != nil {
			d.lru.MoveToFront(e.elem)
		}
		d.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			d.unpin(e)
			return nil, nil, ctx.Err()
		}
		if e.err != nil {
			d.unpin(e)
			return nil, nil, e.err
		}
		d.hits.Add(1)
		return &source{d: d, e: e, ctx: ctx, counts: new(columnar.FetchCounts)}, d.releaser(e), nil
	}
	e = &entry{table: table, projection: projection, id: id, dir: dir, pins: 1, ready: make(chan struct{})}
	d.entries[k] = e
	d.mu.Unlock()

	got, err := d.fetchManifest(ctx, table, projection, id, dir)
	d.mu.Lock()
	if err != nil {
		e.err = err
		delete(d.entries, k)
	} else {
		e.m, e.manifest, e.files, e.size, e.present, e.fills, e.loc, e.pack = got.m, got.manifest, got.files, got.size, got.present, got.fills, got.loc, got.pack
		e.elem = d.lru.PushFront(e)
		d.used += e.size
	}
	close(e.ready)
	d.mu.Unlock()
	if err != nil {
		d.unpin(e)
		return nil, nil, err
	}
	return &source{d: d, e: e, ctx: ctx, counts: new(columnar.FetchCounts)}, d.releaser(e), nil
}

// Ref names a container of the depot's store.
type Ref struct{ Table, Projection, ID string }

// acquireParallel bounds the Acquires AcquireAll runs at once.
const acquireParallel = 8

// AcquireAll is Acquire of every container of refs, up to 8 at once,
// with one release for them all: the Sources in refs' order. A cold
// Acquire waits on a request (the commit, which holds the pack's head;
// two or three in a row for a commit of the attempt's name alone), a
// job's inputs' Acquires come
// before its first read, and a loop of them under the load of the first
// inputs' prefetches spent seconds of a cold mergeout of 32 inputs on
// them. On an error, the containers acquired are released, and the error
// of the first ref that failed is returned.
func (d *Depot) AcquireAll(ctx context.Context, refs []Ref) ([]columnar.Source, func(), error) {
	srcs := make([]columnar.Source, len(refs))
	releases := make([]func(), len(refs))
	errs := make([]error, len(refs))
	release := func() {
		for _, r := range releases {
			if r != nil {
				r()
			}
		}
	}
	var failed atomic.Bool
	sem := make(chan struct{}, acquireParallel)
	var wg sync.WaitGroup
	for i, r := range refs {
		sem <- struct{}{}
		if failed.Load() {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			srcs[i], releases[i], errs[i] = d.Acquire(ctx, r.Table, r.Projection, r.ID)
			if errs[i] != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			release()
			return nil, nil, err
		}
	}
	return srcs, release, nil
}

// fetchManifest returns the entry of a container the depot does not hold:
// one whose manifest is in its directory already (an output this worker
// wrote, not yet taken in) is taken as it is; else the manifest is fetched
// from the store and written there.
func (d *Depot) fetchManifest(ctx context.Context, table, projection, id, dir string) (*entry, error) {
	if e, err := d.load(table, projection, id, heldChecked); err == nil {
		d.hits.Add(1)
		return e, nil
	}
	if _, err := os.Lstat(dir); err == nil {
		// Something without a manifest where the container belongs: not
		// ours (manifests are written last); start it again.
		if err := d.dir.RemoveContainer(table, projection, id); err != nil {
			return nil, err
		}
	}
	src, m, err := store.OpenSource(ctx, d.st, table, projection, id)
	if err != nil {
		return nil, fmt.Errorf("depot: %w", err)
	}
	data, _ := src.ReadManifest()
	d.fetched.Add(int64(len(data)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("depot: %w", err)
	}
	p, err := createPack(dir, m, data)
	if err != nil {
		return nil, fmt.Errorf("depot: %w", err)
	}
	d.created.Add(1)
	d.misses.Add(1)
	d.log.Debug("container manifest fetched", "table", table, "projection", projection, "container", id, "bytes", len(data))
	e := newEntry(table, projection, id, dir, m, data)
	e.loc = src.Container()
	e.pack = p
	return e, nil
}

func (d *Depot) releaser(e *entry) func() {
	var once sync.Once
	return func() { once.Do(func() { d.unpin(e) }) }
}

func (d *Depot) unpin(e *entry) {
	d.mu.Lock()
	e.pins--
	d.evict()
	d.mu.Unlock()
}

// evict removes the least recently used unpinned containers until the
// depot is within its limit. d.mu is held.
func (d *Depot) evict() {
	if d.limit <= 0 {
		return
	}
	for el := d.lru.Back(); el != nil && d.used > d.limit; {
		e := el.Value.(*entry)
		prev := el.Prev()
		if e.pins == 0 {
			if err := d.dir.RemoveContainer(e.table, e.projection, e.id); err != nil {
				d.log.Warn("depot: evict", "table", e.table, "projection", e.projection, "container", e.id, "err", err)
			} else {
				e.closePack()
				d.lru.Remove(el)
				delete(d.entries, key(e.table, e.projection, e.id))
				d.used -= e.size
				d.evictions.Add(1)
			}
		}
		el = prev
	}
}

// OutputDir returns the local directory a job writes its output container
// into before Publish.
func (d *Depot) OutputDir(table, projection, id string) (string, error) {
	return d.dir.ContainerDir(table, projection, id)
}

// Publish uploads the committed local container table/projection/id (in
// OutputDir) to the store and keeps it in the depot. If the store has the
// container already (another delivery of the job uploaded it first), the
// local copy is removed, the store's manifest returned and the error wraps
// columnar.ErrExists.
func (d *Depot) Publish(ctx context.Context, table, projection, id string) (*columnar.Manifest, error) {
	dir, err := d.OutputDir(table, projection, id)
	if err != nil {
		return nil, err
	}
	m, err := store.Upload(ctx, d.st, dir, table, projection, id)
	if errors.Is(err, columnar.ErrExists) {
		if rerr := d.forget(table, projection, id); rerr != nil {
			d.log.Warn("depot: remove a losing upload's copy", "dir", dir, "err", rerr)
		}
		return m, err
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	k := key(table, projection, id)
	if _, ok := d.entries[k]; !ok {
		d.mu.Unlock()
		e, err := d.load(table, projection, id, heldChecked)
		if err != nil {
			return m, fmt.Errorf("depot: keep published %s: %w", dir, err)
		}
		e.ready = closed
		d.mu.Lock()
		if _, ok := d.entries[k]; !ok {
			e.elem = d.lru.PushFront(e)
			d.entries[k] = e
			d.used += e.size
			d.evict()
		}
	}
	d.mu.Unlock()
	return m, nil
}

// forget removes a container from the depot unless a job reads it.
func (d *Depot) forget(table, projection, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := key(table, projection, id)
	if e, ok := d.entries[k]; ok {
		if e.pins > 0 || e.elem == nil {
			return nil
		}
		d.lru.Remove(e.elem)
		delete(d.entries, k)
		d.used -= e.size
		e.closePack()
	}
	return d.dir.RemoveContainer(table, projection, id)
}

// Remove drops a container from the depot (a result the CLI has read, a
// container the scheduler retired) unless a job reads it.
func (d *Depot) Remove(table, projection, id string) error { return d.forget(table, projection, id) }
