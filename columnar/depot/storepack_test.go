package depot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// waitFetched waits until the depot has fetched n column files.
func waitFetched(t *testing.T, d *depot.Depot, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for d.Stats().FilesFetched < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := d.Stats().FilesFetched; got != n {
		t.Fatalf("%d column files fetched, want %d", got, n)
	}
}

// A cold container the store keeps as a pack is prefetched with a few
// large ranged GETs, not one a column file: adjacent files are read
// together, up to the request bound, the sort key's by themselves (a
// mergeout merges them first); then every read is local.
func TestPrefetchPackFewRequests(t *testing.T) {
	const cols = 40
	st, ms, _ := wideBucket(t, 2, cols)
	for _, small := range []bool{false, true} {
		counting := &byteCountingStore{Store: st}
		d := openDepot(t, counting, depot.Options{})
		bound := int64(8 << 20)
		if small {
			// About four files a request.
			bound = 4 * ms[0].Files[0].Size
		}
		defer depot.SetRunBytes(bound)()
		var compressed, wantReads int64
		var srcs []columnar.Source
		for _, m := range ms {
			srcs = append(srcs, acquire(t, d, m.ID))
			compressed += m.CompressedBytes()
			c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			schema, err := m.ArrowSchema()
			if err != nil {
				t.Fatal(err)
			}
			keys, err := m.SortKey.Indices(schema)
			if err != nil || len(keys) == 0 {
				t.Fatalf("sort key %v: %v", m.SortKey, err)
			}
			var rest []int
			for i := range cols {
				if !slices.Contains(keys, i) {
					rest = append(rest, i)
				}
			}
			wantReads += int64(len(c.Ranges(keys, bound)) + len(c.Ranges(rest, bound)))
		}
		heads := counting.reads.Load()
		if heads != int64(len(ms)) {
			t.Errorf("acquiring %d containers made %d requests, want one each: the commit, which holds the pack's head", len(ms), heads)
		}
		headBytes := counting.bytes.Load()
		for _, src := range srcs {
			d.Prefetch(t.Context(), src)
		}
		waitFetched(t, d, int64(len(ms)*cols))
		reads, fetched := counting.reads.Load()-heads, counting.bytes.Load()-headBytes
		if reads != wantReads || (!small && reads != 2*int64(len(ms))) || (small && reads < int64(len(ms))*cols/5) {
			t.Errorf("bound %d: prefetch made %d requests, want %d", bound, reads, wantReads)
		}
		if fetched != compressed {
			t.Errorf("prefetch fetched %d bytes, the containers' column files are %d", fetched, compressed)
		}
		before := counting.reads.Load()
		for _, src := range srcs {
			readAll(t, src)
		}
		if got := counting.reads.Load() - before; got != 0 {
			t.Errorf("reading the prefetched containers made %d requests", got)
		}
		if s := d.Stats(); s.FilesCreated != int64(len(ms)) {
			t.Errorf("%d files created, want a pack each", s.FilesCreated)
		}
		for _, src := range srcs {
			if err := depot.Verify(src.String()); err != nil {
				t.Error(err)
			}
		}
		d.Close()
	}
}

// PrefetchColumns of some columns fetches their bytes alone, the files
// adjacent in the pack with one request.
func TestPrefetchColumnsCoalesced(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 40)
	m := ms[0]
	counting := &byteCountingStore{Store: st}
	d, src := acquired(t, counting, depot.Options{}, m.ID)
	heads, headBytes := counting.reads.Load(), counting.bytes.Load()
	cols := []int{5, 6, 7, 20}
	var names []string
	var want int64
	for _, c := range cols {
		names = append(names, m.Files[c].Column)
		want += m.Files[c].Size
	}
	d.PrefetchColumns(t.Context(), src, names)
	waitFetched(t, d, int64(len(cols)))
	if reads, got := counting.reads.Load()-heads, counting.bytes.Load()-headBytes; reads != 2 || got != want {
		t.Errorf("prefetch of columns %v: %d requests, %d bytes; want 2 requests (5-7 and 20), %d bytes", cols, reads, got, want)
	}
	for i := range m.Files {
		want := i == 5 || i == 6 || i == 7 || i == 20
		if held := depot.Holds(src.String(), m.Files[i].Name); held != want {
			t.Errorf("column %d held %v", i, held)
		}
	}
	before := counting.reads.Load()
	for _, c := range cols {
		if err := readColumn(src, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := counting.reads.Load() - before; got != 0 {
		t.Errorf("reading the prefetched columns made %d requests", got)
	}
}

// A bucket written before packs (an attempt of an object per column file)
// is read through the depot as before: cold with prefetch, a request a
// file, then warm; the copy is the store's.
func TestOldLayoutBucketThroughDepot(t *testing.T) {
	st := s3test.Start(t, "strata").Store(t)
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 6, Containers: 1, RowsPerContainer: 2000, BlockRows: 500, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	cdir := columnar.ContainerDir(local, "t", "p", m.ID)
	attempt := store.ContainerPrefix("t", "p", m.ID) + "a0123456789abcdef/"
	for _, name := range []string{m.Files[0].Name, m.Files[1].Name, m.Files[2].Name, m.Files[3].Name, m.Files[4].Name, m.Files[5].Name, columnar.ManifestName} {
		if err := st.Put(t.Context(), attempt+name, filepath.Join(cdir, name), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	commit := filepath.Join(t.TempDir(), "commit")
	if err := os.WriteFile(commit, []byte("a0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), store.ContainerPrefix("t", "p", m.ID)+store.CommitName, commit, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	counting := &byteCountingStore{Store: st}
	d, src := acquired(t, counting, depot.Options{}, m.ID)
	before := counting.reads.Load()
	d.Prefetch(t.Context(), src)
	waitFetched(t, d, int64(len(m.Files)))
	if got := counting.reads.Load() - before; got != int64(len(m.Files)) {
		t.Errorf("prefetch made %d requests, want one a file", got)
	}
	readAll(t, src)
	if err := depot.Verify(src.String()); err != nil {
		t.Error(err)
	}
	for _, fm := range m.Files {
		path, off, err := depot.HeldAt(src.String(), fm.Name)
		if err != nil {
			t.Fatal(err)
		}
		held, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(cdir, fm.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(held[off:off+fm.Size], want) {
			t.Errorf("%s held differs from the store's", fm.Name)
		}
	}
}

// A pack in the store cut short, or with a byte of a block flipped: a
// read of that block through the depot is a corrupt container error
// naming the container, the file and the block, with or without
// prefetch; the bad bytes are not kept, and once the store's pack is
// whole again the file is fetched again and read right.
func TestStorePackDamagedThroughDepot(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		for _, cut := range []bool{true, false} {
			st, ms, _ := wideBucket(t, 1, 4)
			m := ms[0]
			fm := m.Files[2]
			blk := len(fm.Blocks) - 2
			c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			good, err := store.ReadAll(t.Context(), st, c.Pack)
			if err != nil {
				t.Fatal(err)
			}
			_, base := c.File(2)
			bad := append([]byte(nil), good...)
			at := base + fm.Blocks[blk].Offset + fm.Blocks[blk].Length/2
			if cut {
				bad = bad[:at]
			} else {
				bad[at] ^= 0x20
			}
			put := func(data []byte) {
				p := filepath.Join(t.TempDir(), "pack")
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := st.Put(t.Context(), c.Pack, p, store.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			put(bad)
			d, err := depot.Open(t.TempDir(), st, depot.Options{})
			if err != nil {
				t.Fatal(err)
			}
			src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if prefetch {
				d.Prefetch(t.Context(), src)
				if cut {
					waitFetched(t, d, 2) // the files before the cut
				} else {
					waitFetched(t, d, 3) // all but the damaged one
				}
			}
			// The column reader's error may wrap the depot's fetch error
			// (a segment holding the cut): the store's container, file and
			// block are named either way.
			err = readColumn(src, 2)
			if !errors.Is(err, columnar.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%s block %d", fm.Name, blk)) || !strings.Contains(err.Error(), "t/p/"+m.ID) {
				t.Errorf("prefetch %v, cut %v: %v; want a CorruptError naming t/p/%s, %s, block %d", prefetch, cut, err, m.ID, fm.Name, blk)
			}
			if depot.Holds(src.String(), fm.Name) {
				t.Errorf("prefetch %v, cut %v: the bad copy is held", prefetch, cut)
			}
			for _, col := range []int{0, 1} {
				if err := readColumn(src, col); err != nil {
					t.Errorf("prefetch %v, cut %v: column %d: %v", prefetch, cut, col, err)
				}
			}
			put(good)
			if err := readColumn(src, 2); err != nil {
				t.Errorf("prefetch %v, cut %v: the store whole again: %v", prefetch, cut, err)
			}
			release()
			readAll(t, src)
			if err := depot.Verify(src.String()); err != nil {
				t.Error(err)
			}
			d.Close()
		}
	}
}

// The requests of several containers' Prefetches are made in the order a
// mergeout reads its inputs: every container's sort-key column first,
// by a request of its own, then the other columns by their position,
// across containers, not one container whole after another.
func TestPrefetchOrderAcrossContainers(t *testing.T) {
	const cols = 12
	st, ms, _ := wideBucket(t, 3, cols)
	rec := &orderStore{Store: st, hold: make(chan struct{})}
	d := openDepot(t, rec, depot.Options{Fetchers: 1})
	defer depot.SetRunBytes(2 * ms[0].Files[1].Size)() // about two files a request
	var srcs []columnar.Source
	where := map[string]*store.Container{} // pack key -> container
	var keys []int
	for _, m := range ms {
		srcs = append(srcs, acquire(t, d, m.ID))
		c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
		if err != nil {
			t.Fatal(err)
		}
		where[c.Pack] = c
		schema, err := m.ArrowSchema()
		if err != nil {
			t.Fatal(err)
		}
		if keys, err = m.SortKey.Indices(schema); err != nil || len(keys) != 1 {
			t.Fatalf("sort key %v: %v", keys, err)
		}
	}
	rec.record.Store(true)
	for _, src := range srcs {
		d.Prefetch(t.Context(), src)
	}
	close(rec.hold) // the first request waited for every Prefetch to be queued
	waitFetched(t, d, int64(len(ms)*cols))

	// Each request's first column file, and its rank: 0 for the key, else
	// its position among the others, after the key.
	rec.mu.Lock()
	reads := slices.Clone(rec.reads)
	rec.mu.Unlock()
	var ranks []int
	seen := map[string]bool{}
	for _, r := range reads {
		c := where[r.key]
		if c == nil {
			t.Fatalf("a request of %s, not a pack", r.key)
		}
		first := -1
		for i := range c.Manifest.Files {
			if _, off := c.File(i); off == r.off {
				first = i
			}
		}
		if first < 0 {
			t.Fatalf("a request of %s at %d: no column file begins there", r.key, r.off)
		}
		rank := 0
		if first == keys[0] && r.n != c.Manifest.Files[first].Size {
			t.Errorf("the request of %s's key column read %d bytes, the column file is %d", r.key, r.n, c.Manifest.Files[first].Size)
		}
		if first != keys[0] {
			rank = 1 + first
			if first > keys[0] {
				rank--
			}
		}
		ranks = append(ranks, rank)
		seen[r.key] = true
	}
	if len(seen) != len(ms) {
		t.Fatalf("requests of %d containers, want %d", len(seen), len(ms))
	}
	if !slices.IsSorted(ranks) || ranks[len(ms)-1] != 0 || ranks[len(ms)] == 0 {
		t.Errorf("requests by rank %v: want each container's key first, then the columns in order across containers", ranks)
	}
	for _, src := range srcs {
		if err := depot.Verify(src.String()); err != nil {
			t.Error(err)
		}
	}
}

// orderStore records the ranged reads made once record is set, the first
// one held until hold is closed.
type orderStore struct {
	store.Store
	record atomic.Bool
	hold   chan struct{}
	mu     sync.Mutex
	reads  []rangeRead
}

type rangeRead struct {
	key    string
	off, n int64
}

func (o *orderStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if o.record.Load() {
		<-o.hold
		o.mu.Lock()
		o.reads = append(o.reads, rangeRead{key, off, n})
		o.mu.Unlock()
	}
	return o.Store.NewRangeReader(ctx, key, off, n)
}

// A prefetch request marks each segment present as soon as it has
// streamed in: a reader of a file's first block goes on while the rest of
// the request is still on its way.
func TestPrefetchSegmentsReadableAsTheyArrive(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 3)
	m := ms[0]
	defer depot.SetSegmentBytes(1)()   // a segment a block
	defer depot.SetRunBytes(1 << 30)() // the two columns after the key in one request
	c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	fm := m.Files[1]
	_, base := c.File(1)
	stall := &stallingStore{Store: st, from: base, after: fm.Blocks[0].Offset + fm.Blocks[0].Length, release: make(chan struct{})}
	defer stall.open()
	d, src := acquired(t, stall, depot.Options{}, m.ID)
	d.Prefetch(t.Context(), src)
	// The prefetch's request of the two columns is under way (it has
	// claimed their segments) before the reader asks.
	stall.waitRequested(t)
	f, err := src.OpenFile(fm.Name, fm.Size)
	if err != nil {
		t.Fatal(err)
	}
	readFirst(t, f, fm.Blocks[0].Offset+fm.Blocks[0].Length, "the first block was not readable until the whole request was in")
	if n := stall.requests.Load(); n != 1 {
		t.Errorf("%d requests of the stalled range, want the prefetch's alone", n)
	}
	f.Close()
	stall.open()
	waitFetched(t, d, int64(len(m.Files)))
	if err := depot.Verify(src.String()); err != nil {
		t.Error(err)
	}
}

// stallingStore stalls a ranged read that begins at from once it has
// returned after bytes, until release is closed (open).
type stallingStore struct {
	store.Store
	from, after int64
	release     chan struct{}
	once        sync.Once
	requests    atomic.Int64
}

func (s *stallingStore) open() { s.once.Do(func() { close(s.release) }) }

// waitRequested waits until the stalled range has been asked for.
func (s *stallingStore) waitRequested(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.requests.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// readFirst reads f's first n bytes, failing with why if they take more
// than 5 seconds (a store stalled past them).
func readFirst(t *testing.T, f columnar.File, n int64, why string) {
	t.Helper()
	read := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(make([]byte, n), 0)
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(why)
	}
}

func (s *stallingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := s.Store.NewRangeReader(ctx, key, off, n)
	if err != nil || off != s.from {
		return r, err
	}
	s.requests.Add(1)
	return &stallingReader{ReadCloser: r, left: s.after, release: s.release}, nil
}

type stallingReader struct {
	io.ReadCloser
	left    int64
	release chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		<-r.release
		return r.ReadCloser.Read(p)
	}
	n, err := r.ReadCloser.Read(p[:min(int64(len(p)), r.left)])
	r.left -= int64(n)
	return n, err
}

// The segments of a large column file are prefetched side by side, a
// request each: by Prefetch up to Options.Fetchers at once, by
// PrefetchColumns two at once (its chains), so a windower reading one
// wide column does not wait a request's round trip per segment, and its
// first segments do not share the bandwidth with all the others. One
// fetcher fetches them in turn, and the file is kept whole all the same:
// the segments' requests share one open of it, so it is not dropped as
// read in part between two of them.
func TestPrefetchSegmentsOfAFileSideBySide(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 3)
	m := ms[0]
	defer depot.SetSegmentBytes(1)() // a segment a block: 4 in each file
	const col = 1
	fm := m.Files[col]
	if n := len(fm.Blocks); n != 4 {
		t.Fatalf("%d blocks in %s, want 4", n, fm.Name)
	}
	for _, c := range []struct {
		fetchers, want int64
		columns        bool
	}{{1, 1, true}, {3, 2, true}, {1, 1, false}, {3, 3, false}} {
		t.Run(fmt.Sprintf("fetchers=%d,columns=%v", c.fetchers, c.columns), func(t *testing.T) {
			gate := &gatingStore{Store: st}
			d, src := acquired(t, gate, depot.Options{Fetchers: int(c.fetchers)}, m.ID)
			before := d.Stats().BytesFetched // the container's head
			if c.columns {
				d.PrefetchColumns(t.Context(), src, []string{fm.Column})
			} else {
				d.Prefetch(t.Context(), src) // the key column first, then this one's segments
			}
			if c.columns {
				waitFetched(t, d, 1)
			} else {
				waitFetched(t, d, int64(len(m.Files)))
				before += m.CompressedBytes() - fm.Size // the other files
			}
			if got := gate.max.Load(); got != c.want {
				t.Errorf("%d requests in flight at most, want %d", got, c.want)
			}
			if got := d.Stats().BytesFetched - before; got != fm.Size {
				t.Errorf("%d bytes fetched, want the file's %d", got, fm.Size)
			}
			// The file is held whole and right: reading it back (every
			// block checked against its CRC-32C) fetches nothing.
			if err := readColumn(src, col); err != nil {
				t.Fatal(err)
			}
			if got := d.Stats().BytesFetched - before; got != fm.Size {
				t.Errorf("%d bytes fetched after reading the column back, want the file's %d", got, fm.Size)
			}
		})
	}
}
