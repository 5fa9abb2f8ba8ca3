package depot_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
)

// A reader of a segment's first block goes on as soon as that block has
// streamed in, not once the segment is whole, whether the request is a
// prefetch's or one the reader started itself; a request the reader
// started goes on behind it, and the file is kept whole once it ends.
func TestSegmentReadableAsItStreams(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 3)
	m := ms[0]
	const col = 1
	fm := m.Files[col]
	if len(fm.Blocks) < 2 {
		t.Fatalf("%d blocks in %s, want several in its one segment", len(fm.Blocks), fm.Name)
	}
	c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, base := c.File(col)
	first := fm.Blocks[0].Offset + fm.Blocks[0].Length // the header and the first block
	for _, prefetch := range []bool{true, false} {
		t.Run(fmt.Sprintf("prefetch=%v", prefetch), func(t *testing.T) {
			defer depot.SetRunBytes(1)() // the file a request of its own, at base
			stall := &stallingStore{Store: st, from: base, after: first, release: make(chan struct{})}
			defer stall.open()
			d, src := acquired(t, stall, depot.Options{}, m.ID)
			if prefetch {
				d.PrefetchColumns(t.Context(), src, []string{fm.Column})
				stall.waitRequested(t)
			}
			f, err := src.OpenFile(fm.Name, fm.Size)
			if err != nil {
				t.Fatal(err)
			}
			readFirst(t, f, first, "the first block was not readable until its whole segment was in")
			// The rest comes once the store goes on; reading it waits
			// for the request under way rather than making another.
			stall.open()
			if _, err := f.ReadAt(make([]byte, fm.Size-first), first); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if n := stall.requests.Load(); n != 1 {
				t.Errorf("%d requests of the file, want 1", n)
			}
			waitFetched(t, d, 1)
			if !depot.Holds(src.String(), fm.Name) {
				t.Errorf("the file is not held once its request ended")
			}
			if err := readColumn(src, col); err != nil {
				t.Error(err)
			}
			if n := stall.requests.Load(); n != 1 {
				t.Errorf("%d requests of the file after reading it again, want 1", n)
			}
		})
	}
}

// PrefetchColumns, for a reader of the columns side by side, queues its
// requests by the rows they hold: the first segment of every column
// before the second of any. Prefetch, for a mergeout, queues them by
// column.
func TestPrefetchColumnsByRow(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 4)
	m := ms[0]
	defer depot.SetSegmentBytes(1)() // a segment a block
	defer depot.SetRunBytes(1)()     // a file a request
	c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	cols := []int{1, 2, 3}
	var names []string
	for _, i := range cols {
		names = append(names, m.Files[i].Column)
	}
	// at says which column file of cols and block a request at off
	// begins with (the first segment, the file's header, counts as block
	// 0); file -1 if none.
	at := func(off int64) (file, block int) {
		for _, i := range cols {
			_, base := c.File(i)
			for b, bm := range m.Files[i].Blocks {
				if off == base+bm.Offset || b == 0 && off == base {
					return i, b
				}
			}
		}
		return -1, 0
	}
	for _, byRow := range []bool{true, false} {
		t.Run(fmt.Sprintf("byRow=%v", byRow), func(t *testing.T) {
			rec := &orderStore{Store: st, hold: make(chan struct{})}
			d, src := acquired(t, rec, depot.Options{Fetchers: 1}, m.ID)
			rec.record.Store(true)
			if byRow {
				d.PrefetchColumns(t.Context(), src, names)
			} else {
				d.Prefetch(t.Context(), src)
			}
			close(rec.hold)
			want := int64(len(cols))
			if !byRow {
				want = int64(len(m.Files))
			}
			waitFetched(t, d, want)
			rec.mu.Lock()
			reads := slices.Clone(rec.reads)
			rec.mu.Unlock()
			var order [][2]int // (block, file) of each request of the columns
			for _, r := range reads {
				if r.key != c.Pack {
					continue
				}
				if f, b := at(r.off); f >= 0 {
					order = append(order, [2]int{b, f})
				}
			}
			for _, i := range cols {
				for b := range m.Files[i].Blocks {
					if !slices.Contains(order, [2]int{b, i}) {
						t.Fatalf("no request of block %d of column file %d: %v", b, i, order)
					}
				}
			}
			sortedBy := func(less func(a, b [2]int) int) bool { return slices.IsSortedFunc(order, less) }
			byBlock := func(a, b [2]int) int { return a[0]*100 + a[1] - (b[0]*100 + b[1]) }
			byFile := func(a, b [2]int) int { return a[1]*100 + a[0] - (b[1]*100 + b[0]) }
			if byRow && !sortedBy(byBlock) {
				t.Errorf("requests (block, file) %v: want block 0 of every column, then block 1, ...", order)
			}
			if !byRow && !sortedBy(byFile) {
				t.Errorf("requests (block, file) %v: want each column's blocks, a column after another", order)
			}
			for _, i := range cols {
				if !depot.Holds(src.String(), m.Files[i].Name) {
					t.Errorf("%s not held", m.Files[i].Name)
				}
			}
		})
	}
}

// A file fetched in segments by several requests is checked whole, its
// segments' CRC-32Cs combined: a byte damaged in the store where no
// reader's block check looks (the file's footer) keeps the file from
// being held.
func TestSegmentsCheckedWhole(t *testing.T) {
	st, ms, _ := wideBucket(t, 1, 3)
	m := ms[0]
	const col = 1
	fm := m.Files[col]
	defer depot.SetSegmentBytes(1)() // a segment a block
	last := fm.Blocks[len(fm.Blocks)-1]
	footer := last.Offset + last.Length
	if footer >= fm.Size {
		t.Fatalf("%s has no bytes after its last block", fm.Name)
	}
	c, err := store.Resolve(t.Context(), st, "t", "p", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, base := c.File(col)
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged=%v", damaged), func(t *testing.T) {
			bad := &damagingStore{Store: st}
			if damaged {
				bad.set(store.PackName, base+footer)
			}
			_, src := acquired(t, bad, depot.Options{}, m.ID)
			f, err := src.OpenFile(fm.Name, fm.Size)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(make([]byte, fm.Size), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got := depot.Holds(src.String(), fm.Name); got == damaged {
				t.Errorf("held %v, want %v", got, !damaged)
			}
			if !damaged {
				if err := readColumn(src, col); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
