package columnar

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	t.Helper()
	schema := keyedTestSchema()
	w, err := Create(dir, WriterOptions{Table: "t", Projection: "p", ID: filepath.Base(dir), Schema: schema,
		PrimaryKey: pk, BlockRows: blockRows, NoSync: true})
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
	ctx := context.Background()
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
			budget := NewBudget(64<<20, nil)
			opts.Budget = budget
			res, err := Superseded(ctx, cs, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := bruteSuperseded(shape.pk, conts, opts)
			var dropped int64
			for i := range cs {
				var got []uint32
				if b := res.Dropped[i]; b != nil {
					got = b.ToArray()
					if len(got) == 0 {
						t.Errorf("container %d: an empty bitmap, want nil", i)
					}
				}
				if !slices.Equal(got, want[i]) {
					t.Errorf("container %d (%d rows): dropped %v, want %v", i, len(conts[i]), got, want[i])
				}
				dropped += int64(len(want[i]))
			}
			if res.Live != total-dropped || res.DroppedRows() != dropped {
				t.Errorf("live %d, dropped %d; want %d and %d", res.Live, res.DroppedRows(), total-dropped, dropped)
			}
			if dropped > 0 && budget.InUse() == 0 {
				t.Errorf("the bitmaps of %d rows are not charged to the budget", dropped)
			}
			res.Release()
			if budget.InUse() != 0 {
				t.Errorf("after Release the budget holds %d bytes", budget.InUse())
			}
		})
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
