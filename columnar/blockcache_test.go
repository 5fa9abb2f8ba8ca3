package columnar

import (
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readAll reads every block of cols of c, as Strings, with cache (nil:
// none), reusing the reader's buffers if reuse. The arrays of each block
// are kept (not stringified) until every block is read, so that an array
// that sliced a reused buffer or a cached array changed under a reader
// would show.
func readAll(t *testing.T, c *Container, cols []int, cache *BlockCache, reuse bool) []string {
	t.Helper()
	br, err := c.OpenColumns(cols)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	br.UseCache(cache)
	if reuse {
		br.ReuseBuffers()
	}
	var out []string
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for j, col := range rec.Columns() {
			out = append(out, rec.ColumnName(j)+":"+col.String())
		}
		rec.Release()
	}
	return out
}

// cacheTestContainer generates one container as opts says, and returns it
// open, its blocks as a plain read gives them (readAll), and its decoded
// bytes.
func cacheTestContainer(t *testing.T, opts GenOptions) (*Container, []string, int64) {
	t.Helper()
	dir := t.TempDir()
	opts.Containers = 1
	ms, err := Generate(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var raw int64
	for _, f := range ms[0].Files {
		for _, b := range f.Blocks {
			raw += b.RawBytes
		}
	}
	return c, readAll(t, c, allColumns(c), nil, false), raw
}

func allColumns(c *Container) []int {
	cols := make([]int, c.Schema().NumFields())
	for i := range cols {
		cols[i] = i
	}
	return cols
}

// A cached read gives the blocks a plain read does, NULLs and strings of
// every column included, compressed or not; the second read takes every
// block from the cache and reads no file's blocks; the budget of the
// reader counts none of the cached arrays.
func TestBlockCacheServesWhatWasRead(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionLZ4, CompressionZstd} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			ms, err := Generate(dir, GenOptions{Columns: 8, Containers: 1, RowsPerContainer: 20000, BlockRows: 700, Seed: 3, Compression: comp, NullFraction: 0.2})
			if err != nil {
				t.Fatal(err)
			}
			var stats IOStats
			budget := NewBudget(1<<30, memory.NewCheckedAllocator(memory.NewGoAllocator()))
			c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{Allocator: budget, Stats: &stats})
			if err != nil {
				t.Fatal(err)
			}
			cols := allColumns(c)
			want := readAll(t, c, cols, nil, false)
			blocks := int64(len(want))
			cache := NewBlockCache(1 << 30)
			for _, reuse := range []bool{true, false} {
				stats.BlocksRead.Store(0)
				stats.BlocksCached.Store(0)
				if got := readAll(t, c, cols, cache, reuse); !slices.Equal(got, want) {
					t.Fatalf("reuse %v: blocks read through the cache differ from a plain read", reuse)
				}
				if held := budget.InUse(); held != 0 {
					t.Fatalf("reuse %v: %d bytes still counted after Close", reuse, held)
				}
				if reuse { // the first read: every block read and kept
					if n := stats.BlocksRead.Load(); n != blocks {
						t.Fatalf("first read: %d blocks read, want %d", n, blocks)
					}
					continue
				}
				if n := stats.BlocksRead.Load(); n != 0 {
					t.Fatalf("second read: %d blocks read from files, want none", n)
				}
				if n := stats.BlocksCached.Load(); n != blocks {
					t.Fatalf("second read: %d blocks from the cache, want %d", n, blocks)
				}
			}
			s := cache.Stats()
			if s.Hits != blocks || s.Misses != blocks || s.Blocks != blocks || s.Evictions != 0 {
				t.Fatalf("cache stats %+v, want %d hits, misses and blocks", s, blocks)
			}
		})
	}
}

// A cache smaller than the column holds no more than its capacity, evicts
// the least recently used, and its reads stay right; an array a reader
// holds stays valid after the cache evicts it.
func TestBlockCacheEvicts(t *testing.T) {
	c, want, raw := cacheTestContainer(t, GenOptions{Columns: 4, RowsPerContainer: 30000, BlockRows: 1000, Seed: 5, NullFraction: 0.1})
	cols := allColumns(c)
	cache := NewBlockCache(raw / 4)
	r, err := c.OpenColumn(1)
	if err != nil {
		t.Fatal(err)
	}
	r.UseCache(cache)
	held, err := r.ReadBlock(0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	first := held.String()
	for round := 0; round < 3; round++ {
		if got := readAll(t, c, cols, cache, round%2 == 0); !slices.Equal(got, want) {
			t.Fatalf("round %d: blocks read through a small cache differ from a plain read", round)
		}
		if s := cache.Stats(); s.Bytes > s.Capacity || s.Evictions == 0 {
			t.Fatalf("round %d: cache stats %+v: want evictions and at most the capacity held", round, s)
		}
	}
	if held.String() != first {
		t.Fatal("an array held across its eviction changed")
	}
	r.Close()
	if !cache.Admits(raw/8) || cache.Admits(raw/4) {
		t.Fatalf("a cache of %d bytes admits reads of %d bytes and not of %d", raw/4, raw/8, raw/4)
	}
	if (*BlockCache)(nil).Admits(0) || NewBlockCache(0) != nil {
		t.Fatal("no cache admits nothing")
	}
}

// A container removed and written again under the same name, with other
// rows, is read as it is now, not as the cache kept it.
func TestBlockCacheContainerReplaced(t *testing.T) {
	dir := t.TempDir()
	gen := func(seed int64) (*Container, []string) {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		ms, err := Generate(dir, GenOptions{Columns: 3, Containers: 1, RowsPerContainer: 5000, BlockRows: 500, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c, readAll(t, c, allColumns(c), nil, false)
	}
	cache := NewBlockCache(1 << 30)
	c1, want1 := gen(1)
	if got := readAll(t, c1, allColumns(c1), cache, true); !slices.Equal(got, want1) {
		t.Fatal("first container read through the cache differs")
	}
	c2, want2 := gen(2)
	if c1.Dir() != c2.Dir() {
		t.Fatalf("the containers are at %s and %s, want the same name", c1.Dir(), c2.Dir())
	}
	if slices.Equal(want1, want2) {
		t.Fatal("the two containers hold the same rows")
	}
	if got := readAll(t, c2, allColumns(c2), cache, true); !slices.Equal(got, want2) {
		t.Fatal("the container written again was read from the cache as the first")
	}
}

// Readers on many goroutines share a cache (run with -race).
func TestBlockCacheConcurrent(t *testing.T) {
	c, want, raw := cacheTestContainer(t, GenOptions{Columns: 4, RowsPerContainer: 20000, BlockRows: 600, Seed: 9, NullFraction: 0.3})
	cols := allColumns(c)
	for _, capacity := range []int64{1 << 30, raw / 3} {
		cache := NewBlockCache(capacity)
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 3; i++ {
					if got := readAll(t, c, cols, cache, (g+i)%2 == 0); !slices.Equal(got, want) {
						t.Errorf("capacity %d, goroutine %d: blocks differ", capacity, g)
						return
					}
				}
			}()
		}
		wg.Wait()
		if s := cache.Stats(); s.Bytes > capacity {
			t.Fatalf("capacity %d: %d bytes held", capacity, s.Bytes)
		}
	}
}

// TestBlockCacheColumnValues: a value derived from a column file is
// served under the file's checksum and size, takes its bytes of the
// capacity in the same LRU order as blocks, and is dropped when another
// file is cached under its name or when it is the least recently used.
func TestBlockCacheColumnValues(t *testing.T) {
	f := &FileMeta{Name: "col-0001.arrow", CRC: 7, Size: 100}
	other := &FileMeta{Name: f.Name, CRC: 8, Size: 100}
	var none *BlockCache
	none.AddColumnValue("c0", f, "v", 1, 10)
	if v := none.ColumnValue("c0", f, "v"); v != nil {
		t.Fatalf("a nil cache holds %v", v)
	}

	c := NewBlockCache(1000)
	c.AddColumnValue("c0", f, "v", "first", 300)
	c.AddColumnValue("c0", f, "w", "another name", 100)
	c.AddColumnValue("c0", f, "big", "more than half the cache", 501)
	if v := c.ColumnValue("c0", f, "v"); v != "first" {
		t.Fatalf("got %v, want the value cached", v)
	}
	if v := c.ColumnValue("c0", f, "w"); v != "another name" {
		t.Fatalf("got %v under the second name", v)
	}
	if v := c.ColumnValue("c0", f, "big"); v != nil {
		t.Fatalf("a value of more than half the cache was kept: %v", v)
	}
	if v := c.ColumnValue("c1", f, "v"); v != nil {
		t.Fatalf("another container's lookup got %v", v)
	}
	if s := c.Stats(); s.Bytes != 400 || s.Blocks != 2 || s.Hits != 0 || s.Misses != 0 {
		t.Fatalf("stats %+v, want 400 bytes in 2 slots, and no block's hit or miss", s)
	}
	// Another file under the same name (a container made again): not
	// served, and dropped.
	if v := c.ColumnValue("c0", other, "v"); v != nil {
		t.Fatalf("a file of another checksum got %v", v)
	}
	if v := c.ColumnValue("c0", f, "v"); v != nil {
		t.Fatalf("the value was kept after another file asked for it: %v", v)
	}
	// Past the capacity the least recently used goes: "w" was used
	// after "x" was cached, so "x" goes first.
	c.AddColumnValue("c0", f, "x", "x", 400)
	c.ColumnValue("c0", f, "w")
	c.AddColumnValue("c0", f, "y", "y", 500) // 1000 bytes: at the capacity, not past it
	if s := c.Stats(); s.Evictions != 0 {
		t.Fatalf("stats %+v: an eviction at the capacity", s)
	}
	c.AddColumnValue("c0", f, "z", "z", 100)
	x, w, y, z := c.ColumnValue("c0", f, "x"), c.ColumnValue("c0", f, "w"), c.ColumnValue("c0", f, "y"), c.ColumnValue("c0", f, "z")
	if x != nil || w != "another name" || y != "y" || z != "z" {
		t.Fatalf("after an eviction: x %v, w %v, y %v, z %v; want x gone", x, w, y, z)
	}
	if s := c.Stats(); s.Bytes != 700 || s.Evictions != 1 {
		t.Fatalf("stats %+v, want 700 bytes after 1 eviction", s)
	}
}
