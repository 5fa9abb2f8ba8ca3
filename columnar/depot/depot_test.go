package depot_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// bucket returns an S3 store holding n generated containers of t.p and
// their manifests.
func bucket(t *testing.T, n int) (store.Store, []*columnar.Manifest) {
	t.Helper()
	st := s3test.Start(t, "strata").Store(t)
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 3, Containers: n, RowsPerContainer: 2000, BlockRows: 500, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local, "t", "p", m.ID), "t", "p", m.ID); err != nil {
			t.Fatal(err)
		}
	}
	return st, ms
}

// readAll reads every block of every column of src and returns what src
// fetched for it.
func readAll(t *testing.T, src columnar.Source) (blocks, bytes int64) {
	t.Helper()
	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for col := range c.Schema().NumFields() {
		r, err := c.OpenColumn(col)
		if err != nil {
			t.Fatal(err)
		}
		for b := range r.NumBlocks() {
			a, err := r.ReadBlock(b)
			if err != nil {
				t.Fatalf("column %d block %d: %v", col, b, err)
			}
			a.Release()
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return columnar.Fetched([]columnar.Source{src})
}

func TestAcquireFetchesOnceThenHits(t *testing.T) {
	st, ms := bucket(t, 1)
	d, err := depot.Open(t.TempDir(), st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id := ms[0].ID
	const n = 8
	var wg sync.WaitGroup
	srcs := make([]columnar.Source, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			src, release, err := d.Acquire(t.Context(), "t", "p", id)
			srcs[i], errs[i] = src, err
			if err == nil {
				defer release()
				if _, err := src.ReadManifest(); err != nil {
					errs[i] = err
				}
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("acquire %d: %v", i, errs[i])
		}
	}
	s := d.Stats()
	if s.Misses != 1 || s.Hits != n-1 {
		t.Errorf("stats %+v: want 1 miss, %d hits", s, n-1)
	}
	if s.BytesFetched <= 0 || s.BytesFetched > 8192 {
		t.Errorf("acquiring fetched %d bytes; want the manifest only", s.BytesFetched)
	}

	// The first read fetches every block once, by ranges, and completes
	// the depot's copy of each file.
	src, release, err := d.Acquire(t.Context(), "t", "p", id)
	if err != nil {
		t.Fatal(err)
	}
	gotBlocks, gotBytes := readAll(t, src)
	m := ms[0]
	blocks := int64(len(m.Files) * len(m.Blocks))
	if gotBlocks != blocks {
		t.Errorf("first read fetched %d blocks, want %d", gotBlocks, blocks)
	}
	if gotBytes != m.CompressedBytes() {
		t.Errorf("first read fetched %d bytes of a container of %d", gotBytes, m.CompressedBytes())
	}
	s = d.Stats()
	if s.FilesFetched != int64(len(m.Files)) || s.BytesFetched < m.CompressedBytes() || s.BytesFetched > m.CompressedBytes()+8192 {
		t.Errorf("after the first read: %+v; want %d files of %d bytes", s, len(m.Files), m.CompressedBytes())
	}
	if err := depot.Verify(src.String()); err != nil {
		t.Errorf("depot's copy: %v", err)
	}
	release()

	// Again: a hit, nothing fetched.
	src, release, err = d.Acquire(t.Context(), "t", "p", id)
	if err != nil {
		t.Fatal(err)
	}
	if b, n := readAll(t, src); b != 0 || n != 0 {
		t.Errorf("second read fetched %d blocks, %d bytes", b, n)
	}
	release()
	if s2 := d.Stats(); s2.BytesFetched != s.BytesFetched {
		t.Errorf("second read fetched %d bytes", s2.BytesFetched-s.BytesFetched)
	}
}

// A file fetched only in part is not kept; one read to the end by two
// readers at once is fetched once and kept.
func TestPartialReadNotKept(t *testing.T) {
	defer depot.SetSegmentBytes(1)() // a segment per block
	st, ms := bucket(t, 1)
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src, release, err := d.Acquire(t.Context(), "t", "p", ms[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenColumn(0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	r.Close()
	name := ms[0].Files[0].Name
	if depot.Holds(src.String(), name) {
		t.Errorf("a file read in part is held in the depot")
	}
	if left, _ := filepath.Glob(filepath.Join(src.String(), ".*")); len(left) != 0 {
		t.Errorf("fills left behind: %v", left)
	}

	r1, err := c.OpenColumn(1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.OpenColumn(1)
	if err != nil {
		t.Fatal(err)
	}
	before := d.Stats().BytesFetched
	for b := range r1.NumBlocks() {
		for _, r := range []*columnar.ColumnReader{r1, r2} {
			a, err := r.ReadBlock(b)
			if err != nil {
				t.Fatal(err)
			}
			a.Release()
		}
	}
	r1.Close()
	r2.Close()
	fm := ms[0].Files[1]
	if got := d.Stats().BytesFetched - before; got > fm.Size {
		t.Errorf("two readers of one file fetched %d bytes of a %d-byte file", got, fm.Size)
	}
	if !depot.Holds(src.String(), fm.Name) {
		t.Errorf("file read whole is not kept")
	}
	d.Close()
	// Reopened, the depot counts the file it holds and not the others.
	d2, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if s := d2.Stats(); s.Containers != 1 || s.Bytes != fm.Size+4096 {
		t.Errorf("reopened: %+v, want one container of %d bytes", s, fm.Size+4096)
	}
	// Reading it all fetches the other files (from the attempt its
	// commit names) and not the one held.
	src2, release2, err := d2.Acquire(t.Context(), "t", "p", ms[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, bytes := readAll(t, src2); bytes != ms[0].CompressedBytes()-fm.Size {
		t.Errorf("reopened depot fetched %d bytes, want %d (all but the file held)", bytes, ms[0].CompressedBytes()-fm.Size)
	}
}

// A read of an object gone from the store fails with an error naming
// it; nothing half-fetched is kept.
func TestStoreFailsMidRead(t *testing.T) {
	defer depot.SetSegmentBytes(1)()
	st, ms := bucket(t, 1)
	_, src := acquired(t, st, depot.Options{}, ms[0].ID)
	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenColumn(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Remove(t.Context(), st, "t", "p", ms[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadBlock(0)
	var ce *columnar.CorruptError
	if err == nil || !errors.As(err, &ce) || ce.File != ms[0].Files[2].Name {
		t.Errorf("read of a removed object: %v; want a CorruptError naming the file", err)
	}
	r.Close()
	if depot.Holds(src.String(), ms[0].Files[2].Name) {
		t.Errorf("a failed fill was kept")
	}
	if left, _ := filepath.Glob(filepath.Join(src.String(), ".*")); len(left) != 0 {
		t.Errorf("fills left behind: %v", left)
	}
}

// A small file is fetched with one request, however many blocks it has.
func TestSmallFileOneRequest(t *testing.T) {
	st, ms := bucket(t, 1)
	counting := &countingStore{Store: st}
	_, src := acquired(t, counting, depot.Options{}, ms[0].ID)
	before := counting.reads.Load()
	readAll(t, src)
	if got, want := counting.reads.Load()-before, int64(len(ms[0].Files)); got != want {
		t.Errorf("%d ranged reads for %d files of %d blocks each", got, want, len(ms[0].Blocks))
	}
}

// countingStore counts ranged reads.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (c *countingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.reads.Add(1)
	return c.Store.NewRangeReader(ctx, key, off, n)
}

func TestLRUAndSizeBound(t *testing.T) {
	st, ms := bucket(t, 4)
	size := ms[0].CompressedBytes() + 4096
	for _, m := range ms {
		size = max(size, m.CompressedBytes()+4096)
	}
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{Limit: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	use := func(id string) {
		t.Helper()
		src, release, err := d.Acquire(t.Context(), "t", "p", id)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, src)
		release()
	}
	held := func(id string) bool {
		_, err := os.Stat(filepath.Join(dir, "t", "p", id))
		return err == nil
	}
	a, b, c, e := ms[0].ID, ms[1].ID, ms[2].ID, ms[3].ID
	use(a)
	use(b)
	use(a) // b is now the least recently used
	use(c)
	if !held(a) || held(b) || !held(c) {
		t.Errorf("after a b a c with room for two: a %v b %v c %v; want a and c", held(a), held(b), held(c))
	}
	s := d.Stats()
	if s.Evictions != 1 || s.Bytes > 2*size || s.Containers != 2 {
		t.Errorf("stats %+v", s)
	}
	// A container being read is not evicted, even over the limit.
	srcA, relA, err := d.Acquire(t.Context(), "t", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	srcB, relB, err := d.Acquire(t.Context(), "t", "p", b)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, srcB)
	srcE, relE, err := d.Acquire(t.Context(), "t", "p", e)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, srcE)
	if err := depot.Verify(srcA.String()); err != nil {
		t.Errorf("a pinned container was evicted: %v", err)
	}
	relA()
	relB()
	relE()
	if s := d.Stats(); s.Bytes > 2*size {
		t.Errorf("after release the depot holds %d bytes, limit %d", s.Bytes, 2*size)
	}
	d.Close()

	// Reopened, the depot takes in what it holds.
	d2, err := depot.Open(dir, st, depot.Options{Limit: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if s := d2.Stats(); s.Containers != 2 {
		t.Errorf("reopened depot holds %d containers, want 2", s.Containers)
	}
	_, rel, err := d2.Acquire(t.Context(), "t", "p", e)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if s := d2.Stats(); s.Misses != 0 || s.Hits != 1 {
		t.Errorf("reopened depot: %+v, want a hit", s)
	}
}

func TestAcquireMissing(t *testing.T) {
	st, _ := bucket(t, 1)
	d, err := depot.Open(t.TempDir(), st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, _, err := d.Acquire(t.Context(), "t", "p", "nope"); !errors.Is(err, columnar.ErrNotFound) {
		t.Errorf("missing: %v, want ErrNotFound", err)
	}
	if _, _, err := d.Acquire(t.Context(), "t", "..", "x"); !errors.Is(err, columnar.ErrOutsideRoot) {
		t.Errorf("outside: %v, want ErrOutsideRoot", err)
	}
}

func TestPublishWriteThrough(t *testing.T) {
	st, _ := bucket(t, 0)
	d, err := depot.Open(t.TempDir(), st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.OutputDir("t", "p", "out")
	if err != nil {
		t.Fatal(err)
	}
	gen := t.TempDir()
	ms, err := columnar.Generate(gen, columnar.GenOptions{Table: "t", Projection: "p", Containers: 1, RowsPerContainer: 100, FirstID: 9})
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite under the ID "out": copy the generated container and fix the manifest's ID.
	copyContainer(t, columnar.ContainerDir(gen, "t", "p", ms[0].ID), out, "out")
	if _, err := d.Publish(t.Context(), "t", "p", "out"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Check(t.Context(), st, "t", "p", "out"); err != nil {
		t.Errorf("published container: %v", err)
	}
	_, rel, err := d.Acquire(t.Context(), "t", "p", "out")
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if s := d.Stats(); s.Misses != 0 || s.Hits != 1 || s.BytesFetched != 0 {
		t.Errorf("a published output read back fetched: %+v", s)
	}
	if _, err := d.Publish(t.Context(), "t", "p", "out"); !errors.Is(err, columnar.ErrExists) {
		t.Errorf("publish twice: %v, want ErrExists", err)
	}
}

func copyContainer(t *testing.T, src, dst, id string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == columnar.ManifestName {
			m, err := columnar.DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			m.ID = id
			if b, err = m.Encode(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Prefetch fetches every file once, counted for the source it was given,
// while a reader reads the same files; the container stays pinned until
// it is done.
func TestPrefetch(t *testing.T) {
	defer depot.SetSegmentBytes(1)() // many segments: prefetch and reader interleave
	st, ms := bucket(t, 1)
	d, err := depot.Open(t.TempDir(), st, depot.Options{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := ms[0]
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.Prefetch(t.Context(), src)
	readAll(t, src)
	release()
	deadline := time.Now().Add(10 * time.Second)
	for d.Stats().FilesFetched < int64(len(m.Files)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s := d.Stats()
	if s.FilesFetched != int64(len(m.Files)) {
		t.Fatalf("after prefetch and a read: %+v, want %d files", s, len(m.Files))
	}
	if blocks, bytes := columnar.Fetched([]columnar.Source{src}); bytes != m.CompressedBytes() || blocks != int64(len(m.Files)*len(m.Blocks)) {
		t.Errorf("source counted %d blocks %d bytes; want every block once, %d bytes", blocks, bytes, m.CompressedBytes())
	}
	if s.BytesFetched > m.CompressedBytes()+8192 {
		t.Errorf("depot fetched %d bytes for a container of %d", s.BytesFetched, m.CompressedBytes())
	}
	// Unpinned by both, the container is evicted (the limit is 1 byte).
	deadline = time.Now().Add(10 * time.Second)
	for d.Stats().Containers != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := d.Stats(); s.Containers != 0 || s.Evictions != 1 {
		t.Errorf("after release: %+v, want the container evicted", s)
	}
}

// A file a crash left damaged in the depot (the depot does not sync what
// it fetches) is found before it is read, removed and fetched again.
func TestDamagedFileAtOpenFetchedAgain(t *testing.T) {
	st, ms := bucket(t, 1)
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, src)
	release()
	d.Close()
	// Damage column 1 in place, keeping its size.
	fm := m.Files[1]
	flipHeld(t, filepath.Join(dir, "t", "p", m.ID), fm.Name, fm.Blocks[0].Offset+5)
	d2, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	src2, release2, err := d2.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, bytes := readAll(t, src2); bytes != fm.Size {
		t.Errorf("reopened depot fetched %d bytes, want the damaged file's %d", bytes, fm.Size)
	}
	if err := depot.Verify(src2.String()); err != nil {
		t.Errorf("depot's copy after the refetch: %v", err)
	}
}

// TestAcquireAll: the containers of a job are acquired at once, not one
// after another (a cold Acquire waits on its commit, a round trip),
// their Sources in the order asked; one container missing fails the call
// and releases the others.
func TestAcquireAll(t *testing.T) {
	st, ms := bucket(t, 8)
	barrier := &commitBarrier{Store: st, want: 4}
	d, err := depot.Open(t.TempDir(), barrier, depot.Options{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	refs := make([]depot.Ref, len(ms))
	for i, m := range ms {
		refs[i] = depot.Ref{Table: "t", Projection: "p", ID: m.ID}
	}
	srcs, release, err := d.AcquireAll(t.Context(), refs)
	if err != nil {
		t.Fatal(err)
	}
	if m := barrier.max.Load(); m < barrier.want {
		t.Errorf("%d commits read at once at most; want the acquires to run together (%d at least)", m, barrier.want)
	}
	for i, src := range srcs {
		m, err := columnar.ReadSourceManifest(src)
		if err != nil || m.ID != ms[i].ID {
			t.Errorf("source %d: %v, %v; want container %s", i, m, err, ms[i].ID)
		}
	}
	release()
	release() // a second call is harmless
	if n := d.Stats().Containers; n != 0 {
		t.Errorf("%d containers held after release with a limit of 1 byte; want all evicted", n)
	}

	barrier.want = 0
	bad := append(refs[:5:5], depot.Ref{Table: "t", Projection: "p", ID: "c9999"})
	bad = append(bad, refs[5:]...)
	if _, _, err := d.AcquireAll(t.Context(), bad); !errors.Is(err, columnar.ErrNotFound) {
		t.Errorf("a missing container: %v, want ErrNotFound", err)
	}
	if n := d.Stats().Containers; n != 0 {
		t.Errorf("%d containers held after a failed AcquireAll; want those acquired released", n)
	}
}

// commitBarrier holds each read of a commit until want of them are open
// at once (or a second has passed), and records the most open at once.
type commitBarrier struct {
	store.Store
	want      int64
	open, max atomic.Int64
}

func (b *commitBarrier) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if filepath.Base(key) == store.CommitName {
		now := b.open.Add(1)
		defer b.open.Add(-1)
		for {
			m := b.max.Load()
			if now <= m || b.max.CompareAndSwap(m, now) {
				break
			}
		}
		for deadline := time.Now().Add(time.Second); b.open.Load() < b.want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	return b.Store.NewRangeReader(ctx, key, off, n)
}
