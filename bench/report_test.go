package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWindowSuiteQueries: the comparison runs Q0's one-partition twin and
// the string queries, which the targets and the store suite name.
func TestWindowSuiteQueries(t *testing.T) {
	var names []string
	for _, q := range windowQueries() {
		names = append(names, q.Name)
	}
	want := append([]string{"q0_presorted", "q0_one_partition", "q0_one_partition_distinct", "q0_one_partition_sorted", "count_by_s"}, scalingQueries...)
	want = append(want, storeQueries...)
	for _, n := range want {
		if !slices.Contains(names, n) {
			t.Errorf("window suite lacks %s: %v", n, names)
		}
	}
}

func TestStrataThreadCounts(t *testing.T) {
	n := runtime.NumCPU()
	got := strataThreadCounts([]int{4, 1, 0, 4})
	want := []int{1, 4, n}
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) {
		t.Fatalf("strataThreadCounts = %v, want %v", got, want)
	}
	if strataSystem(1) != sysStrata {
		t.Errorf("one thread named %q", strataSystem(1))
	}
	if n > 1 && strataSystem(n) != sysStrataAll {
		t.Errorf("%d threads named %q", n, strataSystem(n))
	}
	if n != 3 && strataSystem(3) != "strata 3 threads" {
		t.Errorf("3 threads named %q", strataSystem(3))
	}
	if _, err := parseOptions([]string{"--threads", "1,0"}); err == nil {
		t.Error("--threads 1,0 accepted")
	}
	o, err := parseOptions([]string{"--threads", "1, 2"})
	if err != nil || !slices.Equal(o.threads, []int{1, 2}) {
		t.Fatalf("--threads 1, 2: %v %v", o.threads, err)
	}
	if _, err := parseOptions([]string{"--only", "store"}); err != nil {
		t.Fatalf("--only store: %v", err)
	}
	// The store suite's widths are their own, and said in the command.
	o, err = parseOptions([]string{"--only", "store", "--store-widths", "400", "--widths", "50"})
	if err != nil || !slices.Equal(o.storeWidths, []int{400}) || !slices.Equal(o.widths, []int{50}) {
		t.Fatalf("--store-widths 400 --widths 50: %v %v %v", o.storeWidths, o.widths, err)
	}
	if got, want := commandLine(o), "cd bench && go run . --only store --widths 50 --store-widths 400"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	if _, err := parseOptions([]string{"--store-widths", "1"}); err == nil {
		t.Error("--store-widths 1 accepted")
	}
}

// renderTo renders rep as --replot does, into a temporary directory, and
// returns the report's text and the charts drawn.
func renderTo(t *testing.T, rep *report) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	o := options{report: filepath.Join(dir, "BENCHMARKS.md"), charts: filepath.Join(dir, "bench", "charts"),
		logger: slog.New(slog.DiscardHandler)}
	if err := render(o, rep); err != nil {
		t.Fatalf("render: %v", err)
	}
	b, err := os.ReadFile(o.report)
	if err != nil {
		t.Fatal(err)
	}
	charts, _ := filepath.Glob(filepath.Join(o.charts, "*.png"))
	for i := range charts {
		charts[i] = filepath.Base(charts[i])
	}
	return string(b), charts
}

// TestReplotResultsBeforeStore: results written before strata ran on all
// cores and before the store suite still render, the new columns, rows,
// sections and charts absent.
func TestReplotResultsBeforeStore(t *testing.T) {
	rep, err := readResults("testdata/results-before-store.json")
	if err != nil {
		t.Fatal(err)
	}
	text, charts := renderTo(t, rep)
	for _, absent := range []string{sysStrataAll, "Containers in an object store", "store:", chartScaling, "all cores / one thread"} {
		if strings.Contains(text, absent) {
			t.Errorf("report of old results mentions %q", absent)
		}
	}
	if !strings.Contains(text, "## Window functions") || !strings.Contains(text, "## Mergeout") {
		t.Error("report of old results lacks its sections")
	}
	if want := []string{chartMergeout, chartWAL, chartWindows}; !slices.Equal(charts, want) {
		t.Errorf("charts %v, want %v", charts, want)
	}
}

func timed(s float64) measure { return measure{Seconds: s, Runs: 2} }

// newDataReport is a report with every new figure: strata at one thread,
// two and all cores, and a store suite.
func newDataReport() *report {
	cores := max(runtime.NumCPU(), 4) // a machine with more cores than this one, as --replot may render
	systems := []string{sysStrata, "strata 2 threads", sysStrataAll, sysStrataCold, sysDuck1, sysDuckAll, sysPostgres}
	w := &windowSuite{Rows: 1000, Groups: 10, Repeats: 2, Limit: time.Second, Systems: systems,
		StrataThreads: map[string]int{sysStrata: 1, "strata 2 threads": 2, sysStrataAll: cores, sysStrataCold: 1}}
	for _, q := range windowQueries() {
		times := map[string]measure{sysStrata: timed(1), "strata 2 threads": timed(0.6), sysStrataAll: timed(0.3), sysStrataCold: timed(2),
			sysDuck1: timed(5), sysDuckAll: timed(2), sysPostgres: timed(20)}
		checks := []resultCheck{{A: sysStrata, B: sysDuckAll, OK: true}, {A: sysStrata, B: sysPostgres, OK: true}, {A: sysDuckAll, B: sysPostgres, OK: true}}
		w.Results = append(w.Results, windowResult{Query: q, Times: times, Checks: checks})
	}
	reads := func(local, cold, warm float64, fetched int64) []storeRead {
		return []storeRead{{Read: readLocal, Time: timed(local), PeakBytes: 10 * mib},
			{Read: readCold, Time: timed(cold), BytesFetched: fetched, BlocksFetched: 7, PeakBytes: 12 * mib},
			{Read: readWarm, Time: timed(warm), PeakBytes: 10 * mib}}
	}
	st := &storeSuite{ServerName: serverGofakes3, Server: "gofakes3", Repeats: 2, Cases: []storeCase{
		{Kind: storeMergeout, Name: "100 columns", Width: 100, Containers: 32, RowsPerContainer: 8192, CompressedBytes: 100 * mib, Grant: 32 * mib,
			Reads: reads(1, 1.2, 1.01, 100*mib)},
		{Kind: storeWindow, Name: "rownum_rank", Containers: 1, RowsPerContainer: 1000, CompressedBytes: 9 * mib, Grant: gib,
			Reads: reads(0.1, 0.2, 0.1, 2*mib)},
		{Kind: storeMergeout, Name: "400 columns", Err: "disk full"},
	}}
	return &report{Started: time.Now(), Finished: time.Now(), Command: "cd bench && go run .",
		Machine: machine{Cores: cores}, Windows: w, Store: st}
}

// throughResults writes rep as a results file and reads it back.
func throughResults(t *testing.T, rep *report) *report {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.json")
	if err := writeResults(path, rep); err != nil {
		t.Fatal(err)
	}
	again, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	return again
}

// A store suite whose server ran on a CPU of its own says where each ran,
// in its targets and above its table, and keeps it through results.json.
func TestRenderStoreOnItsOwnCPUs(t *testing.T) {
	rep := newDataReport()
	rep.Store.ServerName, rep.Store.Server = serverSeaweedFS, "SeaweedFS (`weed version 4.53`)"
	rep.Store.CPUs = cpuSplit{Server: []int{1}, Job: []int{0}}
	text, _ := renderTo(t, throughResults(t, rep))
	for _, want := range []string{
		"| store: cold depot within 1.3x of local (SeaweedFS on CPU 1, the job on CPU 0) | largest 2.00x",
		"The S3 server is SeaweedFS (`weed version 4.53`). It runs on CPU 1 and the bench on CPU 0 (GOMAXPROCS 1), local, cold and warm runs alike, as if the server were on a host of its own",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(text, "shares the machine's") {
		t.Error("the report says the server shares the job's cores")
	}
}

func TestRenderNewFigures(t *testing.T) {
	rep := newDataReport()
	text, charts := renderTo(t, rep)
	for _, want := range []string{
		"| strata all cores s |",
		"DuckDB all cores / strata all cores |",
		"| 6.67x |", // DuckDB all cores 2 s / strata all cores 0.3 s
		"| windows: every query >= 3x faster than DuckDB with all cores, strata on all cores | smallest 6.67x",
		"| windows: every query >= 3x faster than DuckDB with one thread |",
		"| strata no cache s |",
		"| windows: every query >= 3x faster than DuckDB with one thread, strata without a block cache | smallest 2.50x",
		"| windows (strata alone): all cores / one thread >= 0.8 x cores on rownum_rank, sum_rows10, lag_lead | rownum_rank 3.33x, sum_rows10 3.33x, lag_lead 3.33x",
		"Q0 within 1.3x of q0_one_partition_distinct",
		"| windows (strata alone): Q0 presorted within 1.3x of q0_one_partition_sorted (one partition over the same stored column) | 1.00x | yes |",
		"| store: cold depot within 1.3x of local (gofakes3) | largest 2.00x (`rownum_rank`); 1 case without a figure | **no** |",
		"| store: warm depot within 1.05x of local (gofakes3) | largest 1.01x (mergeout of 100 columns); 1 case without a figure | **no** |",
		"| store: bytes fetched within 5% of compressed bytes (cold mergeouts, which read every column) | 100 columns: 100MiB of 100MiB (+0.0%); 400 columns not measured | **no** |",
		"| store: peak within the grant | largest 38% of the grant (mergeout of 100 columns, cold: 12MiB of 32MiB) | yes |",
		"## Containers in an object store",
		"shares the machine's",
		"| mergeout of 100 columns | 32 x 8192 rows | 100MiB | 32MiB | cold | 1.20 | 1.20x | 100MiB | 100.0% | 7 | 12MiB |",
		"- mergeout of 400 columns: disk full",
		"(bench/charts/" + chartScaling + ")",
		"(bench/charts/" + chartStore + ")",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(text, "need 3.20x on 4 cores") && rep.Machine.Cores == 4 {
		t.Errorf("scaling target does not give what it needs")
	}
	for _, c := range []string{chartScaling, chartStore, chartWindows} {
		if !slices.Contains(charts, c) {
			t.Errorf("chart %s not drawn: %v", c, charts)
		}
	}
	if n := rep.failures(); n != 1 {
		t.Errorf("failures = %d, want 1 (the store case that could not be set up)", n)
	}

	// A results file of this shape renders the same after a round trip.
	again := throughResults(t, rep)
	var a, b bytes.Buffer
	rep.render(&a)
	again.render(&b)
	if a.String() != b.String() {
		t.Error("report differs after a round trip through results.json")
	}
}

// TestStoreSuiteTiny runs the store suite on tiny data against the S3
// server in process: every read succeeds, a cold mergeout fetches its
// inputs' compressed bytes, a warm one and a local one fetch nothing, and
// a cold window query fetches the columns it reads.
func TestStoreSuiteTiny(t *testing.T) {
	for _, kv := range s3Env {
		k, _, _ := strings.Cut(kv, "=")
		t.Setenv(k, os.Getenv(k)) // restored when the test ends
	}
	sz := sizes{StoreWidths: []int{6}, StoreContainers: 3, StoreRows: 700, StoreGrant: 32 * mib,
		StoreWindowRows: 3000, WindowGroups: 10, StoreRepeats: 1}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := runStoreSuite(context.Background(), log, sz, t.TempDir(), "", serverCPUsAuto)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 1+len(storeQueries) {
		t.Fatalf("%d cases, want %d", len(s.Cases), 1+len(storeQueries))
	}
	for _, c := range s.Cases {
		if c.Err != "" {
			t.Fatalf("%s: %s", c.Name, c.Err)
		}
		if c.CompressedBytes == 0 || len(c.Reads) != len(storeReads) {
			t.Fatalf("%s: %d compressed bytes, %d reads", c.Name, c.CompressedBytes, len(c.Reads))
		}
		for _, r := range c.Reads {
			if !r.Time.ok() || r.Time.Runs != 1 {
				t.Fatalf("%s, %s: %+v", c.Name, r.Read, r.Time)
			}
			if r.PeakBytes <= 0 || r.PeakBytes > c.Grant {
				t.Errorf("%s, %s: peak %d of a %d grant", c.Name, r.Read, r.PeakBytes, c.Grant)
			}
		}
		local, _ := c.read(readLocal)
		cold, _ := c.read(readCold)
		warm, _ := c.read(readWarm)
		if local.BytesFetched != 0 || warm.BytesFetched != 0 {
			t.Errorf("%s: local fetched %d bytes, warm %d", c.Name, local.BytesFetched, warm.BytesFetched)
		}
		switch c.Kind {
		case storeMergeout:
			if cold.BytesFetched != c.CompressedBytes {
				t.Errorf("%s: cold fetched %d bytes of %d compressed", c.Name, cold.BytesFetched, c.CompressedBytes)
			}
		case storeWindow:
			if cold.BytesFetched <= 0 || cold.BytesFetched > c.CompressedBytes {
				t.Errorf("%s: cold fetched %d bytes of %d compressed", c.Name, cold.BytesFetched, c.CompressedBytes)
			}
		}
	}
	text, _ := renderTo(t, &report{Store: s, Machine: machine{Cores: runtime.NumCPU()}})
	if !strings.Contains(text, "| store: bytes fetched within 5% of compressed bytes (cold mergeouts, which read every column) | 6 columns: ") {
		t.Errorf("report of the tiny store suite:\n%s", text)
	}
}
