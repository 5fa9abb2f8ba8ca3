package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestFeistelIsAPermutation(t *testing.T) {
	for _, n := range []int{1, 2, 3, 1000, 12345} {
		f := newFeistel(n, 7)
		seen := make([]bool, n)
		for i := range n {
			v := f.perm(uint64(i))
			if v >= uint64(n) || seen[v] {
				t.Fatalf("n=%d: perm(%d) = %d, out of range or seen twice", n, i, v)
			}
			seen[v] = true
		}
	}
}

func TestSpillTableBlocks(t *testing.T) {
	tb := spillTable{N: spillGenBlock + 100, Groups: 10, Seed: 1}
	if tb.blocks() != 2 {
		t.Fatalf("%d blocks, want 2", tb.blocks())
	}
	a, b := tb.block(1), tb.block(1)
	if len(a.ID) != 100 || a.ID[0] != spillGenBlock || a.S[7] != b.S[7] || a.X[42] != b.X[42] {
		t.Fatalf("block 1 not reproducible or misplaced: %d rows from %d", len(a.ID), a.ID[0])
	}
	for i, g := range a.G {
		if g < 0 || g >= 10 || a.C[i] != 0 {
			t.Fatalf("row %d: g %d, c %d", i, g, a.C[i])
		}
	}
	rec := a.record(memory.DefaultAllocator)
	defer rec.Release()
	if rec.NumRows() != 100 || rec.Column(6).NullN() != int(countTrue(a.SNull)) {
		t.Fatalf("record: %d rows, %d NULL labels", rec.NumRows(), rec.Column(6).NullN())
	}
}

func countTrue(b []bool) int64 {
	n := int64(0)
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func TestInt128(t *testing.T) {
	var a int128
	want := new(big.Int)
	for _, p := range [][2]int64{{1 << 62, 1 << 40}, {-5, 7}, {-(1 << 62), 1 << 50}, {3, -9}, {-1, -1}, {1<<63 - 1, 1<<63 - 1}} {
		a.addProduct(p[0], p[1])
		want.Add(want, new(big.Int).Mul(big.NewInt(p[0]), big.NewInt(p[1])))
		a.add(p[0])
		want.Add(want, big.NewInt(p[0]))
		if a.String() != want.String() {
			t.Fatalf("after %v: %s, want %s", p, a.String(), want.String())
		}
	}
}

// TestSpillChecksumStrataAgainstDuckDB: strata's checksum, computed in Go
// from a spilling run, equals the one DuckDB computes in SQL, for every
// query of the suite (strings hashed through md5 included).
func TestSpillChecksumStrataAgainstDuckDB(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	dir := t.TempDir()
	tb := spillTable{N: 70_000, Groups: 50, Seed: 3}
	cdir := filepath.Join(dir, "c0001")
	if err := writeSpillContainer(ctx, tb, cdir); err != nil {
		t.Fatal(err)
	}
	d, err := spillDuck(ctx, tb, dir)
	if err != nil {
		t.Skipf("duckdb: %v", err)
	}
	defer d.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, sq := range spillQueries {
		q, ok := windowbenchQuery(sq.name)
		if !ok {
			t.Fatalf("query %s is not in windowbench", sq.name)
		}
		got, st, err := strataSpillRun(ctx, log, q, sq.strings, []string{cdir}, dir, 2, 8*mib)
		if err != nil {
			t.Fatalf("%s: strata: %v", q.Name, err)
		}
		rows, err := d.conn.QueryContext(ctx, spillChecksumSQL(q, sq.strings, false))
		if err != nil {
			t.Fatalf("%s: duckdb: %v", q.Name, err)
		}
		fields, err := scanStrings(rows)
		rows.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := newSpillSum(fields)
		if ok, where := got.same(want); !ok || got.Rows != int64(tb.N) {
			t.Fatalf("%s: strata %v, duckdb %v: %s", q.Name, got.Fields, want.Fields, where)
		}
		if st.PeakBytes > st.Grant {
			t.Errorf("%s: peak %d over the grant %d", q.Name, st.PeakBytes, st.Grant)
		}
	}
}

func TestRenderSpill(t *testing.T) {
	run := func(rows int, strataSec float64) *spillRun {
		r := &spillRun{Rows: rows, Groups: 1000, Grant: 256 * mib, FitGrant: 4 * gib, Limit: time.Minute, Repeats: 1, Machine: "test host", Cores: 2,
			Systems:       []string{sysStrata, sysStrataAll, sysStrataFit, sysStrataFitAll, sysDuck1, sysDuckAll, sysPostgres},
			StrataThreads: map[string]int{sysStrata: 1, sysStrataAll: 2, sysStrataFit: 1, sysStrataFitAll: 2}}
		for _, sq := range spillQueries {
			q, _ := windowbenchQuery(sq.name)
			sum := newSpillSum([]string{"10", "10", "45"})
			res := spillResult{Query: q, Times: map[string]measure{
				sysStrata: {Seconds: strataSec, Runs: 1}, sysStrataAll: {Seconds: strataSec / 1.5, Runs: 1},
				sysStrataFit: {Seconds: strataSec / 3, Runs: 1}, sysStrataFitAll: {Seconds: strataSec / 4, Runs: 1},
				sysDuck1: {Seconds: strataSec * 2, Runs: 1}, sysDuckAll: {Seconds: strataSec, Runs: 1},
				sysPostgres: {Seconds: 60, TimedOut: true},
			}, Stats: map[string]spillStats{sysStrata: {PeakBytes: 200 * mib, SpilledBytes: gib, Grant: 256 * mib}, sysStrataAll: {PeakBytes: 250 * mib, SpilledBytes: gib, Grant: 256 * mib}},
				Sums: map[string]spillSum{sysStrata: sum, sysDuck1: sum}}
			res.Checks = checkSpillSums(slog.New(slog.NewTextHandler(io.Discard, nil)), r.Systems, q, res.Sums)
			r.Results = append(r.Results, res)
		}
		return r
	}
	rep := &report{Spill: &spillSuite{Runs: []*spillRun{run(10_000_000, 10)}}, SpillLarge: &spillSuite{Runs: []*spillRun{run(100_000_000, 120)}}}
	dir := t.TempDir()
	charts, err := drawCharts(rep, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != 1 || filepath.Base(charts[0]) != chartRows {
		t.Fatalf("charts %v, want %s", charts, chartRows)
	}
	if fi, err := os.Stat(charts[0]); err != nil || fi.Size() == 0 {
		t.Fatalf("chart: %v", err)
	}
	rep.Charts = map[string]string{chartRows: "charts/" + chartRows}
	var b bytes.Buffer
	rep.render(&b)
	out := b.String()
	for _, want := range []string{"## Tables larger than the grant", "### 10M rows, 256MiB grant", "### 100M rows, 256MiB grant",
		"> 60 (stopped)", "200MiB, 1GiB", "| `count_by_s` |", "same (2 systems): 10 rows", chartRows, "spill, 100M rows, 256MiB grant: strata no slower than 1.5x"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if rep.failures() != 0 {
		t.Errorf("%d failures, want 0", rep.failures())
	}
}
