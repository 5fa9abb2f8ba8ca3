package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
	pairs := [][2]int64{{1 << 62, 1 << 40}, {-5, 7}, {-(1 << 62), 1 << 50}, {3, -9}, {-1, -1}, {1<<63 - 1, 1<<63 - 1},
		{math.MinInt64, math.MinInt64}, {math.MinInt64, 1<<63 - 1}, {math.MinInt64, -1}, {0, math.MinInt64}}
	mod, half := new(big.Int).Lsh(big.NewInt(1), 128), new(big.Int).Lsh(big.NewInt(1), 127)
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		pairs = append(pairs, [2]int64{int64(r.Uint64()), int64(r.Uint64() >> r.IntN(64))})
	}
	for _, p := range pairs {
		a.addProduct(p[0], p[1])
		want.Add(want, new(big.Int).Mul(big.NewInt(p[0]), big.NewInt(p[1])))
		a.add(p[0])
		want.Add(want, big.NewInt(p[0]))
		// The sums wrap at 128 bits, as the random products' sum does.
		w := new(big.Int).Mod(want, mod)
		if w.Cmp(half) >= 0 {
			w.Sub(w, mod)
		}
		if a.String() != w.String() {
			t.Fatalf("after %v: %s, want %s", p, a.String(), w.String())
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
		// One thread folds on the goroutine that reads the result, more
		// on a summer each.
		for _, threads := range []int{1, 2} {
			got, st, err := strataSpillRun(ctx, log, q, sq.strings, []string{cdir}, dir, threads, 8*mib)
			if err != nil {
				t.Fatalf("%s: strata: %v", q.Name, err)
			}
			if ok, where := got.same(want); !ok || got.Rows != int64(tb.N) {
				t.Fatalf("%s, %d threads: strata %v, duckdb %v: %s", q.Name, threads, got.Fields, want.Fields, where)
			}
			if st.PeakBytes > st.Grant {
				t.Errorf("%s: peak %d over the grant %d", q.Name, st.PeakBytes, st.Grant)
			}
		}
	}
}

// BenchmarkSpillSummer folds batches of 64Ki rows into a checksum: three
// integer columns, as rownum_rank's result is, and an integer and a
// string column with NULLs, as first_value_s's is (each string hashed).
func BenchmarkSpillSummer(b *testing.B) {
	const n = 64 << 10
	ints := func(null int) arrow.Array {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		defer ib.Release()
		for i := range n {
			if null > 0 && i%null == 7 {
				ib.AppendNull()
			} else {
				ib.Append(int64(i * 7919))
			}
		}
		return ib.NewArray()
	}
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	defer sb.Release()
	words := []string{"", "a", "label 17", "a somewhat longer label of forty bytes.."}
	for i := range n {
		if i%20 == 7 {
			sb.AppendNull()
		} else {
			sb.Append(words[i%len(words)])
		}
	}
	field := func(name string, typ arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: typ, Nullable: true}
	}
	for _, c := range []struct {
		name    string
		fields  []arrow.Field
		cols    []arrow.Array
		strings []string
	}{
		{"ints", []arrow.Field{field("id", arrow.PrimitiveTypes.Int64), field("rn", arrow.PrimitiveTypes.Int64), field("rk", arrow.PrimitiveTypes.Int64)},
			[]arrow.Array{ints(0), ints(0), ints(50)}, nil},
		{"strings", []arrow.Field{field("id", arrow.PrimitiveTypes.Int64), field("fv", arrow.BinaryTypes.String)},
			[]arrow.Array{ints(0), sb.NewArray()}, []string{"fv"}},
	} {
		rec := array.NewRecordBatch(arrow.NewSchema(c.fields, nil), c.cols, n)
		for _, a := range c.cols {
			a.Release()
		}
		var outputs []string
		for _, f := range c.fields {
			outputs = append(outputs, f.Name)
		}
		b.Run(c.name, func(b *testing.B) {
			s := newSpillSummer(windowQuery{Outputs: outputs}, c.strings)
			b.SetBytes(n)
			for b.Loop() {
				if err := s.add(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
		rec.Release()
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
