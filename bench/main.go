// Command bench measures strata side by side with DuckDB and PostgreSQL on the
// same data on the same machine, checks that they computed the same thing,
// and writes BENCHMARKS.md at the repository root with tables and charts.
//
// Usage (from the bench directory):
//
//	go run . [--quick] [--out DIR] [--only windows,mergeout,wal,store,spill,pgwire] [--threads 1,2]
//
// Six suites run:
//
//   - windows: the window query suite of the windower issue, on strata
//     and DuckDB (each with one thread and with all cores) and PostgreSQL
//     15, with every query's result compared across the systems;
//   - mergeout: strata's merger at several memory grants and table widths
//     against DuckDB re-sorting the same inputs (as Parquet) under the same
//     memory_limit, and against the codec floor (decompress every input block
//     and compress the output, with no merge);
//   - wal: bytes of write-ahead log per UPDATE for strata's walwriter and for
//     PostgreSQL on the same update workloads;
//   - store: strata alone, a few mergeout and window cases with their
//     inputs read from local directories and from an S3 server through a
//     depot, cold and warm: SeaweedFS (`weed mini`) when --weed names a
//     weed binary that is there (by default ../bin/weed), else gofakes3 in
//     this process; the report says which;
//   - spill: tables ten times larger than the grant (spill.go);
//   - pgwire: the SQL front door, strata's binaries deployed as processes
//     (../bin, make build): psycopg 3 streaming a window query's 2M rows
//     (--pgwire-rows 10000000 for the figure) from pgwire and from
//     PostgreSQL, and a small window query's latency through pgwire
//     against its window job's own time and PostgreSQL (pgwire.go).
//
// A peer that cannot run here (DuckDB fails to open, PostgreSQL binaries
// missing) is reported as skipped; no figure is ever made up. The bench is its
// own Go module so the peers' dependencies stay out of strata's binaries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := run
	if len(os.Args) > 1 && os.Args[1] == "mergeone" {
		os.Args = os.Args[1:]
		run = mergeOne
	}
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// options are the command-line settings of one run.
type options struct {
	quick       bool
	outDir      string   // scratch space for generated data; emptied at the start and the end
	keep        bool     // keep outDir after the run
	report      string   // path of BENCHMARKS.md
	charts      string   // directory for the PNG charts
	suites      []string // subset of windows, mergeout, wal
	pgBinDir    string   // where initdb, pg_ctl and postgres live
	results     string   // where the raw figures are written as JSON
	replot      bool     // render report and charts from results, measuring nothing
	profile     string   // directory for CPU profiles of strata's runs
	commit      string   // label of the strata version measured, when git cannot tell
	widths      []int    // mergeout widths instead of the mode's
	storeWidths []int    // the store suite's mergeout widths instead of the mode's
	threads     []int    // windower thread counts besides 1 and runtime.NumCPU()
	weed        string   // SeaweedFS binary the store suite serves S3 with, if it is there
	serverCPUs  string   // the CPUs the store suite's S3 server runs on (affinity.go)
	spill       spillOptions
	pgwire      pgwireOptions
	logger      *slog.Logger
}

var allSuites = []string{"windows", "mergeout", "wal", "store", "spill", "pgwire"}

func parseOptions(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	var only string
	fs.BoolVar(&o.quick, "quick", false, "a smaller run (a few minutes)")
	fs.StringVar(&o.outDir, "out", "out", "scratch directory for generated data (emptied at start and end)")
	fs.BoolVar(&o.keep, "keep", false, "keep the scratch directory after the run")
	fs.StringVar(&o.report, "report", filepath.Join("..", "BENCHMARKS.md"), "where to write the report")
	fs.StringVar(&o.charts, "charts", "charts", "directory for the PNG charts")
	fs.StringVar(&only, "only", strings.Join(allSuites, ","), "suites to run: "+strings.Join(allSuites, ","))
	fs.StringVar(&o.results, "results", "results.json", "where to write the raw figures (JSON)")
	fs.BoolVar(&o.replot, "replot", false, "re-render the report and charts from --results without measuring")
	fs.StringVar(&o.profile, "cpuprofile", "", "write CPU profiles of strata's mergeout cases and window queries to this directory")
	fs.StringVar(&o.commit, "commit", "", "the strata commit measured (default: from git)")
	fs.StringVar(&o.weed, "weed", filepath.Join("..", "bin", "weed"), "SeaweedFS `binary` the store suite runs its S3 server with (weed mini) when it is there (make local S3=1 builds it); otherwise, or with \"\", gofakes3 in this process")
	fs.StringVar(&o.serverCPUs, "store-server-cpus", serverCPUsAuto, "`CPUs` the store suite's SeaweedFS runs on, the bench on the others, as a server on a host of its own: auto (the last CPU, given two or more), shared (no pinning), or a list (\"1\", \"2-3\")")
	fs.StringVar(&o.pgBinDir, "pg-bin", "/usr/lib/postgresql/15/bin", "directory of the PostgreSQL 15 server binaries")
	threads := fs.String("threads", "", "windower thread counts of strata's window runs, comma-separated (always with 1 and the core count)")
	widths := fs.String("widths", "", "mergeout table widths, comma-separated (default: 100,200,400; 50,100 with --quick)")
	storeWidths := fs.String("store-widths", "", "the store suite's mergeout widths, comma-separated (default: 100,400; 50,100 with --quick)")
	verbose := fs.Bool("v", false, "debug logging")
	o.spill.register(fs)
	o.pgwire.register(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(only, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !contains(allSuites, s) {
			return o, fmt.Errorf("--only: unknown suite %q (want some of %s)", s, strings.Join(allSuites, ","))
		}
		o.suites = append(o.suites, s)
	}
	if o.serverCPUs != serverCPUsAuto && o.serverCPUs != serverCPUsShared {
		if _, err := parseCPUList(o.serverCPUs); err != nil {
			return o, fmt.Errorf("--store-server-cpus: %w", err)
		}
	}
	if err := o.spill.finish(&o); err != nil {
		return o, err
	}
	if err := o.pgwire.finish(&o); err != nil {
		return o, err
	}
	for flag, list := range map[string]*string{"widths": widths, "store-widths": storeWidths} {
		for _, w := range strings.Split(*list, ",") {
			if w = strings.TrimSpace(w); w == "" {
				continue
			}
			n, err := strconv.Atoi(w)
			if err != nil || n < 2 {
				return o, fmt.Errorf("--%s: %q is not a width of at least 2 columns", flag, w)
			}
			if flag == "widths" {
				o.widths = append(o.widths, n)
			} else {
				o.storeWidths = append(o.storeWidths, n)
			}
		}
	}
	for _, t := range strings.Split(*threads, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > 64 {
			return o, fmt.Errorf("--threads: %q is not a thread count from 1 to 64", t)
		}
		o.threads = append(o.threads, n)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	o.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return o, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	if o.replot {
		rep, err := readResults(o.results)
		if err != nil {
			return err
		}
		return render(o, rep)
	}
	sz := sizesFor(o.quick)
	sz.ProfileDir = o.profile
	if len(o.widths) > 0 {
		sz.MergeWidths = o.widths
	}
	if len(o.storeWidths) > 0 {
		sz.StoreWidths = o.storeWidths
	}
	sz.Threads = o.threads
	log := o.logger

	if err := os.RemoveAll(o.outDir); err != nil {
		return fmt.Errorf("empty scratch directory %s: %w", o.outDir, err)
	}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return fmt.Errorf("create scratch directory: %w", err)
	}
	outAbs, err := filepath.Abs(o.outDir)
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(outAbs)
	}

	rep := &report{
		Started: time.Now().UTC(),
		Command: commandLine(o),
		Quick:   o.quick,
		Sizes:   sz,
		Machine: describeMachine(ctx),
	}

	peers := startPeers(ctx, o, outAbs)
	defer peers.Close()
	rep.Peers = peers.describe(ctx)
	if o.commit != "" {
		rep.Peers[0].Version = "commit " + o.commit
	}
	for _, p := range rep.Peers {
		log.Info("peer", "name", p.Name, "version", p.Version, "skipped", p.Skipped)
	}

	for _, s := range o.suites {
		start := time.Now()
		log.Info("suite start", "suite", s)
		dir := filepath.Join(outAbs, s)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		switch s {
		case "windows":
			rep.Windows, err = runWindowSuite(ctx, log, sz, dir, peers)
		case "mergeout":
			rep.Mergeout, err = runMergeoutSuite(ctx, log, sz, dir, peers)
		case "wal":
			rep.WAL, err = runWALSuite(ctx, log, sz, dir, peers)
		case "store":
			rep.Store, err = runStoreSuite(ctx, log, sz, dir, o.weed, o.serverCPUs)
		case "spill":
			rep.Spill, err = runSpillSuite(ctx, log, o, sz, dir)
		case "pgwire":
			rep.Pgwire, err = runPgwireSuite(ctx, log, o, dir, peers)
		}
		if err != nil {
			return fmt.Errorf("suite %s: %w", s, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("remove suite scratch", "dir", dir, "err", err)
		}
		log.Info("suite done", "suite", s, "seconds", time.Since(start).Seconds())
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	rep.Finished = time.Now().UTC()
	rep.Machine.LoadEnd = loadAverage()
	if err := writeResults(o.spill.resultsPath(o), rep); err != nil {
		return err
	}
	if err := render(o, rep); err != nil {
		return err
	}
	if n := rep.failures(); n > 0 {
		return fmt.Errorf("%d result mismatches or failures (see %s)", n, o.report)
	}
	return nil
}

// render draws the charts and writes the report.
func render(o options, rep *report) error {
	rep, err := o.spill.withLarge(o, rep)
	if err != nil {
		return err
	}
	charts, err := drawCharts(rep, o.charts)
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	rel, err := chartPathsRelativeTo(filepath.Dir(o.report), charts)
	if err != nil {
		return err
	}
	rep.Charts = rel
	if err := writeReport(o.report, rep); err != nil {
		return fmt.Errorf("write %s: %w", o.report, err)
	}
	o.logger.Info("report written", "path", o.report, "charts", len(charts), "seconds", rep.Finished.Sub(rep.Started).Seconds())
	return nil
}

// commandLine is the command a reader runs to reproduce the report.
func commandLine(o options) string {
	var b strings.Builder
	b.WriteString("cd bench && go run .")
	if o.quick {
		b.WriteString(" --quick")
	}
	if len(o.suites) != len(allSuites) {
		b.WriteString(" --only " + strings.Join(o.suites, ","))
	}
	for _, f := range []struct {
		flag   string
		widths []int
	}{{"widths", o.widths}, {"store-widths", o.storeWidths}} {
		if len(f.widths) > 0 {
			ws := make([]string, len(f.widths))
			for i, w := range f.widths {
				ws[i] = strconv.Itoa(w)
			}
			b.WriteString(" --" + f.flag + " " + strings.Join(ws, ","))
		}
	}
	if len(o.threads) > 0 {
		ts := make([]string, len(o.threads))
		for i, t := range o.threads {
			ts[i] = strconv.Itoa(t)
		}
		b.WriteString(" --threads " + strings.Join(ts, ","))
	}
	if contains(o.suites, "pgwire") {
		b.WriteString(o.pgwire.args(o))
	}
	return b.String()
}
