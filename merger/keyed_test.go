package merger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
)

// The tests of folding: keyed inputs (loaded rows at version 0, containers
// of changes with overlapping keys, versions applied late, the same change
// in two containers, delete markers) merged under every plan must give what
// a brute-force resolution of the same rows gives.

var keyedPK = []string{"region", "name"}

// keyedSchema is a keyed table: key (region, name), nullable columns of
// every kind a marker leaves NULL, and the change columns.
func keyedSchema() *arrow.Schema {
	return arrow.NewSchema(append([]arrow.Field{
		{Name: "region", Type: arrow.PrimitiveTypes.Int32},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "grp", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, columnar.ChangeFields()...), nil)
}

// keyedRow is one row of a keyed container as the generator makes it.
type keyedRow struct {
	region  int32
	name    string
	grp     *int16
	v       *int64
	s       *string
	f       *float64
	b       *bool
	bin     []byte // nil: NULL
	version int64
	deleted bool
}

func ptr[T any](v T) *T { return &v }

// randomValues fills r's non-key columns, each NULL one time in eight;
// strings of 0 to wide bytes (80 if 0), a third of them below 4 bytes, so
// that short and long moves are both taken.
func randomValues(rng *rand.Rand, r *keyedRow, wide int) {
	if wide <= 0 {
		wide = 80
	}
	null := func() bool { return rng.IntN(8) == 0 }
	if !null() {
		r.grp = ptr(int16(rng.IntN(7)))
	}
	if !null() {
		r.v = ptr(rng.Int64() - rng.Int64())
	}
	if !null() {
		n := rng.IntN(wide + 1)
		if rng.IntN(3) == 0 {
			n = rng.IntN(4)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		r.s = ptr(string(b))
	}
	if !null() {
		r.f = ptr(rng.NormFloat64())
	}
	if !null() {
		r.b = ptr(rng.IntN(2) == 0)
	}
	if !null() {
		r.bin = make([]byte, rng.IntN(40))
		for i := range r.bin {
			r.bin[i] = byte(rng.Uint32())
		}
	}
}

// keyedSpec shapes generated keyed inputs.
type keyedSpec struct {
	keys      int // the key space
	loaded    int // keys of the loaded container (version 0); 0: none
	changes   int // change events, versions 1..changes
	inputs    int // containers of changes
	deletes   int // one event in deletes is a delete
	dups      int // one event in dups is also in a second container
	blockRows int
	wide      int // longest value of column s; default 80
}

// keyName gives keys names of many lengths, so key columns hold short and
// long strings.
func keyName(k int) string {
	return strings.Repeat("n", k%37) + fmt.Sprint(k)
}

// makeKeyedInputs writes a loaded container (if spec.loaded > 0) and
// spec.inputs containers of change events, each sorted by sortKey, and
// returns their directories in a shuffled order (a mergeout's inputs come
// in any order). Every container holds at most one row per key; an event
// may land in two containers (applied twice); events go to containers at
// random, so a later container may hold an older version of a key.
func makeKeyedInputs(t testing.TB, dir string, rng *rand.Rand, spec keyedSpec, sortKey columnar.SortKey) []string {
	t.Helper()
	key := func(k int) (int32, string) { return int32(k % 5), keyName(k) }
	var containers [][]keyedRow
	if spec.loaded > 0 {
		var rows []keyedRow
		for _, k := range rng.Perm(spec.keys)[:spec.loaded] {
			r := keyedRow{}
			r.region, r.name = key(k)
			randomValues(rng, &r, spec.wide)
			rows = append(rows, r)
		}
		containers = append(containers, rows)
	}
	changes := make([][]keyedRow, spec.inputs)
	held := make([]map[int]bool, spec.inputs)
	for i := range held {
		held[i] = map[int]bool{}
	}
	// place puts r in a container other than not that holds no row of
	// key k, and returns it (-1: none found).
	place := func(k int, r keyedRow, not int) int {
		for range 4 {
			c := rng.IntN(spec.inputs)
			if c != not && !held[c][k] {
				held[c][k] = true
				changes[c] = append(changes[c], r)
				return c
			}
		}
		return -1
	}
	for v := 1; v <= spec.changes; v++ {
		k := rng.IntN(spec.keys)
		r := keyedRow{version: int64(v)}
		r.region, r.name = key(k)
		if spec.deletes > 0 && rng.IntN(spec.deletes) == 0 {
			r.deleted = true
		} else {
			randomValues(rng, &r, spec.wide)
		}
		c := place(k, r, -1)
		if c >= 0 && spec.dups > 0 && rng.IntN(spec.dups) == 0 {
			place(k, r, c)
		}
	}
	containers = append(containers, changes...)
	rng.Shuffle(len(containers), func(i, j int) { containers[i], containers[j] = containers[j], containers[i] })
	schema := keyedSchema()
	var dirs []string
	for i, rows := range containers {
		rec := keyedRecord(schema, rows)
		sorted := sortRecord(t, rec, sortKey)
		rec.Release()
		d := filepath.Join(dir, fmt.Sprintf("in%03d", i))
		writeKeyed(t, d, sorted, sortKey, spec.blockRows)
		sorted.Release()
		dirs = append(dirs, d)
	}
	return dirs
}

func keyedRecord(schema *arrow.Schema, rows []keyedRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int32Builder).Append(r.region)
		b.Field(1).(*array.StringBuilder).Append(r.name)
		appendOpt(b.Field(2).(*array.Int16Builder), r.grp)
		appendOpt(b.Field(3).(*array.Int64Builder), r.v)
		appendOpt(b.Field(4).(*array.StringBuilder), r.s)
		appendOpt(b.Field(5).(*array.Float64Builder), r.f)
		appendOpt(b.Field(6).(*array.BooleanBuilder), r.b)
		if r.bin == nil {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.BinaryBuilder).Append(r.bin)
		}
		b.Field(8).(*array.Int64Builder).Append(r.version)
		b.Field(9).(*array.BooleanBuilder).Append(r.deleted)
	}
	return b.NewRecordBatch()
}

func appendOpt[T any](b interface {
	Append(T)
	AppendNull()
}, v *T) {
	if v == nil {
		b.AppendNull()
	} else {
		b.Append(*v)
	}
}

func writeKeyed(t testing.TB, dir string, rec arrow.RecordBatch, key columnar.SortKey, blockRows int) {
	t.Helper()
	w, err := columnar.Create(dir, columnar.WriterOptions{
		Table: "t", Projection: "p", ID: filepath.Base(dir),
		Schema: rec.Schema(), SortKey: key, PrimaryKey: keyedPK, BlockRows: blockRows,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() > 0 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// referenceFold resolves the inputs' rows by brute force: for each key the
// row of the highest version (on a tie the first in input order: the same
// change applied twice), markers kept when their version is above
// dropThrough; then a stable sort of the kept rows by the sort key. It
// returns the rows formatted and the number dropped.
func referenceFold(t testing.TB, dirs []string, dropThrough int64) ([]string, int64) {
	return referenceFoldFrozen(t, dirs, dropThrough, 0)
}

// referenceFoldFrozen is referenceFold with the kept rows' versions at
// most freezeThrough written as 0 (Options.FreezeThrough).
func referenceFoldFrozen(t testing.TB, dirs []string, dropThrough, freezeThrough int64) ([]string, int64) {
	t.Helper()
	type row struct {
		sortKey []byte
		pk      string
		version int64
		deleted bool
		text    string
	}
	var all []row
	for _, d := range dirs {
		c, err := columnar.Open(d, columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cols := make([]int, c.Schema().NumFields())
		for i := range cols {
			cols[i] = i
		}
		r, err := c.OpenColumns(cols)
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			keys := rowKeys(t, rec, c.SortKey())
			for i, s := range formatRows(rec) {
				all = append(all, row{
					sortKey: keys[i],
					pk:      fmt.Sprintf("%d|%s", rec.Column(0).(*array.Int32).Value(i), rec.Column(1).(*array.String).Value(i)),
					version: rec.Column(8).(*array.Int64).Value(i),
					deleted: rec.Column(9).(*array.Boolean).Value(i),
					text:    s,
				})
			}
			rec.Release()
		}
		r.Close()
		c.Close()
	}
	winner := map[string]int{}
	for i, r := range all {
		w, ok := winner[r.pk]
		if !ok || r.version > all[w].version {
			winner[r.pk] = i
		}
	}
	var kept []row
	for i, r := range all {
		if winner[r.pk] != i || r.deleted && r.version <= dropThrough {
			continue
		}
		kept = append(kept, r)
	}
	slices.SortStableFunc(kept, func(a, b row) int { return bytes.Compare(a.sortKey, b.sortKey) })
	out := make([]string, len(kept))
	for i, r := range kept {
		out[i] = r.text
		if r.version <= freezeThrough {
			out[i] = frozenText(r.text, freezeThrough)
		}
	}
	return out, int64(len(all) - len(kept))
}

// checkFold merges dirs with opts and checks the output against the
// brute-force fold: rows, order, manifest and stats, peak within the grant,
// nothing left in the temporary directory.
func checkFold(t *testing.T, dirs []string, opts Options) *Stats {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	st, err := Merge(context.Background(), dirs, out, opts)
	if err != nil {
		t.Fatalf("Merge (grant %d): %v", opts.Grant, err)
	}
	got := readContainerRows(t, out)
	want, dropped := referenceFoldFrozen(t, dirs, opts.DropMarkersThrough, opts.FreezeThrough)
	if len(got) != len(want) {
		t.Fatalf("plan %s, grant %d: %d rows, want %d", st.Plan, opts.Grant, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("plan %s, grant %d: row %d:\n got %s\nwant %s", st.Plan, opts.Grant, i, got[i], want[i])
		}
	}
	if st.Rows != int64(len(want)) || st.SupersededRows != dropped {
		t.Errorf("Stats.Rows %d, SupersededRows %d; want %d, %d", st.Rows, st.SupersededRows, len(want), dropped)
	}
	man, err := columnar.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(man.PrimaryKey, keyedPK) || man.Rows != int64(len(want)) {
		t.Errorf("output manifest: primary key %v, rows %d; want %v, %d", man.PrimaryKey, man.Rows, keyedPK, len(want))
	}
	in, err := columnar.ReadManifest(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(man.Schema, in.Schema) || !man.SortKey.Equal(in.SortKey) {
		t.Errorf("output schema %v sort key %v, inputs' %v %v", man.Schema, man.SortKey, in.Schema, in.SortKey)
	}
	checkSorted(t, out)
	if st.PeakBytes > st.GrantBytes {
		t.Errorf("peak %d > grant %d (plan %s, estimate %d)", st.PeakBytes, st.GrantBytes, st.Plan, st.EstimatedBytes)
	}
	if st.Plan != PlanPasses && st.BlocksDecompressed != st.BlocksTotal {
		t.Errorf("blocks decompressed %d, total %d", st.BlocksDecompressed, st.BlocksTotal)
	}
	if ents, _ := os.ReadDir(opts.TempDir); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
	return st
}

// checkSorted reads the container's sort-key columns and checks every row's
// key is at least the previous one's.
func checkSorted(t *testing.T, dir string) {
	t.Helper()
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.OpenColumns(c.KeyColumns())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var prev []byte
	row := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range rowKeys(t, rec, c.SortKey()) {
			if prev != nil && bytes.Compare(prev, k) > 0 {
				rec.Release()
				t.Fatalf("%s: row %d sorts before the row above it", dir, row)
			}
			prev, row = k, row+1
		}
		rec.Release()
	}
}

var keyedSortKeys = map[string]columnar.SortKey{
	// The primary key: folded rows have distinct sort keys.
	"pk": {{Name: "region"}, {Name: "name"}},
	// A column with ties and NULLs (markers have it NULL): the output's
	// order among equal keys is the inputs' order.
	"grp": {{Name: "grp", Desc: true, NullsFirst: true}, {Name: "region"}},
}

// TestKeyedFoldAcrossGrants merges keyed inputs under ever smaller grants,
// on one and two workers, down to the first grant refused: every plan gives
// the brute-force fold with its peak within the grant, and the sweep goes
// through horizontal, vertical and passes. Passes need one column of every
// input to outgrow the grant while the key table of the changed rows fits
// it: column s holds long strings.
func TestKeyedFoldAcrossGrants(t *testing.T) {
	for name, sk := range keyedSortKeys {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(41, uint64(len(name))))
			spec := keyedSpec{keys: 1500, loaded: 1000, changes: 2500, inputs: 24, deletes: 5, dups: 6, blockRows: 64, wide: 800}
			dirs := makeKeyedInputs(t, t.TempDir(), rng, spec, sk)
			plans := map[string]bool{}
			for _, par := range []int{1, 2} {
				for grant := int64(16 << 20); ; grant = grant * 2 / 3 {
					opts := Options{Grant: grant, Parallelism: par, DropMarkersThrough: int64(spec.changes / 2)}
					_, err := Merge(context.Background(), dirs, filepath.Join(t.TempDir(), "probe"), Options{
						Grant: grant, Parallelism: par, DropMarkersThrough: opts.DropMarkersThrough, TempDir: t.TempDir()})
					var ge *GrantError
					if errors.As(err, &ge) && (ge.Minimum <= grant || ge.Grant != grant) {
						t.Errorf("grant error with minimum %d for grant %d", ge.Minimum, grant)
					}
					if errors.Is(err, ErrGrantTooSmall) {
						t.Logf("parallelism %d, grant %d: %v", par, grant, err)
						break
					}
					if err != nil {
						t.Fatalf("parallelism %d, grant %d: %v", par, grant, err)
					}
					st := checkFold(t, dirs, opts)
					plans[st.Plan] = true
					t.Logf("parallelism %d, grant %d: plan %s workers %d passes %d peak %d estimate %d superseded %d rows %d",
						par, grant, st.Plan, st.Workers, st.Passes, st.PeakBytes, st.EstimatedBytes, st.SupersededRows, st.Rows)
				}
			}
			for _, p := range []string{PlanHorizontal, PlanVertical, PlanPasses} {
				if !plans[p] {
					t.Errorf("no grant used plan %s", p)
				}
			}
		})
	}
}

// TestKeyedFoldOverlapped runs the vertical plan whose gathers follow the
// key merge's selection vector as it fills: the vector holds the kept rows
// only.
func TestKeyedFoldOverlapped(t *testing.T) {
	saved := minOverlapSeconds
	minOverlapSeconds = 0
	t.Cleanup(func() { minOverlapSeconds = saved })
	rng := rand.New(rand.NewPCG(43, 44))
	spec := keyedSpec{keys: 2000, loaded: 1500, changes: 3000, inputs: 9, deletes: 4, dups: 5, blockRows: 32}
	dirs := makeKeyedInputs(t, t.TempDir(), rng, spec, keyedSortKeys["pk"])
	overlapped := false
	for grant := int64(2 << 20); grant > 64<<10 && !overlapped; grant = grant * 4 / 5 {
		opts := Options{Grant: grant, Parallelism: 2, DropMarkersThrough: 1000}
		_, err := Merge(context.Background(), dirs, filepath.Join(t.TempDir(), "probe"), Options{
			Grant: grant, Parallelism: 2, DropMarkersThrough: 1000, TempDir: t.TempDir()})
		if errors.Is(err, ErrGrantTooSmall) {
			break
		}
		st := checkFold(t, dirs, opts)
		overlapped = st.Overlapped
		t.Logf("grant %d: plan %s overlapped %v peak %d", grant, st.Plan, st.Overlapped, st.PeakBytes)
	}
	if !overlapped {
		t.Error("no grant ran the overlapped plan")
	}
}

// TestKeyedFoldMarkers: DropMarkersThrough decides which current markers
// stay: none dropped at 0, those at or below it, all at the last version;
// markers that are not current are always dropped.
func TestKeyedFoldMarkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	spec := keyedSpec{keys: 400, loaded: 300, changes: 1200, inputs: 6, deletes: 2, dups: 4, blockRows: 16}
	dirs := makeKeyedInputs(t, t.TempDir(), rng, spec, keyedSortKeys["pk"])
	var last int64 = -1
	for _, through := range []int64{0, 300, 900, int64(spec.changes)} {
		for _, grant := range []int64{64 << 20, 512 << 10} {
			st := checkFold(t, dirs, Options{Grant: grant, DropMarkersThrough: through, BlockRows: 7})
			if grant == 64<<20 {
				if st.SupersededRows < last {
					t.Errorf("DropMarkersThrough %d: %d rows dropped, fewer than %d with a lower one", through, st.SupersededRows, last)
				}
				last = st.SupersededRows
			}
			t.Logf("through %d, grant %d: plan %s, %d rows kept, %d dropped", through, grant, st.Plan, st.Rows, st.SupersededRows)
		}
	}
}

// TestKeyedFoldEdges: a single keyed container; inputs whose every row is
// superseded or deleted (an empty output); changes without a loaded
// container; an empty input among them.
func TestKeyedFoldEdges(t *testing.T) {
	sk := keyedSortKeys["pk"]
	t.Run("single", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(47, 1))
		dirs := makeKeyedInputs(t, t.TempDir(), rng, keyedSpec{keys: 300, changes: 500, inputs: 1, deletes: 3, blockRows: 8}, sk)
		for _, through := range []int64{0, 500} {
			checkFold(t, dirs, Options{Grant: 8 << 20, DropMarkersThrough: through})
		}
	})
	t.Run("all-deleted", func(t *testing.T) {
		schema := keyedSchema()
		var a, b []keyedRow
		for k := range 50 {
			r := keyedRow{region: int32(k % 3), name: keyName(k)}
			randomValues(rand.New(rand.NewPCG(uint64(k), 2)), &r, 0)
			a = append(a, r)
			b = append(b, keyedRow{region: r.region, name: r.name, version: int64(k + 1), deleted: true})
		}
		dir := t.TempDir()
		var dirs []string
		for i, rows := range [][]keyedRow{a, b, nil} {
			rec := keyedRecord(schema, rows)
			sorted := sortRecord(t, rec, sk)
			rec.Release()
			d := filepath.Join(dir, fmt.Sprintf("c%d", i))
			writeKeyed(t, d, sorted, sk, 4)
			sorted.Release()
			dirs = append(dirs, d)
		}
		st := checkFold(t, dirs, Options{Grant: 8 << 20, DropMarkersThrough: 50})
		if st.Rows != 0 || st.SupersededRows != 100 {
			t.Errorf("rows %d, superseded %d: want 0, 100", st.Rows, st.SupersededRows)
		}
		st = checkFold(t, dirs, Options{Grant: 8 << 20, DropMarkersThrough: 25})
		if st.Rows != 25 {
			t.Errorf("markers above 25 kept: %d rows, want 25", st.Rows)
		}
	})
	t.Run("changes-only", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(47, 3))
		dirs := makeKeyedInputs(t, t.TempDir(), rng, keyedSpec{keys: 200, changes: 900, inputs: 40, deletes: 4, dups: 3, blockRows: 5}, sk)
		for _, grant := range []int64{16 << 20, 1 << 20, 400 << 10} {
			st := checkFold(t, dirs, Options{Grant: grant, DropMarkersThrough: 450})
			t.Logf("grant %d: plan %s passes %d peak %d", grant, st.Plan, st.Passes, st.PeakBytes)
		}
	})
}

// TestKeyedMismatch: a keyed and an unkeyed input, or two primary keys,
// are not merged.
func TestKeyedMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	sk := keyedSortKeys["pk"]
	dirs := makeKeyedInputs(t, t.TempDir(), rng, keyedSpec{keys: 50, loaded: 40, changes: 20, inputs: 1, blockRows: 8}, sk)
	// An append-only container of the same columns but the change columns
	// (which only a keyed table may have).
	plain := filepath.Join(t.TempDir(), "plain")
	full := keyedRecord(keyedSchema(), []keyedRow{{region: 1, name: "x"}})
	n := full.NumCols() - 2
	fields := full.Schema().Fields()[:n]
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), full.Columns()[:n], full.NumRows())
	full.Release()
	writeContainer(t, plain, rec, sk, 8)
	rec.Release()
	_, err := Merge(context.Background(), append(dirs, plain), filepath.Join(t.TempDir(), "out"), Options{Grant: 8 << 20, TempDir: t.TempDir()})
	if !errors.Is(err, ErrMismatch) {
		t.Errorf("keyed and unkeyed inputs: %v, want ErrMismatch", err)
	}
	other := filepath.Join(t.TempDir(), "other")
	rec = keyedRecord(keyedSchema(), []keyedRow{{region: 1, name: "x"}})
	w, err := columnar.Create(other, columnar.WriterOptions{Table: "t", Projection: "p", ID: "other", Schema: rec.Schema(), SortKey: sk, PrimaryKey: []string{"region"}, BlockRows: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	_, err = Merge(context.Background(), append(dirs, other), filepath.Join(t.TempDir(), "out"), Options{Grant: 8 << 20, TempDir: t.TempDir()})
	if !errors.Is(err, ErrMismatch) {
		t.Errorf("primary keys (region, name) and (region): %v, want ErrMismatch", err)
	}
}

// TestUnkeyedMergeHoldsNoResolution: an append-only merge drops nothing and
// its peak is what it was before folding existed (no bitmaps).
func TestUnkeyedMergeHoldsNoResolution(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	dirs := makeInputs(t, t.TempDir(), rng, 6, 300, 20, 32)
	st := checkMerge(t, dirs, Options{Grant: 8 << 20, DropMarkersThrough: 1 << 40})
	if st.SupersededRows != 0 {
		t.Errorf("unkeyed merge dropped %d rows", st.SupersededRows)
	}
}
