package main

import (
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
)

// The pgwire suite is selected with --only, its sizes follow the mode and
// its flags, and a non-default size is in the report's command.
func TestPgwireOptions(t *testing.T) {
	o, err := parseOptions([]string{"--only", "pgwire"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.suites) != 1 || o.suites[0] != "pgwire" || o.pgwire.rows != 2_000_000 || o.pgwire.repeats != 3 || o.pgwire.latencyRuns != 100 {
		t.Fatalf("defaults: %v %+v", o.suites, o.pgwire)
	}
	if got, want := commandLine(o), "cd bench && go run . --only pgwire"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	if !needsPostgres(o.suites) {
		t.Error("the pgwire suite does not start PostgreSQL")
	}
	o, err = parseOptions([]string{"--quick", "--only", "pgwire"})
	if err != nil || o.pgwire.rows != 200_000 || o.pgwire.repeats != 2 || o.pgwire.latencyRuns != 30 {
		t.Fatalf("--quick: %+v %v", o.pgwire, err)
	}
	o, err = parseOptions([]string{"--only", "pgwire", "--pgwire-rows", "10_000_000", "--pgwire-repeats", "1", "--pgwire-bin", "/x/bin"})
	if err != nil || o.pgwire.rows != 10_000_000 || o.pgwire.repeats != 1 || o.pgwire.bin != "/x/bin" {
		t.Fatalf("--pgwire-rows 10_000_000: %+v %v", o.pgwire, err)
	}
	if got, want := commandLine(o), "cd bench && go run . --only pgwire --pgwire-rows 10000000 --pgwire-repeats 1"; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	// Other suites' command lines do not mention it.
	o, _ = parseOptions([]string{"--only", "wal", "--pgwire-rows", "1000"})
	if strings.Contains(commandLine(o), "pgwire") {
		t.Errorf("command %q names the pgwire suite", commandLine(o))
	}
	for _, bad := range [][]string{{"--pgwire-rows", "1234"}, {"--pgwire-rows", "10"}, {"--pgwire-rows", "x"}, {"--pgwire-repeats", "-1"}} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestDigitsUpTo(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{{0, 0}, {9, 9}, {10, 11}, {99, 189}, {100, 192}, {2_000_000, 12_888_896}} {
		if got := digitsUpTo(c.n); got != c.want {
			t.Errorf("digitsUpTo(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// The jobs strata ops shows: window jobs done after a time, oldest first.
func TestParseWindowJobs(t *testing.T) {
	out := `[
  {"start": "2026-12-03T19:30:59.87Z", "end": "2026-12-03T19:31:00.5Z", "status": "done", "operation": "window", "duration_seconds": 0.5},
  {"start": "2026-12-03T19:30:58Z", "end": "2026-12-03T19:30:59Z", "status": "done", "operation": "window", "duration_seconds": 0.25},
  {"start": "2026-12-03T19:30:57Z", "end": "2026-12-03T19:30:58Z", "status": "done", "operation": "window", "duration_seconds": 9},
  {"start": "2026-12-03T19:31:01Z", "end": null, "status": "running", "operation": "window", "duration_seconds": null},
  {"start": "2026-12-03T19:31:01Z", "end": "2026-12-03T19:31:02Z", "status": "done", "operation": "mergeout", "duration_seconds": 1}
]`
	since, _ := time.Parse(time.RFC3339, "2026-12-03T19:30:58.5Z")
	got, err := parseWindowJobs([]byte(out), since)
	if err != nil || len(got) != 2 || got[0] != 0.25 || got[1] != 0.5 {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := parseWindowJobs([]byte("no json"), since); err == nil {
		t.Error("garbage parsed")
	}
}

// PostgreSQL's copy of a table is read from strata's containers: every
// row, NULLs kept.
func TestStrataRows(t *testing.T) {
	dir := t.TempDir()
	if _, err := columnar.Generate(dir, columnar.GenOptions{Table: "big", Projection: "p", Columns: 2, Containers: 3, RowsPerContainer: 700, BlockRows: 256}); err != nil {
		t.Fatal(err)
	}
	src, err := openStrataRows(dir + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	rows, nulls := 0, 0
	for src.Next() {
		v, _ := src.Values()
		if _, ok := v[0].(int64); !ok {
			t.Fatalf("k0 %T", v[0])
		}
		if v[1] == nil {
			nulls++
		} else if _, ok := v[1].(string); !ok {
			t.Fatalf("c001_utf8 %T", v[1])
		}
		rows++
	}
	if src.Err() != nil || rows != 2100 || nulls == 0 || src.textBytes == 0 {
		t.Fatalf("%d rows, %d NULL, %d bytes: %v", rows, nulls, src.textBytes, src.Err())
	}
	if _, err := openStrataRows(dir + "/absent"); err == nil {
		t.Error("a table without containers opened")
	}
}

func pgwireReport() *report {
	sum := pgwireSum{Rows: 1000, SumK0: 5, SumRN: 500500, Nulls: 10, Chars: 800, Hash: 42}
	return &report{Command: "cd bench && go run . --only pgwire", Pgwire: &pgwireSuite{
		Rows: 1000, SmallRows: pgwireSmallRows, StreamQuery: pgwireStreamQuery, SmallQuery: pgwireSmallQuery,
		Client: "psycopg 3.1.7, Python 3.11.2", Deployment: "three processes", ValueBytes: 10_000_000,
		Stream: []pgwireStream{
			{System: sysPgwire, Pair: 0, Seconds: 2, FirstRow: 0.5, JobSecond: 0.4, ServerCPU: 0.3, ClientCPU: 1.9, ClientSys: 0.25, Sum: sum},
			{System: sysPostgres, Pair: 0, Seconds: 3, FirstRow: 0.1, Sum: sum},
			{System: sysPostgres, Pair: 1, Seconds: 2.5, FirstRow: 0.1, Sum: sum},
			{System: sysPgwire, Pair: 1, Seconds: 2.4, FirstRow: 0.5, JobSecond: 0.4, Sum: sum},
		},
		Latency: map[string]pgwireLatency{
			sysPgwire:    {Runs: 100, P50: 30, Min: 20, P90: 50, Rows: 15},
			sysPgwireJob: {Runs: 100, P50: 20, Min: 10, P90: 40, Rows: 15},
			sysPostgres:  {Runs: 100, P50: 1, Min: 0.5, P90: 2, Rows: 15},
		},
	}}
}

// The report holds the suite to the goals and shows each run.
func TestRenderPgwire(t *testing.T) {
	rep := pgwireReport()
	text, _ := renderTo(t, rep)
	for _, want := range []string{
		"## The SQL front door (pgwire)",
		"| pgwire: a 1k-row result to psycopg 3 faster than PostgreSQL 15 | best 500 rows/s (5.0 MB/s) against 400 rows/s (4.0 MB/s); PostgreSQL/strata by pair: 1.50x, 1.04x | yes |",
		"| pgwire: psycopg reads the same rows from strata as from PostgreSQL (count and checksum) | 4 of 4 runs | yes |",
		"| pgwire: a small window query within 1.2x of its window job's time | median 30.0 ms through pgwire, 20.0 ms the job: 1.50x | **no** |",
		"| 1 | strata through pgwire | 2.00 | 0.500 | 0.40 | 500 | 5.0 | 0.3 | 1.9 (0.2) | 0.0 | same |",
		"| 1 | PostgreSQL | 3.00 | 0.100 | - | 333 | 3.3 | - | - | 0.0 | same |",
		"| strata's window job | 20.0 | 10.0 | 40.0 | 100 | 1.00x |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if n := rep.failures(); n != 0 {
		t.Errorf("%d failures", n)
	}
	// A run that read other rows, or failed, is a failure, and the goal
	// is met in part when strata is slower in a pair.
	rep.Pgwire.Stream[3].Sum.Hash++
	rep.Pgwire.Stream[2].Seconds = 1
	rep.Pgwire.Stream = append(rep.Pgwire.Stream, pgwireStream{System: sysPgwire, Pair: 2, Err: "boom"})
	text, _ = renderTo(t, rep)
	for _, want := range []string{"| 3 of 5 runs | **no** |", "**differ** (1000 rows)", "- pair 3, strata through pgwire: boom", "PostgreSQL/strata by pair: 1.50x, 0.42x | partly |"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if n := rep.failures(); n != 2 {
		t.Errorf("%d failures, want 2", n)
	}
	// A suite that could not deploy says why.
	rep = &report{Pgwire: &pgwireSuite{Err: "pgwire is not built in /x (make build)"}}
	text, _ = renderTo(t, rep)
	if !strings.Contains(text, "not measured: pgwire is not built in /x (make build) | **no** |") || rep.failures() != 1 {
		t.Errorf("report of a failed deployment:\n%s", text)
	}
	// Without the binaries (or PostgreSQL) the suite is skipped, which is
	// no failure.
	rep = &report{Pgwire: &pgwireSuite{Skipped: "pgwire is not built in /x (make build)"}}
	text, _ = renderTo(t, rep)
	if !strings.Contains(text, "| skipped: pgwire is not built in /x (make build) | - |") || !strings.Contains(text, "Skipped: pgwire is not built") || rep.failures() != 0 {
		t.Errorf("report of a skipped suite (%d failures):\n%s", rep.failures(), text)
	}
	if err := haveBinaries(t.TempDir()); err == nil || !strings.Contains(err.Error(), "scheduler is not built") {
		t.Errorf("an empty directory: %v", err)
	}
}

func TestProcCPU(t *testing.T) {
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0"
	if got := procCPU(stat); got != 3.25 {
		t.Errorf("%v, want 3.25", got)
	}
	if procCPU("garbage") != 0 {
		t.Error("garbage read")
	}
}

func TestFormatThousands(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 55024.4: "55,024", 1234567: "1,234,567"} {
		if got := formatThousands(f); got != want {
			t.Errorf("%v: %q, want %q", f, got, want)
		}
	}
}
