package columnar

import (
	"context"
	"errors"
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
)

// keyedRow is one row of a keyed test container: its key (an int64 and a
// string part; a key shape uses one or both), version and marker flag.
type keyedRow struct {
	id      int64
	name    string
	version int64
	marker  bool
}

// keyShape is a primary key of the tests: its columns, in the schema
// (id int64, name string, v int64 nullable, then the change columns).
type keyShape struct {
	label string
	pk    []string
}

var keyShapes = []keyShape{
	{"int64", []string{"id"}},
	{"string", []string{"name"}},
	{"int64,string", []string{"name", "id"}},
}

func keyedTestSchema() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}
	return arrow.NewSchema(append(fields, ChangeFields()...), nil)
}

// writeKeyed writes rows as a keyed container at dir.
func writeKeyed(t testing.TB, dir string, pk []string, rows []keyedRow, blockRows int) *Container {
	return writeKeyedSorted(t, dir, pk, nil, rows, blockRows)
}

// writeKeyedSorted is writeKeyed with a sort key (rows in its order).
func writeKeyedSorted(t testing.TB, dir string, pk []string, sk SortKey, rows []keyedRow, blockRows int) *Container {
	t.Helper()
	schema := keyedTestSchema()
	w, err := Create(dir, WriterOptions{Table: "t", Projection: "p", ID: filepath.Base(dir), Schema: schema,
		SortKey: sk, PrimaryKey: pk, BlockRows: blockRows, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.name)
		if r.marker {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(r.version*10 + 1)
		}
		b.Field(3).(*array.Int64Builder).Append(r.version)
		b.Field(4).(*array.BooleanBuilder).Append(r.marker)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keyOf is a row's key under the key shape pk, as a comparable string.
func keyOf(pk []string, r keyedRow) string {
	var parts []string
	for _, name := range pk {
		if name == "id" {
			parts = append(parts, fmt.Sprint(r.id))
		} else {
			parts = append(parts, r.name)
		}
	}
	return strings.Join(parts, "\x00")
}

// bruteSuperseded is the rule of Superseded written out: per key, the
// row of the highest version wins (ties: the earlier container, then
// the earlier row); every other row of the key is dropped, and so is a
// winning marker unless the options keep it.
func bruteSuperseded(pk []string, conts [][]keyedRow, opts ResolveOptions) [][]uint32 {
	type at struct{ c, r int }
	best := map[string]at{}
	for c, rows := range conts {
		for r, row := range rows {
			k := keyOf(pk, row)
			b, ok := best[k]
			if !ok {
				best[k] = at{c, r}
				continue
			}
			old := conts[b.c][b.r]
			if row.version > old.version || (row.version == old.version && (c < b.c || (c == b.c && r < b.r))) {
				best[k] = at{c, r}
			}
		}
	}
	out := make([][]uint32, len(conts))
	for c, rows := range conts {
		for r, row := range rows {
			b := best[keyOf(pk, row)]
			drop := b != at{c, r}
			if !drop && row.marker {
				drop = !opts.KeepMarkers || row.version <= opts.DropMarkersThrough
			}
			if drop {
				out[c] = append(out[c], uint32(r))
			}
		}
	}
	return out
}

// randomKeyedContainers makes the rows of n containers over a key space
// of keys keys: container 0 a load (version 0, no markers) of most keys,
// the others changes of some keys each (at most one row per key a
// container) with versions from a small range, so that versions repeat
// across containers (one change applied twice), and markers that win or
// lose. The containers are shuffled so the largest is not always first.
// Dense ids are 0, 1, ... (an int64 key's table is then an array), else
// spread over a range much wider than the keys (a map).
func randomKeyedContainers(rng *rand.Rand, n, keys int, dense bool) [][]keyedRow {
	row := func(k int) keyedRow {
		r := keyedRow{id: int64(k*7919%100003) - 50000, name: strings.Repeat("k", k%5) + fmt.Sprint(k)}
		if dense {
			r.id = int64(k)
		}
		return r
	}
	conts := make([][]keyedRow, n)
	for k := range keys {
		if rng.IntN(10) < 8 {
			conts[0] = append(conts[0], row(k))
		}
	}
	for c := 1; c < n; c++ {
		share := rng.IntN(keys/2 + 1)
		for _, k := range rng.Perm(keys)[:share] {
			r := row(k)
			r.version = 1 + rng.Int64N(int64(4*n))
			r.marker = rng.IntN(4) == 0
			conts[c] = append(conts[c], r)
		}
	}
	rng.Shuffle(len(conts), func(i, j int) { conts[i], conts[j] = conts[j], conts[i] })
	return conts
}

func TestSupersededMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	for iter := range 72 {
		shape := keyShapes[iter/2%len(keyShapes)]
		n := 1 + rng.IntN(5)
		keys := 1 + rng.IntN(600)
		blockRows := []int{16, 64, 1000}[rng.IntN(3)]
		dense := iter%2 == 0
		conts := randomKeyedContainers(rng, n, keys, dense)
		opts := ResolveOptions{}
		switch rng.IntN(3) {
		case 1:
			opts.KeepMarkers = true
		case 2:
			opts.KeepMarkers, opts.DropMarkersThrough = true, rng.Int64N(int64(4*n))
		}
		name := fmt.Sprintf("%d-%s-dense%v-%dconts-%dkeys-block%d-keep%v-through%d", iter, shape.label, dense, n, keys, blockRows, opts.KeepMarkers, opts.DropMarkersThrough)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cs := make([]*Container, n)
			var total int64
			for i, rows := range conts {
				cs[i] = writeKeyed(t, filepath.Join(dir, fmt.Sprint(i)), shape.pk, rows, blockRows)
				total += int64(len(rows))
			}
			want := bruteSuperseded(shape.pk, conts, opts)
			// As written (with change statistics), then as a manifest
			// written before them (none: every change column is read).
			checkSuperseded(t, "with statistics", cs, opts, want, total)
			for i := range cs {
				cs[i] = withoutChangeStats(t, cs[i])
			}
			checkSuperseded(t, "without statistics", cs, opts, want, total)
		})
	}
}

// checkSuperseded runs Superseded over cs and checks its result is want
// (the rows of each container to drop, ascending) over total rows, and
// that its memory is charged to the budget and released.
func checkSuperseded(t *testing.T, label string, cs []*Container, opts ResolveOptions, want [][]uint32, total int64) {
	t.Helper()
	budget := NewBudget(64<<20, nil)
	opts.Budget = budget
	res, err := Superseded(context.Background(), cs, opts)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	var dropped int64
	for i := range cs {
		var got []uint32
		if b := res.Dropped[i]; b != nil {
			got = b.ToArray()
			if len(got) == 0 {
				t.Errorf("%s: container %d: an empty bitmap, want nil", label, i)
			}
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("%s: container %d (%d rows): dropped %v, want %v", label, i, cs[i].Rows(), got, want[i])
		}
		dropped += int64(len(want[i]))
	}
	if res.Live != total-dropped || res.DroppedRows() != dropped {
		t.Errorf("%s: live %d, dropped %d; want %d and %d", label, res.Live, res.DroppedRows(), total-dropped, dropped)
	}
	if dropped > 0 && budget.InUse() == 0 {
		t.Errorf("%s: the bitmaps of %d rows are not charged to the budget", label, dropped)
	}
	res.Release()
	if budget.InUse() != 0 {
		t.Errorf("%s: after Release the budget holds %d bytes", label, budget.InUse())
	}
}

// withoutChangeStats rewrites c's manifest as one written before change
// statistics were (no "changes" field) and opens it again.
func withoutChangeStats(t testing.TB, c *Container) *Container {
	t.Helper()
	m := *c.Manifest()
	m.Changes = nil
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"changes"`) {
		t.Fatalf("a manifest without statistics encodes them: %s", data)
	}
	if err := os.WriteFile(filepath.Join(c.Dir(), ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := Open(c.Dir(), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if old.Manifest().Changes != nil {
		t.Fatalf("container %s reopened without statistics has %+v", c.Dir(), old.Manifest().Changes)
	}
	return old
}

// TestSupersededCacheMatchesBruteForce resolves random sets of containers
// through a ResolveCache: the first call over a set fills it (the
// resolution, and the key index of the largest container), a second over
// the same set is a hit, and calls over the same largest container with
// other change containers (a flush added one, a partial mergeout took
// some) probe its index without reading it. Every result is the brute
// force's.
func TestSupersededCacheMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 3))
	var indexHits int64
	defer func() {
		if indexHits < 5 {
			t.Errorf("the largest containers' indexes were probed %d times, want some", indexHits)
		}
	}()
	for iter := range 48 {
		shape := keyShapes[iter%len(keyShapes)]
		n := 2 + rng.IntN(5)
		keys := 1 + rng.IntN(600)
		dense := iter%2 == 0
		conts := randomKeyedContainers(rng, n, keys, dense)
		// The largest container is last written; the others are changes.
		largest := 0
		for i, rows := range conts {
			if len(rows) > len(conts[largest]) {
				largest = i
			}
		}
		if iter%4 == 1 {
			// A largest container with markers and versions of its own,
			// as a partial mergeout writes.
			for r := range conts[largest] {
				conts[largest][r].version = rng.Int64N(int64(4 * n))
				conts[largest][r].marker = rng.IntN(5) == 0
			}
		}
		opts := ResolveOptions{}
		if rng.IntN(2) == 0 {
			opts.KeepMarkers, opts.DropMarkersThrough = true, rng.Int64N(int64(4*n))
		}
		name := fmt.Sprintf("%d-%s-dense%v-%dconts-%dkeys-keep%v", iter, shape.label, dense, n, keys, opts.KeepMarkers)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			all := make([]*Container, n)
			for i, rows := range conts {
				all[i] = writeKeyed(t, filepath.Join(dir, fmt.Sprint(i)), shape.pk, rows, []int{16, 64}[rng.IntN(2)])
				if iter%3 == 2 {
					all[i] = withoutChangeStats(t, all[i])
				}
			}
			cache := NewResolveCache(64 << 20)
			cache.minIndexRows = 0
			opts.Cache = cache
			check := func(label string, idx []int) {
				t.Helper()
				var cs []*Container
				var rows [][]keyedRow
				var total int64
				for _, i := range idx {
					cs, rows = append(cs, all[i]), append(rows, conts[i])
					total += int64(len(conts[i]))
				}
				checkSuperseded(t, label, cs, opts, bruteSuperseded(shape.pk, rows, opts), total)
			}
			everyIdx := make([]int, n)
			for i := range everyIdx {
				everyIdx[i] = i
			}
			check("first", everyIdx)
			st := cache.Stats()
			check("again", everyIdx)
			if got := cache.Stats(); got.Hits != st.Hits+1 || got.Entries != st.Entries {
				t.Errorf("the same containers again: %d hits, want %d", got.Hits, st.Hits+1)
			}
			// Subsets that keep the largest: new sets, resolved through
			// its index when it has one.
			for k := range 3 {
				var idx []int
				for _, i := range rng.Perm(n) {
					if i == largest || rng.IntN(2) == 0 {
						idx = append(idx, i)
					}
				}
				check(fmt.Sprintf("subset %d %v", k, idx), idx)
				if st := cache.Stats(); st.Bytes > 64<<20 {
					t.Errorf("the cache holds %d bytes, more than its bound", st.Bytes)
				}
			}
			indexHits += cache.Stats().IndexHits
		})
	}
}

// TestResolveCacheBound fills a small cache with the resolutions of many
// sets and checks it never holds more than its bound, keeps the most
// recent, and keeps nothing larger than the bound.
func TestResolveCacheBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 4))
	conts := randomKeyedContainers(rng, 6, 3000, true)
	dir := t.TempDir()
	var cs []*Container
	for i, rows := range conts {
		cs = append(cs, writeKeyed(t, filepath.Join(dir, fmt.Sprint(i)), []string{"id"}, rows, 64))
	}
	const bound = 16 << 10
	cache := NewResolveCache(bound)
	cache.minIndexRows = 0
	ctx := context.Background()
	for k := range 20 {
		set := slices.Clone(cs)
		rng.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
		set = set[:2+k%(len(set)-1)]
		res, err := Superseded(ctx, set, ResolveOptions{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		res.Release()
		if st := cache.Stats(); st.Bytes > bound {
			t.Fatalf("after %d sets the cache holds %d bytes, bound %d", k+1, st.Bytes, bound)
		}
	}
	st := cache.Stats()
	if st.Entries == 0 {
		t.Fatalf("a %d-byte cache kept nothing", bound)
	}
	// The index of a 3000-key container (12KB or more) and resolutions
	// fit; each entry is smaller than the bound.
	cache.mu.Lock()
	for e := cache.lru.Front(); e != nil; e = e.Next() {
		if b := e.Value.(*resolveEntry).bytes; b > bound {
			t.Errorf("an entry of %d bytes in a %d-byte cache", b, bound)
		}
	}
	cache.mu.Unlock()
	// A cache smaller than any entry keeps none.
	tiny := NewResolveCache(64)
	tiny.minIndexRows = 0
	res, err := Superseded(ctx, cs, ResolveOptions{Cache: tiny})
	if err != nil {
		t.Fatal(err)
	}
	res.Release()
	if st := tiny.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("a 64-byte cache holds %d entries of %d bytes", st.Entries, st.Bytes)
	}
}

// TestChangeStatsWritten checks the writer's change statistics and the
// manifest's checks of them.
func TestChangeStatsWritten(t *testing.T) {
	dir := t.TempDir()
	rows := []keyedRow{{id: 1, version: 7}, {id: 2, version: 3, marker: true}, {id: 3, version: 12}, {id: 4, version: 3, marker: true}}
	c := writeKeyed(t, filepath.Join(dir, "c"), []string{"id"}, rows, 2)
	if got, want := c.Manifest().Changes, (&ChangeStats{MinVersion: 3, MaxVersion: 12, Markers: 2}); got == nil || *got != *want {
		t.Errorf("change statistics %+v, want %+v", got, want)
	}
	e := writeKeyed(t, filepath.Join(dir, "e"), []string{"id"}, nil, 2)
	if got := e.Manifest().Changes; got == nil || *got != (ChangeStats{}) {
		t.Errorf("an empty container's change statistics %+v, want zeros", got)
	}
	for _, bad := range []ChangeStats{{MinVersion: -1, MaxVersion: 3}, {MinVersion: 4, MaxVersion: 3}, {Markers: 5, MaxVersion: 12}, {Markers: -1}} {
		m := *c.Manifest()
		m.Changes = &bad
		if err := m.Validate(); err == nil {
			t.Errorf("change statistics %+v of 4 rows accepted", bad)
		}
	}
	m := *c.Manifest()
	m.PrimaryKey = nil
	m.Schema = m.Schema[:3]
	m.Files = m.Files[:3]
	if err := m.Validate(); err == nil {
		t.Error("change statistics of a container without a primary key accepted")
	}
}

func TestSupersededBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 2))
	conts := randomKeyedContainers(rng, 4, 5000, false)
	dir := t.TempDir()
	var cs []*Container
	for i, rows := range conts {
		cs = append(cs, writeKeyed(t, filepath.Join(dir, fmt.Sprint(i)), []string{"name", "id"}, rows, 64))
	}
	budget := NewBudget(4<<10, nil)
	_, err := Superseded(context.Background(), cs, ResolveOptions{Budget: budget})
	if !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("a 4 KiB budget for the keys of %d containers: error %v, want ErrBudgetExceeded", len(cs), err)
	}
	if budget.InUse() != 0 {
		t.Errorf("after the failure the budget holds %d bytes", budget.InUse())
	}
}

func TestSupersededUnkeyedAndMixed(t *testing.T) {
	dir := t.TempDir()
	keyed := writeKeyed(t, filepath.Join(dir, "keyed"), []string{"id"}, []keyedRow{{id: 1}, {id: 2, version: 3, marker: true}}, 16)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w, err := Create(filepath.Join(dir, "plain"), WriterOptions{Table: "t", Projection: "p", ID: "plain", Schema: schema, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 1, 2}, nil)
	arr := b.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 3)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	arr.Release()
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	plain, err := Open(filepath.Join(dir, "plain"), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Superseded(context.Background(), []*Container{plain, plain}, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dropped[0] != nil || res.Dropped[1] != nil || res.Live != 6 {
		t.Errorf("unkeyed: dropped %v, live %d; want none and 6", res.Dropped, res.Live)
	}
	for _, cs := range [][]*Container{{plain, keyed}, {keyed, plain}} {
		if _, err := Superseded(context.Background(), cs, ResolveOptions{}); !errors.Is(err, ErrSchemaMismatch) {
			t.Errorf("keyed and unkeyed containers: error %v, want ErrSchemaMismatch", err)
		}
	}
	res, err = Superseded(context.Background(), []*Container{keyed}, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Dropped[0].ToArray(); !slices.Equal(got, []uint32{1}) {
		t.Errorf("one container: dropped %v, want its marker, row 1", got)
	}
}

// BenchmarkSuperseded resolves a keyed table of 1Mi rows as the
// windower's BenchmarkKeyed lays it out (a load of ids 0..n-1, then
// eight containers of changes to 1%, 10% or 50% of the keys, a tenth of
// them deletes): without a cache ("cold"), through the key index of the
// load with the resolution not cached (the first query after a flush,
// "index"), and with the resolution cached (the next queries, "hit").
func BenchmarkSuperseded(b *testing.B) {
	const n = 1 << 20
	dir := b.TempDir()
	for _, pct := range []int{1, 10, 50} {
		rng := rand.New(rand.NewPCG(uint64(pct), 7))
		load := make([]keyedRow, n)
		for i := range load {
			load[i] = keyedRow{id: int64(i)}
		}
		cs := []*Container{writeKeyed(b, filepath.Join(dir, fmt.Sprint(pct, "load")), []string{"id"}, load, DefaultBlockRows)}
		changed := rng.Perm(n)[:n*pct/100]
		changes := make([][]keyedRow, 8)
		for k, id := range changed {
			c := k * len(changes) / len(changed)
			changes[c] = append(changes[c], keyedRow{id: int64(id), version: int64(k + 1), marker: rng.IntN(10) == 0})
		}
		for i, rows := range changes {
			cs = append(cs, writeKeyed(b, filepath.Join(dir, fmt.Sprint(pct, "changes", i)), []string{"id"}, rows, DefaultBlockRows))
		}
		for _, mode := range []string{"cold", "index", "hit"} {
			b.Run(fmt.Sprintf("%d%%/%s", pct, mode), func(b *testing.B) {
				cache := NewResolveCache(DefaultResolveCacheBytes)
				opts := ResolveOptions{Budget: NewBudget(1<<30, nil)}
				if mode != "cold" {
					opts.Cache = cache
					res, err := Superseded(context.Background(), cs, opts)
					if err != nil {
						b.Fatal(err)
					}
					res.Release()
				}
				b.ResetTimer()
				for range b.N {
					if mode == "index" {
						cache.dropResolutions()
					}
					res, err := Superseded(context.Background(), cs, opts)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(res.DroppedRows()), "dropped")
					res.Release()
				}
				if mode == "index" && cache.Stats().IndexHits < int64(b.N) {
					b.Fatalf("%d index hits in %d resolutions", cache.Stats().IndexHits, b.N)
				}
			})
		}
	}
}

// dropResolutions empties the cache of resolutions, keeping the indexes.
func (c *ResolveCache) dropResolutions() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if re := e.Value.(*resolveEntry); re.res != nil {
			c.lru.Remove(e)
			delete(c.entries, k)
			c.bytes -= re.bytes
		}
	}
}
