package merger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// The tests of freezing (Options.FreezeThrough): a full fold writes the
// versions at or below the change floor as 0, and the frozen rows resolve
// against the changes applied after the fold as the unfrozen ones would,
// for every change above the floor.

// frozenText is a formatted keyed row (formatRows: version in field 8)
// with its version written as 0 when at most through.
func frozenText(text string, through int64) string {
	f := strings.Split(text, "|")
	if v, err := strconv.ParseInt(f[8], 10, 64); err == nil && v <= through {
		f[8] = "0"
	}
	return strings.Join(f, "|")
}

// TestKeyedFoldFreezes: under every plan a fold that freezes through F
// gives the brute-force fold with the kept versions at most F as 0, and
// its manifest's change statistics say so.
func TestKeyedFoldFreezes(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	spec := keyedSpec{keys: 600, loaded: 400, changes: 1500, inputs: 8, deletes: 4, dups: 5, blockRows: 16, wide: 300}
	dirs := makeKeyedInputs(t, t.TempDir(), rng, spec, keyedSortKeys["pk"])
	plans := map[string]bool{}
	for _, through := range []int64{700, int64(spec.changes)} {
		for _, grant := range []int64{64 << 20, 1 << 20, 300 << 10} {
			opts := Options{Grant: grant, DropMarkersThrough: through, FreezeThrough: through, BlockRows: 13}
			st := checkFold(t, dirs, opts)
			plans[st.Plan] = true
			out := filepath.Join(t.TempDir(), "again")
			if _, err := Merge(context.Background(), dirs, out, opts); err != nil {
				t.Fatal(err)
			}
			man, err := columnar.ReadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			if man.Changes == nil || man.Changes.MinVersion != 0 {
				t.Errorf("through %d: change statistics %+v, want min version 0", through, man.Changes)
			}
			if through == int64(spec.changes) && (man.Changes.MaxVersion != 0 || man.Changes.Markers != 0) {
				t.Errorf("everything frozen: change statistics %+v, want one version 0 and no markers", man.Changes)
			}
		}
	}
	t.Logf("plans: %v", plans)
	if len(plans) < 2 {
		t.Errorf("plans %v: the sweep should take more than one", plans)
	}
}

// freezeTable is a keyed table as the scheduler sees it at a full fold
// through floor: the containers live then (every change at or below the
// floor among them, and some above it) and those applied after (changes
// above the floor only, some older than changes above it already live).
func freezeTable(t *testing.T, rng *rand.Rand, keys, changes int, floor int64) (early, late []string) {
	t.Helper()
	sk := keyedSortKeys["pk"]
	key := func(k int) (int32, string) { return int32(k % 5), keyName(k) }
	var loaded []keyedRow
	for k := range keys {
		if rng.IntN(4) > 0 {
			r := keyedRow{}
			r.region, r.name = key(k)
			randomValues(rng, &r, 0)
			loaded = append(loaded, r)
		}
	}
	earlyC, lateC := make([][]keyedRow, 3), make([][]keyedRow, 3)
	earlyHeld, lateHeld := make([]map[int]bool, 3), make([]map[int]bool, 3)
	for i := range 3 {
		earlyHeld[i], lateHeld[i] = map[int]bool{}, map[int]bool{}
	}
	for v := 1; v <= changes; v++ {
		k := rng.IntN(keys)
		r := keyedRow{version: int64(v)}
		r.region, r.name = key(k)
		if rng.IntN(4) == 0 {
			r.deleted = true
		} else {
			randomValues(rng, &r, 0)
		}
		cs, held := earlyC, earlyHeld
		if int64(v) > floor && rng.IntN(2) == 0 {
			cs, held = lateC, lateHeld
		}
		c := rng.IntN(3)
		if held[c][k] {
			continue // a container holds one row per key
		}
		held[c][k] = true
		cs[c] = append(cs[c], r)
	}
	dir := t.TempDir()
	write := func(name string, rows []keyedRow) string {
		rec := keyedRecord(keyedSchema(), rows)
		sorted := sortRecord(t, rec, sk)
		rec.Release()
		d := filepath.Join(dir, name)
		writeKeyed(t, d, sorted, sk, 9)
		sorted.Release()
		return d
	}
	early = append(early, write("loaded", loaded))
	for i := range 3 {
		early = append(early, write(fmt.Sprintf("early%d", i), earlyC[i]))
		late = append(late, write(fmt.Sprintf("late%d", i), lateC[i]))
	}
	return early, late
}

// TestFrozenRowsResolveAgainstLaterChanges: a table folded with and
// without freezing through the floor, then the changes applied after the
// fold (all above the floor; some older than changes the fold kept): the
// current rows are the same either way, and the brute-force resolution of
// every change, on every plan of the later fold and through Superseded.
func TestFrozenRowsResolveAgainstLaterChanges(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(63, seed))
		const changes = 900
		floor := int64(300 + 100*seed)
		early, late := freezeTable(t, rng, 250, changes, floor)
		folds := map[bool]string{}
		for _, freeze := range []bool{false, true} {
			opts := Options{Grant: 32 << 20, DropMarkersThrough: floor}
			if freeze {
				opts.FreezeThrough = floor
			}
			folds[freeze] = filepath.Join(t.TempDir(), "fold")
			if _, err := Merge(context.Background(), early, folds[freeze], opts); err != nil {
				t.Fatal(err)
			}
		}
		want, _ := referenceFoldFrozen(t, append(append([]string(nil), early...), late...), changes, floor)
		for _, grant := range []int64{32 << 20, 256 << 10} {
			for _, freeze := range []bool{false, true} {
				out := filepath.Join(t.TempDir(), "after")
				in := append([]string{folds[freeze]}, late...)
				// The later full fold freezes nothing: its rows keep their
				// versions, to compare.
				if _, err := Merge(context.Background(), in, out, Options{Grant: grant, DropMarkersThrough: changes}); err != nil {
					t.Fatal(err)
				}
				got := readContainerRows(t, out)
				if len(got) != len(want) {
					t.Fatalf("seed %d freeze %v grant %d: %d rows, want %d", seed, freeze, grant, len(got), len(want))
				}
				for i := range got {
					if frozenText(got[i], floor) != want[i] {
						t.Fatalf("seed %d freeze %v grant %d: row %d:\n got %s\nwant %s", seed, freeze, grant, i, got[i], want[i])
					}
				}
			}
		}
		// What a reader resolves: the same live rows over the frozen fold
		// and the late containers as over the unfrozen one.
		live := map[bool]int64{}
		for _, freeze := range []bool{false, true} {
			var cs []*columnar.Container
			for _, d := range append([]string{folds[freeze]}, late...) {
				c, err := columnar.Open(d, columnar.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				cs = append(cs, c)
			}
			res, err := columnar.Superseded(context.Background(), cs, columnar.ResolveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			live[freeze] = res.Live
			res.Release()
		}
		if live[true] != live[false] || live[true] != int64(len(want)) {
			t.Errorf("seed %d: Superseded keeps %d rows over the frozen fold, %d over the unfrozen one; want %d", seed, live[true], live[false], len(want))
		}
	}
}

// TestLateApplyBeatsFrozenRow is the hole freezing opens, which the
// scheduler's apply guard closes (scheduler TestApplyRefusedAtOrBelowFrozen,
// walwriter TestApplyDropsFrozenChanges): a change at or below the floor
// applied after the fold (an event JetStream dead-lettered after
// MaxDeliver that a walwriter still had in its WAL) beats the frozen row,
// version 0, though a newer change was folded into it. Unfrozen, the newer
// change's version still wins.
func TestLateApplyBeatsFrozenRow(t *testing.T) {
	sk := keyedSortKeys["pk"]
	dir := t.TempDir()
	write := func(name string, rows ...keyedRow) string {
		d := filepath.Join(dir, name)
		rec := keyedRecord(keyedSchema(), rows)
		writeKeyed(t, d, rec, sk, 4)
		rec.Release()
		return d
	}
	row := func(v int64, s string) keyedRow {
		return keyedRow{region: 1, name: "k", s: ptr(s), version: v}
	}
	loaded := write("loaded", row(0, "loaded"))
	newer := write("newer", row(5, "newer"))
	late := write("late", row(3, "older, dead-lettered"))
	const floor = 10
	for _, freeze := range []bool{false, true} {
		fold := filepath.Join(dir, fmt.Sprintf("fold-%v", freeze))
		opts := Options{Grant: 8 << 20, DropMarkersThrough: floor}
		if freeze {
			opts.FreezeThrough = floor
		}
		if _, err := Merge(context.Background(), []string{loaded, newer}, fold, opts); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprintf("after-%v", freeze))
		if _, err := Merge(context.Background(), []string{fold, late}, out, Options{Grant: 8 << 20}); err != nil {
			t.Fatal(err)
		}
		got := readContainerRows(t, out)
		want := "newer"
		if freeze {
			want = "older, dead-lettered" // resurrected: the guard's reason
		}
		if len(got) != 1 || !strings.Contains(got[0], "|"+want+"|") {
			t.Errorf("freeze %v: rows %q, want the %q row", freeze, got, want)
		}
	}
}

// TestFullFoldBytesMatchFreshLoad is BENCHMARKS' folding figure in
// miniature: pgbench_accounts loaded (versions 0), changed (updates of
// random accounts over many batches, a few deletes), then folded by a full
// mergeout, against the same current rows loaded fresh into one container.
// Frozen, the fold is within 5% of the fresh load's bytes (the same rows,
// the same versions: the same bytes); unfrozen, every changed row keeps its
// stream sequence and the version column grows.
func TestFullFoldBytesMatchFreshLoad(t *testing.T) {
	const accounts, batches, perBatch = 200_000, 40, 4000
	dir := t.TempDir()
	if _, err := columnar.GenerateAccounts(dir, columnar.AccountsOptions{Accounts: accounts, RowsPerContainer: accounts / 2}); err != nil {
		t.Fatal(err)
	}
	inputs, err := filepath.Glob(filepath.Join(dir, "pgbench_accounts", "p", "c*"))
	if err != nil || len(inputs) != 2 {
		t.Fatalf("generated %v, %v", inputs, err)
	}
	schema, key, pk := columnar.AccountsSchema()
	balance := make([]int64, accounts+1) // by aid; 0 as loaded
	deleted := make([]bool, accounts+1)
	rng := rand.New(rand.NewPCG(71, 72))
	var version int64
	for b := range batches {
		aids := map[int64]bool{}
		for len(aids) < perBatch {
			aids[1+rng.Int64N(accounts)] = true
		}
		sorted := make([]int64, 0, len(aids))
		for a := range aids {
			sorted = append(sorted, a)
		}
		slices.Sort(sorted)
		rows := make([]accountRow, 0, len(sorted))
		for _, a := range sorted {
			version++
			r := accountRow{aid: a, version: version}
			if rng.IntN(200) == 0 {
				r.deleted, deleted[a] = true, true
			} else {
				balance[a] += rng.Int64N(10001) - 5000
				r.balance, deleted[a] = balance[a], false
			}
			rows = append(rows, r)
		}
		writeAccounts(t, filepath.Join(dir, fmt.Sprintf("w%03d", b)), schema, key, pk, rows)
		inputs = append(inputs, filepath.Join(dir, fmt.Sprintf("w%03d", b)))
	}
	var current []accountRow
	for a := int64(1); a <= accounts; a++ {
		if !deleted[a] {
			current = append(current, accountRow{aid: a, balance: balance[a]})
		}
	}
	fresh := filepath.Join(dir, "fresh")
	writeAccounts(t, fresh, schema, key, pk, current)
	size := func(d string) int64 {
		m, err := columnar.ReadManifest(d)
		if err != nil {
			t.Fatal(err)
		}
		return m.CompressedBytes()
	}
	freshBytes := size(fresh)
	for _, freeze := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprintf("fold-%v", freeze))
		opts := Options{Grant: 256 << 20, DropMarkersThrough: version}
		if freeze {
			opts.FreezeThrough = version
		}
		st, err := Merge(context.Background(), inputs, out, opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.Rows != int64(len(current)) {
			t.Fatalf("freeze %v: %d rows, want the %d live", freeze, st.Rows, len(current))
		}
		got := size(out)
		ratio := float64(got)/float64(freshBytes) - 1
		t.Logf("freeze %v: %d bytes against %d fresh: %+.1f%%", freeze, got, freshBytes, 100*ratio)
		if freeze && (ratio > 0.05 || ratio < -0.05) {
			t.Errorf("frozen fold: %d bytes, %+.1f%% from a fresh load's %d; want within 5%%", got, 100*ratio, freshBytes)
		}
		if !freeze && ratio <= 0.05 {
			t.Errorf("unfrozen fold: %d bytes, %+.1f%% from a fresh load's %d; the versions should cost more than 5%%", got, 100*ratio, freshBytes)
		}
	}
}

// accountRow is a row of pgbench_accounts as TestFullFoldBytesMatchFreshLoad
// changes it: bid and filler follow the aid, as pgbench -i fills them.
type accountRow struct {
	aid, balance, version int64
	deleted               bool
}

// writeAccounts writes rows, in aid order, as a keyed container of
// pgbench_accounts with the generator's block size; a marker has bid,
// abalance and filler NULL.
func writeAccounts(t *testing.T, dir string, schema *arrow.Schema, key columnar.SortKey, pk []string, rows []accountRow) {
	t.Helper()
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "pgbench_accounts", Projection: "p", ID: filepath.Base(dir),
		Schema: schema, SortKey: key, PrimaryKey: pk, BlockRows: columnar.DefaultBlockRows})
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < len(rows); lo += columnar.DefaultBlockRows {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for _, r := range rows[lo:min(len(rows), lo+columnar.DefaultBlockRows)] {
			b.Field(0).(*array.Int64Builder).Append(r.aid)
			if r.deleted {
				b.Field(1).AppendNull()
				b.Field(2).AppendNull()
				b.Field(3).AppendNull()
			} else {
				b.Field(1).(*array.Int64Builder).Append((r.aid-1)/100000 + 1)
				b.Field(2).(*array.Int64Builder).Append(r.balance)
				b.Field(3).(*array.StringBuilder).Append(columnar.AccountsFiller)
			}
			b.Field(4).(*array.Int64Builder).Append(r.version)
			b.Field(5).(*array.BooleanBuilder).Append(r.deleted)
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
