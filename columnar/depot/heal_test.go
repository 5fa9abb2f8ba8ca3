package depot_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
)

// warm returns a depot over a counting store holding every file of the
// one container of the store, and that container's manifest.
func warm(t *testing.T, st store.Store, m *columnar.Manifest) (*depot.Depot, *countingStore) {
	t.Helper()
	counting := &countingStore{Store: st}
	d, err := depot.Open(t.TempDir(), counting, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, src)
	release()
	if s := d.Stats(); s.FilesFetched != int64(len(m.Files)) {
		t.Fatalf("warming: %+v, want every file kept", s)
	}
	return d, counting
}

// flip changes the byte at off of the file at path in place: what a bad
// disk or a stray write does to a file the depot holds.
func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// flipHeld flips the byte at off of column file name where the depot's
// container directory dir holds it (its pack, or the file).
func flipHeld(t *testing.T, dir, name string, off int64) {
	t.Helper()
	path, base, err := depot.HeldAt(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	flip(t, path, base+off)
}

// cutHeld cuts the file holding column file name of the depot's container
// directory dir at offset n of the column file: a pack loses what
// follows too.
func cutHeld(t *testing.T, dir, name string, n int64) {
	t.Helper()
	path, base, err := depot.HeldAt(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, base+n); err != nil {
		t.Fatal(err)
	}
}

// readColumn opens column col of src and reads every block of it.
func readColumn(src columnar.Source, col int) error {
	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		return err
	}
	r, err := c.OpenColumn(col)
	if err != nil {
		return err
	}
	defer r.Close()
	return readBlocks(r, 0)
}

// readBlocks reads the blocks of r from block from on.
func readBlocks(r *columnar.ColumnReader, from int) error {
	for b := from; b < r.NumBlocks(); b++ {
		a, err := r.ReadBlock(b)
		if err != nil {
			return err
		}
		a.Release()
	}
	return nil
}

// A file the depot holds damaged while the worker runs (a byte of a block
// flipped, a byte of its header flipped) is dropped and fetched again the
// first time it is read, and the read gets the right data: readers that
// had it open before the damage too, with one request to the store for
// the file however many readers find the damage.
func TestDamagedFileFetchedAgain(t *testing.T) {
	st, ms := bucket(t, 1)
	m := ms[0]
	d, counting := warm(t, st, m)
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	dir := src.String()

	// Two readers of column 1 open before the damage.
	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := c.OpenColumn(1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.OpenColumn(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*columnar.ColumnReader{r1, r2} {
		if err := readBlocks(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	fm1 := m.Files[1]
	flipHeld(t, dir, fm1.Name, fm1.Blocks[1].Offset+5)
	before, stats := counting.reads.Load(), d.Stats()
	if err := readBlocks(r1, 1); err != nil {
		t.Fatalf("reader open before the damage: %v", err)
	}
	if err := readBlocks(r2, 1); err != nil {
		t.Fatalf("second reader open before the damage: %v", err)
	}
	r1.Close()
	r2.Close()
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("the damaged file took %d requests, want 1", got)
	}
	after := d.Stats()
	if after.FilesFetched != stats.FilesFetched+1 || after.Damaged != stats.Damaged+1 || after.Bytes != stats.Bytes {
		t.Errorf("after the refetch: %+v; before %+v: want one file found damaged and fetched again, as many bytes held", after, stats)
	}
	if _, bytes := columnar.Fetched([]columnar.Source{src}); bytes != fm1.Size {
		t.Errorf("the job's source counted %d bytes fetched, want the file's %d", bytes, fm1.Size)
	}

	// A header damaged: found when a reader opens the file.
	fm2 := m.Files[2]
	flipHeld(t, dir, fm2.Name, 2)
	before = counting.reads.Load()
	if err := readColumn(src, 2); err != nil {
		t.Fatalf("damaged header: %v", err)
	}
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("the file with a damaged header took %d requests, want 1", got)
	}

	// Every file is whole again, the others not fetched again.
	if err := depot.Verify(dir); err != nil {
		t.Errorf("depot's copy: %v", err)
	}
	before = counting.reads.Load()
	readAll(t, src)
	if got := counting.reads.Load() - before; got != 0 {
		t.Errorf("reading it all again took %d requests", got)
	}
}

// A file cut short on disk, before a reader opens it or under an open
// reader, is fetched again.
func TestCutFileFetchedAgain(t *testing.T) {
	st, ms := bucket(t, 1)
	m := ms[0]
	d, counting := warm(t, st, m)
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	dir := src.String()

	fm0 := m.Files[0]
	cutHeld(t, dir, fm0.Name, fm0.Size/2)
	before := counting.reads.Load()
	if err := readColumn(src, 0); err != nil {
		t.Fatalf("file cut before it was opened: %v", err)
	}
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("the cut file took %d requests, want 1", got)
	}

	c, err := columnar.OpenSource(src, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenColumn(2)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	fm2 := m.Files[2]
	cutHeld(t, dir, fm2.Name, fm2.Blocks[1].Offset+3)
	before = counting.reads.Load()
	if err := readBlocks(r, 1); err != nil {
		t.Fatalf("file cut under an open reader: %v", err)
	}
	r.Close()
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("the file cut under a reader took %d requests, want 1", got)
	}
	// Cutting the pack in column 0 cut the columns after it too: column
	// 1, not read since, is fetched again when it is.
	if err := readColumn(src, 1); err != nil {
		t.Fatal(err)
	}
	if err := depot.Verify(dir); err != nil {
		t.Errorf("depot's copy: %v", err)
	}
	if s := d.Stats(); s.FilesFetched != int64(len(m.Files))+3 {
		t.Errorf("stats %+v: want the three cut files fetched again", s)
	}
}

// A damaged file whose copy in the store is damaged too is a corrupt
// container error naming the container, the file and the block; the bad
// copy is not kept, and once the store has it right it is fetched again.
func TestDamagedInStoreToo(t *testing.T) {
	st, ms := bucket(t, 1)
	m := ms[0]
	fm := m.Files[1]
	bad := &damagingStore{Store: st}
	d, counting := warm(t, bad, m)
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	dir := src.String()
	off := fm.Blocks[0].Offset + 5
	flipHeld(t, dir, fm.Name, off)
	// The store holds the container as a pack: the file's byte is at the
	// file's offset in it.
	c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, base := c.File(1)
	bad.set(store.PackName, base+off)

	before := counting.reads.Load()
	err = readColumn(src, 1)
	var ce *columnar.CorruptError
	if !errors.As(err, &ce) || ce.Container != dir || ce.File != fm.Name || ce.Block != 0 {
		t.Fatalf("damaged here and in the store: %v; want a CorruptError naming %s, %s, block 0", err, dir, fm.Name)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "again") {
		t.Errorf("the error does not say the file was fetched again: %v", err)
	}
	if got := counting.reads.Load() - before; got != 1 {
		t.Errorf("%d requests, want the file fetched once more", got)
	}
	if depot.Holds(dir, fm.Name) {
		t.Errorf("a bad copy is held in the depot")
	}
	if s := d.Stats(); s.Damaged != 1 || s.FilesFetched != int64(len(m.Files)) || s.Bytes != m.CompressedBytes()-fm.Size+4096 {
		t.Errorf("stats %+v: want the damaged file dropped, no bad copy kept", s)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("fills left behind: %v", left)
	}
	// The other files are still held and right.
	before = counting.reads.Load()
	for _, col := range []int{0, 2} {
		if err := readColumn(src, col); err != nil {
			t.Errorf("column %d: %v", col, err)
		}
	}
	if got := counting.reads.Load() - before; got != 0 {
		t.Errorf("the other files took %d requests", got)
	}

	bad.set("", 0)
	if err := readColumn(src, 1); err != nil {
		t.Fatalf("store right again: %v", err)
	}
	if err := depot.Verify(dir); err != nil {
		t.Errorf("depot's copy: %v", err)
	}
}

// damagingStore flips the byte at off of the object whose key ends in
// /name (a container's pack) in what its ranged reads return.
type damagingStore struct {
	store.Store
	name atomic.Pointer[string]
	off  atomic.Int64
}

func (s *damagingStore) set(name string, off int64) {
	s.off.Store(off)
	s.name.Store(&name)
}

func (s *damagingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := s.Store.NewRangeReader(ctx, key, off, n)
	name := s.name.Load()
	if err != nil || name == nil || *name == "" || !strings.HasSuffix(key, "/"+*name) {
		return r, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if at := s.off.Load() - off; at >= 0 && at < int64(len(data)) {
		data[at] ^= 0x55
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Readers finding the same damage at once fetch the file again once,
// segment by segment, and all read the right data.
func TestDamagedFileConcurrentReaders(t *testing.T) {
	defer depot.SetSegmentBytes(1)() // a segment per block: readers share the fill's segments
	st, ms := bucket(t, 1)
	m := ms[0]
	d, _ := warm(t, st, m)
	src, release, err := d.Acquire(t.Context(), "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	fm := m.Files[1]
	flipHeld(t, src.String(), fm.Name, fm.Blocks[1].Offset+5)
	before := d.Stats()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = readColumn(src, 1) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("reader %d: %v", i, err)
		}
	}
	after := d.Stats()
	if got := after.BytesFetched - before.BytesFetched; got != fm.Size {
		t.Errorf("%d readers of a damaged file fetched %d bytes, want the file's %d once", n, got, fm.Size)
	}
	if after.Damaged != before.Damaged+1 || after.FilesFetched != before.FilesFetched+1 {
		t.Errorf("stats %+v, before %+v: want one file dropped and fetched", after, before)
	}
	if err := depot.Verify(src.String()); err != nil {
		t.Errorf("depot's copy: %v", err)
	}
}
