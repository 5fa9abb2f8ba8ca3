package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
)

func init() {
	register(command{
		name:    "bench window",
		summary: "run the window-function suite over generated containers and report speed, memory and allocations",
		run:     runBenchWindow,
	})
}

// windowCase is one query of the suite.
type windowCase struct {
	name  string
	sql   string
	table string // generated table it reads
	rows  int    // 0: --rows
	grant int64  // 0: --grant
}

// windowResult is one line of the benchmark's output.
type windowResult struct {
	Query              string  `json:"query"`
	Name               string  `json:"name"`
	Rows               int64   `json:"rows"`
	Partitions         int64   `json:"partitions"`
	SortedInput        bool    `json:"sorted_input"`
	Seconds            float64 `json:"seconds"`
	CPUSeconds         float64 `json:"cpu_seconds"` // user+system CPU of the process: the work, without waiting for a shared CPU
	RowsPerS           float64 `json:"rows_per_s"`
	PeakBytes          int64   `json:"peak_bytes"`
	GrantBytes         int64   `json:"grant_bytes"`
	SpilledBytes       int64   `json:"spilled_bytes"`
	AllocsPerPartition float64 `json:"allocs_per_partition"`
	Mallocs            uint64  `json:"mallocs"`
	Runs               int     `json:"runs"` // the figures are of the run of median CPU time
}

func windowSuite(bigRows int) []windowCase {
	return []windowCase{
		{name: "q0_unsorted", sql: "SELECT a, count(*) OVER (PARTITION BY a) FROM a", table: "a"},
		{name: "q0_presorted", sql: "SELECT a, count(*) OVER (PARTITION BY a) FROM a_sorted", table: "a_sorted"},
		{name: "q0_one_partition", sql: "SELECT a, count(*) OVER (PARTITION BY a) FROM a_one", table: "a_one"},
		{name: "q0_mod_1000", sql: "SELECT a, count(*) OVER (PARTITION BY a % 1000) FROM a", table: "a"},
		{name: "row_number_rank", sql: "SELECT g, x, row_number() OVER (PARTITION BY g ORDER BY x), rank() OVER (PARTITION BY g ORDER BY x) FROM t", table: "t"},
		{name: "sum_rows_10", sql: "SELECT g, x, sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM t", table: "t"},
		{name: "avg_range_ts", sql: "SELECT ts, avg(x) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '10 seconds' PRECEDING AND CURRENT ROW) FROM t", table: "t"},
		{name: "min_rows_10", sql: "SELECT ts, min(x) OVER (ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM t", table: "t"},
		{name: "min_rows_1000", sql: "SELECT ts, min(x) OVER (ORDER BY ts ROWS BETWEEN 1000 PRECEDING AND CURRENT ROW) FROM t", table: "t"},
		{name: "min_rows_10000", sql: "SELECT ts, min(x) OVER (ORDER BY ts ROWS BETWEEN 10000 PRECEDING AND CURRENT ROW) FROM t", table: "t"},
		{name: "lag_lead", sql: "SELECT ts, lag(x) OVER (ORDER BY ts), lead(x, 2, 0) OVER (ORDER BY ts) FROM t", table: "t"},
		{name: "first_value_s", sql: "SELECT g, x, first_value(s) OVER (PARTITION BY g ORDER BY x) FROM t", table: "t"},
		{name: "max_s_rows10", sql: "SELECT g, x, max(s) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM t", table: "t"},
		{name: "lag_k", sql: "SELECT g, x, lag(k) OVER (PARTITION BY g ORDER BY x) FROM t", table: "t"},
		{name: "count_by_s", sql: "SELECT s, count(*) OVER (PARTITION BY s) FROM t", table: "t"},
		{name: "spill_one_partition", sql: "SELECT ts, sum(x) OVER (ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM big", table: "big", rows: bigRows, grant: 64 << 20},
	}
}

type benchWindowConfig struct {
	rows, bigRows int
	grant         int64
	dir           string
	json          bool
	only          string
	seed          uint64
	cpuProfile    string
	repeat        int
}

func parseBenchWindow(args []string) (*benchWindowConfig, error) {
	fs := newFlagSet("bench window")
	rows := fs.Int("rows", 1000000, "rows of the generated tables")
	bigRows := fs.Int("big-rows", 10000000, "rows of the spilling case's single partition")
	grant := fs.String("grant", "1GiB", "memory grant of every query but the spilling case (64MiB)")
	dir := fs.String("dir", "", "directory for the generated containers (default: a new temporary directory, removed after)")
	js := fs.Bool("json", false, "print one JSON object per query instead of a table")
	only := fs.String("only", "", "run only the case of this name")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	repeat := fs.Int("repeat", 1, "run each case this many times in the process and report the run of median CPU time (the first run of a fresh process also pays for growing its heap)")
	cpu := fs.String("cpuprofile", "", "write a CPU profile of the timed section to this file (with more than one case, to this file.<case>)")
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	g, err := bytesize.Parse(*grant)
	if err != nil {
		return nil, fmt.Errorf("%w: --grant: %v", errUsage, err)
	}
	if *rows <= 0 || *bigRows <= 0 || *repeat <= 0 {
		return nil, fmt.Errorf("%w: --rows, --big-rows and --repeat must be positive", errUsage)
	}
	return &benchWindowConfig{rows: *rows, bigRows: *bigRows, grant: g, dir: *dir, json: *js, only: *only, seed: *seed, cpuProfile: *cpu, repeat: *repeat}, nil
}

func runBenchWindow(ctx context.Context, args []string) error {
	cfg, err := parseBenchWindow(args)
	if err != nil {
		return err
	}
	dir := cfg.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "strata-bench-window-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	var results []windowResult
	generated := map[string]string{}
	for _, c := range windowSuite(cfg.bigRows) {
		if cfg.only != "" && c.name != cfg.only {
			continue
		}
		rows := c.rows
		if rows == 0 {
			rows = cfg.rows
		}
		key := fmt.Sprintf("%s/%d", c.table, rows)
		if _, ok := generated[key]; !ok {
			d := filepath.Join(dir, fmt.Sprintf("%s_%d_seed%d", c.table, rows, cfg.seed))
			if _, err := columnar.Open(d, columnar.OpenOptions{}); err != nil {
				// Not there yet (a --dir of an earlier run keeps its tables).
				os.RemoveAll(d)
				if err := generateWindowTable(d, c.table, rows, cfg.seed); err != nil {
					return fmt.Errorf("generate table %s: %w", c.table, err)
				}
			}
			generated[key] = d
		}
		grant := c.grant
		if grant == 0 {
			grant = cfg.grant
		}
		profile := ""
		if cfg.cpuProfile != "" {
			profile = cfg.cpuProfile
			if cfg.only == "" {
				profile += "." + c.name // one profile per case
			}
		}
		var runs []windowResult
		for k := 0; k < cfg.repeat; k++ {
			p := profile
			if k != cfg.repeat/2 {
				p = "" // profile one run: the middle one
			}
			r, err := runWindowCase(ctx, c, generated[key], grant, filepath.Join(dir, "tmp"), p)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			runs = append(runs, r)
		}
		slices.SortFunc(runs, func(a, b windowResult) int { return cmp.Compare(a.CPUSeconds, b.CPUSeconds) })
		r := runs[len(runs)/2]
		r.Runs = cfg.repeat
		results = append(results, r)
		if cfg.json {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		}
	}
	if !cfg.json {
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "name\trows\tpartitions\tsorted\tms\tcpu ms\tMrows/s\tpeak MiB\tspilled MiB\tallocs/partition\t")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.4f\t\n", r.Name, r.Rows, r.Partitions, r.SortedInput,
				r.Seconds*1e3, r.CPUSeconds*1e3, r.RowsPerS/1e6, float64(r.PeakBytes)/(1<<20), float64(r.SpilledBytes)/(1<<20), r.AllocsPerPartition)
		}
		tw.Flush()
	}
	return nil
}

// runWindowCase runs one case; with profile set, it writes a CPU profile
// of the timed section (the run and reading its result) there.
func runWindowCase(ctx context.Context, c windowCase, containerDir string, grant int64, tmp, profile string) (windowResult, error) {
	q, err := sqlparse.Parse(c.sql)
	if err != nil {
		return windowResult{}, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return windowResult{}, err
	}
	var prof *os.File
	if profile != "" {
		if prof, err = os.Create(profile); err != nil {
			return windowResult{}, err
		}
		defer prof.Close()
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if prof != nil {
		if err := pprof.StartCPUProfile(prof); err != nil {
			return windowResult{}, err
		}
	}
	cpu0 := cputime.Process()
	start := time.Now()
	res, err := windower.Run(ctx, q, []string{containerDir}, windower.Options{Grant: grant, TempDir: tmp})
	if err != nil {
		return windowResult{}, err
	}
	var rows int64
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.Close()
			return windowResult{}, err
		}
		rows += rec.NumRows()
		rec.Release()
	}
	elapsed := time.Since(start)
	cpu := cputime.Process() - cpu0
	if prof != nil {
		pprof.StopCPUProfile()
	}
	runtime.ReadMemStats(&after)
	res.Close()
	st := res.Stats()
	r := windowResult{
		Query: c.sql, Name: c.name, Rows: rows, Partitions: st.Partitions, SortedInput: st.SortedInput,
		Seconds: elapsed.Seconds(), CPUSeconds: cpu.Seconds(), RowsPerS: float64(rows) / elapsed.Seconds(),
		PeakBytes: st.PeakBytes, GrantBytes: grant, SpilledBytes: st.SpilledBytes,
		Mallocs: after.Mallocs - before.Mallocs,
	}
	if st.Partitions > 0 {
		r.AllocsPerPartition = float64(r.Mallocs) / float64(st.Partitions)
	}
	return r, nil
}

// generateWindowTable writes table name with rows rows as one container at dir.
//
//	a:        a INT64, a permutation of 0..rows-1 (every value distinct), unsorted
//	a_sorted: the same, sorted on a
//	a_one:    a INT64, all 7 (one partition), unsorted
//	t:        g INT64 in [0, 1000), x INT64 random, ts TIMESTAMP(us) one row per ~1ms with jitter,
//	          s UTF8 nullable labels of varied length (columnar.GenLabels), k UTF8 fixed-width codes
//	          (columnar.GenCodes), the string columns of bench/ too; unsorted
//	big:      ts, x as in t; unsorted
func generateWindowTable(dir, name string, rows int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, uint64(len(name))))
	mem := memory.NewGoAllocator()
	ts := &arrow.TimestampType{Unit: arrow.Microsecond}
	var fields []arrow.Field
	var key columnar.SortKey
	switch name {
	case "a", "a_sorted", "a_one":
		fields = []arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}
		if name == "a_sorted" {
			key = columnar.SortKey{{Name: "a"}}
		}
	case "t":
		fields = []arrow.Field{{Name: "g", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Int64}, {Name: "ts", Type: ts},
			{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "k", Type: arrow.BinaryTypes.String}}
	case "big":
		fields = []arrow.Field{{Name: "ts", Type: ts}, {Name: "x", Type: arrow.PrimitiveTypes.Int64}}
	default:
		return fmt.Errorf("unknown table %q", name)
	}
	schema := arrow.NewSchema(fields, nil)
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: name, Projection: "p", ID: "c0", Schema: schema, SortKey: key})
	if err != nil {
		return err
	}
	var labels, codes []string
	var labelNull []bool
	if name == "t" {
		// Their own streams, so g, x and ts are what they were before s and k.
		labels, labelNull = columnar.GenLabels(rows, rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d)))
		codes = columnar.GenCodes(rows, rand.New(rand.NewPCG(seed, 0x14057b7ef767814f)))
	}
	var perm []int64
	if name == "a" || name == "a_sorted" {
		perm = make([]int64, rows)
		for i := range perm {
			perm[i] = int64(i)
		}
		if name == "a" {
			rng.Shuffle(rows, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
	}
	const batch = 65536
	for off := 0; off < rows; off += batch {
		n := min(batch, rows-off)
		b := array.NewRecordBuilder(mem, schema)
		for i := 0; i < n; i++ {
			r := off + i
			switch name {
			case "a", "a_sorted":
				b.Field(0).(*array.Int64Builder).Append(perm[r])
			case "a_one":
				b.Field(0).(*array.Int64Builder).Append(7)
			case "t":
				b.Field(0).(*array.Int64Builder).Append(int64(rng.IntN(1000)))
				b.Field(1).(*array.Int64Builder).Append(rng.Int64N(1_000_000))
				b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(r)*1000 + rng.Int64N(5000)))
				if labelNull[r] {
					b.Field(3).AppendNull()
				} else {
					b.Field(3).(*array.StringBuilder).Append(labels[r])
				}
				b.Field(4).(*array.StringBuilder).Append(codes[r])
			case "big":
				b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(r)*1000 + rng.Int64N(5000)))
				b.Field(1).(*array.Int64Builder).Append(rng.Int64N(1_000_000))
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			w.Abort()
			return err
		}
	}
	_, err = w.Commit()
	return err
}
