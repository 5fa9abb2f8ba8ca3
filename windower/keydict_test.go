package windower

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower/sqlparse"
)

// labelTable makes n rows of id, s (labels of every length, the empty
// string and NULL among them, columnar.GenLabels) and x (NULL on a tenth),
// ids from first.
func labelTable(rng *rand.Rand, n, first int) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	s, null := columnar.GenLabels(n, rng)
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(first + i))
		if null[i] {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(s[i])
		}
		if rng.IntN(10) == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(int64(rng.IntN(1000)) - 500)
		}
	}
	return b.NewRecordBatch()
}

// TestKeyDictionaries: a lone string partition key read through a block
// cache is numbered from each container's dictionary, which the first
// query makes and leaves in the cache and the next ones take from it.
// Every run, on one to three threads, over one container and several,
// gives the rows the run without a cache gives; a container made again
// under the same name is not answered with the old one's dictionary; and
// a WHERE, whose kept rows are a copy, is numbered by hashing as before.
func TestKeyDictionaries(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	root := t.TempDir()
	var dirs []string
	for k := range 3 {
		rec := labelTable(rng, 20000+k*7000, k*100000)
		dirs = append(dirs, writeContainer(t, filepath.Join(root, fmt.Sprintf("c%d", k)), rec, nil))
		rec.Release()
	}
	ctx := context.Background()
	run := func(sql string, dirs []string, o Options) []string {
		t.Helper()
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		o.TempDir = t.TempDir()
		res, err := Run(ctx, q, dirs, o)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		return drain(t, res)
	}
	const byS = "SELECT id, s, count(*) OVER (PARTITION BY s) AS n, sum(x) OVER (PARTITION BY s) AS sx, " +
		"min(id) OVER (PARTITION BY s) AS m, count(x) OVER (PARTITION BY s) AS nx FROM t"
	cached := func(cache *columnar.BlockCache, dirs []string) int {
		t.Helper()
		n := 0
		for _, dir := range dirs {
			c, err := columnar.Open(dir, columnar.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := cache.ColumnValue(c.Dir(), &c.Manifest().Files[1], keyDictName).(*keyDict); ok {
				if len(d.codes) != int(c.Manifest().Rows) {
					t.Errorf("%s: a dictionary of %d rows, the container has %d", dir, len(d.codes), c.Manifest().Rows)
				}
				n++
			}
			c.Close()
		}
		return n
	}
	for _, set := range [][]string{dirs[:1], dirs} {
		want := run(byS, set, Options{})
		checkCounts(t, want)
		cache := columnar.NewBlockCache(256 << 20)
		for i, threads := range []int{1, 1, 2, 3} {
			if got := run(byS, set, Options{Threads: threads, BlockCache: cache}); !slices.Equal(got, want) {
				t.Fatalf("%d containers, run %d on %d threads through the cache differs from the run without it", len(set), i, threads)
			}
			if n := cached(cache, set); n != len(set) {
				t.Fatalf("%d containers, after run %d: %d dictionaries cached", len(set), i, n)
			}
		}
		const where = "SELECT id, s, count(*) OVER (PARTITION BY s) AS n FROM t WHERE x > 0"
		if got, want := run(where, set, Options{BlockCache: cache}), run(where, set, Options{}); !slices.Equal(got, want) {
			t.Fatalf("%d containers, WHERE through the cache differs from the run without it", len(set))
		}
	}

	// A cache that admits the run but could not keep the dictionary: the
	// query hashes its rows, and makes no dictionary.
	c0, err := columnar.Open(dirs[0], columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var raw int64
	for _, b := range c0.Manifest().Files[1].Blocks {
		raw += b.RawBytes
	}
	c0.Close()
	small := columnar.NewBlockCache(2 * raw)
	const onlyS = "SELECT s, count(*) OVER (PARTITION BY s) AS n FROM t"
	if got, want := run(onlyS, dirs[:1], Options{BlockCache: small}), run(onlyS, dirs[:1], Options{}); !slices.Equal(got, want) {
		t.Fatal("through a small cache, the run differs from the run without it")
	}
	if n, s := cached(small, dirs[:1]), small.Stats(); n != 0 || s.Blocks == 0 {
		t.Fatalf("a cache of %d bytes holds %d dictionaries and %d blocks; want none and the blocks", 2*raw, n, s.Blocks)
	}

	// The second container made again under its name, with as many rows
	// but others: its file's checksum is another, so its dictionary is
	// made anew.
	cache := columnar.NewBlockCache(256 << 20)
	run(byS, dirs, Options{BlockCache: cache})
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	rec := labelTable(rand.New(rand.NewPCG(99, 100)), 27000, 500000)
	writeContainer(t, dirs[1], rec, nil)
	rec.Release()
	want := run(byS, dirs, Options{})
	if got := run(byS, dirs, Options{BlockCache: cache}); !slices.Equal(got, want) {
		t.Fatal("after the container was made again, the run through the cache differs from the run without it")
	}
}

// checkCounts checks rows of (id, s, n, ...): n is the number of rows
// with the row's s, NULLs together.
func checkCounts(t *testing.T, rows []string) {
	t.Helper()
	count := map[string]int{}
	for _, r := range rows {
		count[strings.Split(r, "|")[1]]++
	}
	if len(count) < 100 {
		t.Fatalf("%d distinct keys: too few to test", len(count))
	}
	for _, r := range rows {
		f := strings.Split(r, "|")
		if want := fmt.Sprint(count[f[1]]); f[2] != want {
			t.Fatalf("row %s: count %s, want %s", r, f[2], want)
		}
	}
}
