package windower

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/messages"
)

// A query over containers read from an S3 bucket by ranges gives the
// result it gives over the same containers on disk, in memory and
// spilling, fetches each block of the columns it reads once, and keeps
// within its grant.
func TestRunFromStore(t *testing.T) {
	st := s3test.Start(t, "strata").Store(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var dirs []string
	for i := range 3 {
		_, rec := randomTable(rng, 30000)
		dirs = append(dirs, writeContainer(t, filepath.Join(t.TempDir(), "c"+string(rune('0'+i))), rec, nil))
		rec.Release()
	}
	var blocksPerColumn int64
	for _, d := range dirs {
		m, err := store.Upload(t.Context(), st, d, "t", "p", filepath.Base(d))
		if err != nil {
			t.Fatal(err)
		}
		blocksPerColumn += int64(len(m.Blocks))
	}
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "fv", Window: &messages.WindowCall{Func: "first_value", Args: []*messages.Expr{col("s")},
			PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
			OrderBy:     []messages.SortItem{{Expr: messages.Expr{Column: "f"}, NullsFirst: true}}}},
		{Alias: "lag", Window: &messages.WindowCall{Func: "lag", Args: []*messages.Expr{col("s"), cint(3)}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}}}},
	}}
	const columnsRead = 3 // id, s, f
	for _, grant := range []int64{MinGrant, 256 << 20} {
		want := func() []string {
			res, err := Run(context.Background(), q, dirs, Options{Grant: grant, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			return drain(t, res)
		}()
		srcs := make([]columnar.Source, len(dirs))
		for i, d := range dirs {
			var err error
			if srcs[i], _, err = store.OpenSource(t.Context(), st, "t", "p", filepath.Base(d)); err != nil {
				t.Fatal(err)
			}
		}
		res, err := RunSources(context.Background(), q, srcs, Options{Grant: grant, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, res)
		stats := res.Stats()
		res.Close()
		if !slices.Equal(got, want) {
			t.Errorf("grant %d: %d rows from the store differ from the %d on disk", grant, len(got), len(want))
		}
		if stats.BlocksFetched != columnsRead*blocksPerColumn {
			t.Errorf("grant %d: fetched %d blocks, want %d (each block of the %d columns read once)", grant, stats.BlocksFetched, columnsRead*blocksPerColumn, columnsRead)
		}
		if stats.PeakBytes > grant {
			t.Errorf("grant %d: peak %d", grant, stats.PeakBytes)
		}
		t.Logf("grant %d: spilled %d, peak %d, fetched %d blocks %d bytes", grant, stats.SpilledBytes, stats.PeakBytes, stats.BlocksFetched, stats.BytesFetched)
	}
}

// rangeRecorder is a store that records every ranged read of it.
type rangeRecorder struct {
	store.Store
	mu       sync.Mutex
	reads    []storeRange
	inFlight int
}

type storeRange struct {
	key      string
	off, len int64
}

func (r *rangeRecorder) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := r.Store.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, storeRange{key, offset, length})
	r.inFlight++
	return &recordedReader{ReadCloser: rc, r: r}, nil
}

// quiet reports whether no read is in flight, and how many were made.
func (r *rangeRecorder) quiet() (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight == 0, len(r.reads)
}

type recordedReader struct {
	io.ReadCloser
	r    *rangeRecorder
	once sync.Once
}

func (rr *recordedReader) Close() error {
	rr.once.Do(func() {
		rr.r.mu.Lock()
		rr.r.inFlight--
		rr.r.mu.Unlock()
	})
	return rr.ReadCloser.Close()
}

// With Options.Prefetch wired to a depot's PrefetchColumns, a query over
// a cold depot asks, for each input, for the columns it reads and no
// others: the depot fetches those columns' files whole, once, and no byte
// of another column's, and the result is the one on disk.
func TestRunPrefetchFromColdDepot(t *testing.T) {
	rec := &rangeRecorder{Store: s3test.Start(t, "strata").Store(t)}
	rng := rand.New(rand.NewPCG(5, 6))
	var dirs []string
	for i := range 3 {
		_, r := randomTable(rng, 20000)
		dirs = append(dirs, writeContainer(t, filepath.Join(t.TempDir(), "c"+string(rune('0'+i))), r, nil))
		r.Release()
	}
	for _, d := range dirs {
		if _, err := store.Upload(t.Context(), rec, d, "t", "p", filepath.Base(d)); err != nil {
			t.Fatal(err)
		}
	}
	// x and t, with f between them in every container (diffSchema).
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "x", Expr: col("x")},
		{Alias: "s", Window: &messages.WindowCall{Func: "sum", Args: []*messages.Expr{col("x")},
			OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "t"}, NullsFirst: true}, {Expr: messages.Expr{Column: "x"}}}}},
	}}
	read := []string{"x", "t"} // in schema order
	want := func() []string {
		res, err := Run(t.Context(), q, dirs, Options{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		return drain(t, res)
	}()
	d, err := depot.Open(t.TempDir(), rec, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srcs := make([]columnar.Source, len(dirs))
	for i, dir := range dirs {
		src, release, err := d.Acquire(t.Context(), "t", "p", filepath.Base(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		srcs[i] = src
	}
	// From here on, the reads of the run and its prefetches (those of
	// Acquire read the pack's first 64KiB for its head, whatever files
	// that covers).
	rec.mu.Lock()
	rec.reads = nil
	rec.mu.Unlock()
	prefetch, stop := context.WithCancel(t.Context())
	defer stop()
	var asked [][]string
	var askedFor []columnar.Source
	res, err := RunSources(t.Context(), q, srcs, Options{TempDir: t.TempDir(), Prefetch: func(src columnar.Source, columns []string) {
		asked = append(asked, slices.Clone(columns))
		askedFor = append(askedFor, src)
		d.PrefetchColumns(prefetch, src, columns)
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, res)
	res.Close()
	if !slices.Equal(got, want) {
		t.Errorf("%d rows through the depot differ from the %d on disk", len(got), len(want))
	}
	if !slices.Equal(askedFor, srcs) {
		t.Errorf("Prefetch called for %d sources, want each of the %d inputs once, in order", len(askedFor), len(srcs))
	}
	for i, cols := range asked {
		if !slices.Equal(cols, read) {
			t.Errorf("Prefetch call %d: columns %q, want %q", i, cols, read)
		}
	}
	// Wait for the prefetches: no read in flight and none started for a
	// while.
	deadline := time.Now().Add(10 * time.Second)
	for last := -1; ; {
		time.Sleep(100 * time.Millisecond)
		idle, n := rec.quiet()
		if idle && n == last {
			break
		}
		last = n
		if time.Now().After(deadline) {
			t.Fatal("the depot's reads did not end")
		}
	}
	// Every byte fetched of a column file is of a column the query reads,
	// and each of their files is fetched whole, once.
	rec.mu.Lock()
	reads := rec.reads
	rec.mu.Unlock()
	var wantBytes, gotBytes int64
	for _, dir := range dirs {
		c, err := store.Resolve(t.Context(), rec, "t", "p", filepath.Base(dir))
		if err != nil {
			t.Fatal(err)
		}
		for i, fm := range c.Manifest.Files {
			key, off := c.File(i)
			var n int64
			for _, r := range reads {
				if r.key != key {
					continue
				}
				end := r.off + r.len
				if r.len < 0 {
					end = math.MaxInt64
				}
				n += max(0, min(end, off+fm.Size)-max(r.off, off))
			}
			if !slices.Contains(read, fm.Column) {
				if n > 0 {
					t.Errorf("%s: fetched %d bytes of column %s, which the query does not read", filepath.Base(dir), n, fm.Column)
				}
				continue
			}
			if n != fm.Size {
				t.Errorf("%s: fetched %d bytes of column %s's file of %d", filepath.Base(dir), n, fm.Column, fm.Size)
			}
			wantBytes += fm.Size
			gotBytes += n
		}
	}
	if s := d.Stats(); s.FilesFetched != int64(len(read)*len(dirs)) {
		t.Errorf("depot fetched %d column files, want %d", s.FilesFetched, len(read)*len(dirs))
	}
	t.Logf("%d ranged reads, %d bytes of the columns read (their files: %d)", len(reads), gotBytes, wantBytes)
}
