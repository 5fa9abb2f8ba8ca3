package depot_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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

// openDepot opens a depot over st, closed when the test ends.
func openDepot(t *testing.T, st store.Store, opts depot.Options) *depot.Depot {
	t.Helper()
	d, err := depot.Open(t.TempDir(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// acquire acquires container id of t.p from d, released when the test
// ends (before d is closed).
func acquire(t *testing.T, d *depot.Depot, id string) columnar.Source {
	t.Helper()
	src, release, err := d.Acquire(t.Context(), "t", "p", id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return src
}

// acquired opens a depot over st and acquires container id of t.p from it.
func acquired(t *testing.T, st store.Store, opts depot.Options, id string) (*depot.Depot, columnar.Source) {
	t.Helper()
	d := openDepot(t, st, opts)
	return d, acquire(t, d, id)
}

// wideBucket returns an S3 store holding n generated containers of t.p of
// cols columns, their manifests and the local directory they were
// generated in.
func wideBucket(t *testing.T, n, cols int) (store.Store, []*columnar.Manifest, string) {
	t.Helper()
	st := s3test.Start(t, "strata").Store(t)
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: cols, Containers: n, RowsPerContainer: 2000, BlockRows: 500, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local, "t", "p", m.ID), "t", "p", m.ID); err != nil {
			t.Fatal(err)
		}
	}
	return st, ms, local
}

// byteCountingStore counts the ranged reads made and the bytes they
// returned.
type byteCountingStore struct {
	store.Store
	reads, bytes atomic.Int64
}

func (c *byteCountingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.reads.Add(1)
	r, err := c.Store.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: r, n: &c.bytes}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// logRecorder keeps the messages and attributes of the records logged.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A cold read of containers creates one file for each, its pack: the
// manifest and every column file fetched go into it, with nothing left
// beside it.
func TestColdContainerOneFile(t *testing.T) {
	st, ms, _ := wideBucket(t, 3, 20)
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var want int64
	for _, m := range ms {
		src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
		if err != nil {
			t.Fatal(err)
		}
		d.Prefetch(t.Context(), src)
		readAll(t, src)
		release()
		want += m.CompressedBytes()
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.Stats().FilesFetched < int64(len(ms)*20) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s := d.Stats()
	if s.FilesCreated != int64(len(ms)) {
		t.Errorf("%d files created for %d containers read cold, want one each", s.FilesCreated, len(ms))
	}
	if s.FilesFetched != int64(len(ms)*20) || s.BytesFetched < want {
		t.Errorf("stats %+v: want every column file fetched", s)
	}
	for _, m := range ms {
		cdir := filepath.Join(dir, "t", "p", m.ID)
		ents, err := os.ReadDir(cdir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != "depot.pack" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("container %s holds %v, want its pack alone", m.ID, names)
		}
		if err := depot.Verify(cdir); err != nil {
			t.Errorf("container %s: %v", m.ID, err)
		}
	}
}

// A reader of 2 of 40 columns (a windower's) fetches those columns'
// bytes and no others.
func TestSomeColumnsFetchOnlyTheirs(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 40)
	m := ms[0]
	counting := &byteCountingStore{Store: st}
	d, src := acquired(t, counting, depot.Options{}, m.ID)
	manifestBytes := counting.bytes.Load() // the commit and the manifest
	cols := []int{3, 27}
	var want int64
	for _, col := range cols {
		if err := readColumn(src, col); err != nil {
			t.Fatal(err)
		}
		want += m.Files[col].Size
	}
	if got := counting.bytes.Load() - manifestBytes; got != want {
		t.Errorf("reading columns %v fetched %d bytes from the store, want their %d", cols, got, want)
	}
	if _, got := columnar.Fetched([]columnar.Source{src}); got != want {
		t.Errorf("the source counted %d bytes fetched, want %d", got, want)
	}
	if got := d.Stats().FilesFetched; got != int64(len(cols)) {
		t.Errorf("%d column files fetched, want %d", got, len(cols))
	}
	for i := range m.Files {
		if held := depot.Holds(src.String(), m.Files[i].Name); held != (i == cols[0] || i == cols[1]) {
			t.Errorf("column %d held %v", i, held)
		}
	}
}

// A pack with a byte flipped, or cut short, is found when the damaged
// range is read: the warning names the container, the column file and
// the block, the column file is fetched again (one request) and read
// right.
func TestPackDamageNamed(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 4)
	m := ms[0]
	logs := &logRecorder{}
	counting := &byteCountingStore{Store: st}
	d, src := acquired(t, counting, depot.Options{Logger: slog.New(logs)}, m.ID)
	readAll(t, src)
	dir := src.String()
	container := "t/p/" + m.ID

	fm := m.Files[1]
	flipHeld(t, dir, fm.Name, fm.Blocks[2].Offset+7)
	before := counting.reads.Load()
	if err := readColumn(src, 1); err != nil {
		t.Fatalf("flipped byte: %v", err)
	}
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("the flipped column took %d requests, want 1", got)
	}
	if log := logs.text(); !strings.Contains(log, container) || !strings.Contains(log, fm.Name) || !strings.Contains(log, "block 2 checksum") {
		t.Errorf("warning for a flipped byte does not name container %s, %s, block 2:\n%s", container, fm.Name, log)
	}

	// Cut short in the last column's block 3.
	last := m.Files[len(m.Files)-1]
	cutHeld(t, dir, last.Name, last.Blocks[3].Offset+10)
	before = counting.reads.Load()
	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenColumn(len(m.Files) - 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := readBlocks(r, 0); err != nil {
		t.Fatalf("pack cut short: %v", err)
	}
	r.Close()
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("the cut column took %d requests, want 1", got)
	}
	if log := logs.text(); !strings.Contains(log, last.Name) || !strings.Contains(log, "pack cut short") {
		t.Errorf("warning for a cut pack does not say so:\n%s", log)
	}
	if err := depot.Verify(dir); err != nil {
		t.Errorf("depot's copy: %v", err)
	}
	if s := d.Stats(); s.Damaged != 2 || s.FilesCreated != 1 {
		t.Errorf("stats %+v: want 2 column files found damaged, one file created", s)
	}
}

// A pack whose header a crash cut short is not a container: a reopened
// depot fetches the container again.
func TestPackHeaderCutRefetched(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 3)
	m := ms[0]
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, src)
	release()
	d.Close()
	if err := os.Truncate(filepath.Join(dir, "t", "p", m.ID, "depot.pack"), 30); err != nil {
		t.Fatal(err)
	}
	d2, err := depot.Open(dir, st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if s := d2.Stats(); s.Containers != 0 {
		t.Errorf("a pack with its header cut taken in: %+v", s)
	}
	src2, release2, err := d2.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	if _, n := readAll(t, src2); n != m.CompressedBytes() {
		t.Errorf("fetched %d bytes, want the container's %d", n, m.CompressedBytes())
	}
	if err := depot.Verify(src2.String()); err != nil {
		t.Error(err)
	}
}

// A depot of the first layout (a directory per container with its
// manifest.json and column files, fills beside them) opens and is read:
// the files it holds from disk, a file it lacks fetched beside them as
// before, one a crash left damaged fetched again.
func TestOldLayoutDepotRead(t *testing.T) {
	st, ms, local := wideBucket(t, 2, 5)
	dir := t.TempDir()
	for _, m := range ms {
		copyContainer(t, columnar.ContainerDir(local, "t", "p", m.ID), filepath.Join(dir, "t", "p", m.ID), m.ID)
	}
	a, b := ms[0], ms[1]
	adir := filepath.Join(dir, "t", "p", a.ID)
	// Container a lacks column 2 and has a fill a crash left; column 4 is
	// damaged.
	if err := os.Remove(filepath.Join(adir, a.Files[2].Name)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(adir, "."+a.Files[2].Name+".fill-123"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	flip(t, filepath.Join(adir, a.Files[4].Name), a.Files[4].Blocks[0].Offset+3)

	counting := &byteCountingStore{Store: st}
	d, err := depot.Open(dir, counting, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s := d.Stats(); s.Containers != 2 || s.Bytes != a.CompressedBytes()-a.Files[2].Size+b.CompressedBytes()+2*4096 {
		t.Errorf("old layout taken in: %+v", s)
	}
	src, release, err := d.Acquire(t.Context(), "t", "p", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, n := readAll(t, src); n != a.Files[2].Size+a.Files[4].Size {
		t.Errorf("old-layout container fetched %d bytes, want the missing and the damaged files' %d", n, a.Files[2].Size+a.Files[4].Size)
	}
	release()
	if err := columnar.Verify(adir); err != nil {
		t.Errorf("old-layout container after the read: %v", err)
	}
	if _, err := os.Stat(filepath.Join(adir, "depot.pack")); !os.IsNotExist(err) {
		t.Errorf("an old-layout container got a pack: %v", err)
	}
	before := counting.reads.Load()
	src, release, err = d.Acquire(t.Context(), "t", "p", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	readAll(t, src)
	if got := counting.reads.Load() - before; got != 0 {
		t.Errorf("an old-layout container held whole took %d requests", got)
	}
	if s := d.Stats(); s.Damaged != 1 || s.Misses != 0 {
		t.Errorf("stats %+v: want one damaged file, no manifest fetched", s)
	}
}

// Prefetch of many containers keeps at most Options.Fetchers requests in
// flight.
func TestPrefetchBounded(t *testing.T) {
	st, ms, _ := wideBucket(t, 4, 10)
	gate := &gatingStore{Store: st}
	d := openDepot(t, gate, depot.Options{Fetchers: 3})
	var total int64
	var srcs []columnar.Source
	for _, m := range ms {
		srcs = append(srcs, acquire(t, d, m.ID))
		total += int64(len(m.Files))
	}
	for _, src := range srcs {
		d.Prefetch(t.Context(), src)
	}
	deadline := time.Now().Add(20 * time.Second)
	for d.Stats().FilesFetched < total && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := d.Stats().FilesFetched; got != total {
		t.Fatalf("prefetched %d of %d column files", got, total)
	}
	if m := gate.max.Load(); m > 3 || m < 2 {
		t.Errorf("%d requests in flight at most, want up to 3 (and more than one)", m)
	}
}

// gatingStore records the most ranged reads open at once, each held open
// a little.
type gatingStore struct {
	store.Store
	open, max atomic.Int64
}

func (g *gatingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	now := g.open.Add(1)
	for {
		m := g.max.Load()
		if now <= m || g.max.CompareAndSwap(m, now) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond)
	r, err := g.Store.NewRangeReader(ctx, key, off, n)
	if err != nil {
		g.open.Add(-1)
		return nil, err
	}
	data, err := io.ReadAll(r)
	r.Close()
	g.open.Add(-1)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}
