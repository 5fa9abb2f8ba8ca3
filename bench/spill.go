package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

// The spill suite: the window queries that matter for spilling over a
// table ten (make bench) or a hundred (make bench-large) times larger
// than the grant, strata under a 256MiB grant (and, for the ratio, with a
// grant the run fits in) against DuckDB with memory_limit = the grant and
// a temp directory, and PostgreSQL with work_mem = the grant. Results are
// compared by count and checksum (spillsum.go).

// spillOptions are the suite's command-line settings.
type spillOptions struct {
	rows         []int
	grant        int64
	fitGrant     int64
	limit        time.Duration // 0: by size
	repeats      int           // runs of strata and DuckDB, the best kept; 0: by size
	cache        string        // keep the generated data here and reuse it; "": the scratch directory
	large        bool          // make bench-large
	largeResults string        // where --large writes its figures, and where the report reads them
	queries      []string      // a subset of spillQueries (--spill-queries)
}

// The names of strata's in-memory runs.
const (
	sysStrataFit    = "strata in memory"
	sysStrataFitAll = "strata in memory, all cores"
)

// spillQueries are the suite's queries with their string outputs (hashed
// in the checksum).
var spillQueries = []spillQuery{
	{"q0_unsorted", nil},
	{"rownum_rank", nil},
	{"sum_rows10", nil},
	{"lag_lead", nil},
	{"first_value_s", []string{"fv"}},
	{"count_by_s", []string{"s"}},
}

type spillQuery struct {
	name    string
	strings []string
}

func (so *spillOptions) register(fs *flag.FlagSet) {
	fs.Func("spill-rows", "row counts of the spill suite, comma-separated (default 10000000; 1000000 with --quick; 100000000 with --large)", func(v string) error {
		so.rows = nil
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
			if err != nil || n < 1000 {
				return fmt.Errorf("%q is not a row count of at least 1000", f)
			}
			so.rows = append(so.rows, n)
		}
		return nil
	})
	fs.Func("spill-grant", "strata's grant, DuckDB's memory_limit and PostgreSQL's work_mem in the spill suite, in MiB (default 256; 32 with --quick)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 8 {
			return fmt.Errorf("%q is not a grant of at least 8 MiB", v)
		}
		so.grant = n * mib
		return nil
	})
	fs.Func("spill-fit-grant", "strata's grant for the in-memory runs of the spill suite, in MiB (default 4096)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 8 {
			return fmt.Errorf("%q is not a grant of at least 8 MiB", v)
		}
		so.fitGrant = n * mib
		return nil
	})
	fs.Func("spill-queries", "only these queries of the spill suite, comma-separated", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			if !slices.ContainsFunc(spillQueries, func(q spillQuery) bool { return q.name == f }) {
				return fmt.Errorf("%q is not a query of the spill suite", f)
			}
			so.queries = append(so.queries, f)
		}
		return nil
	})
	fs.IntVar(&so.repeats, "spill-repeats", 0, "runs of each strata and DuckDB query in the spill suite, the fastest kept (default: 3 up to 10M rows, 1 above); PostgreSQL runs once")
	fs.DurationVar(&so.limit, "spill-limit", 0, "time limit of one query run in the spill suite (default: the suite's, 60s; 10m over 10M rows)")
	fs.StringVar(&so.cache, "spill-cache", "", "keep the spill suite's data (strata container, DuckDB database, PostgreSQL cluster) in this directory and reuse it across runs (default: generated into --out and removed)")
	fs.BoolVar(&so.large, "large", false, "make bench-large: only the spill suite, at 100M rows unless --spill-rows says otherwise, its data cached (--spill-cache, default $XDG_CACHE_HOME/strata-bench), figures written to --large-results and the report re-rendered with --results")
	fs.StringVar(&so.largeResults, "large-results", "results_large.json", "figures of the last --large run; the report draws them beside the others when the file is there")
}

// finish applies the mode's defaults once the flags are parsed.
func (so *spillOptions) finish(o *options) error {
	if so.grant == 0 {
		so.grant = 256 * mib
		if o.quick {
			so.grant = 32 * mib
		}
	}
	if so.fitGrant == 0 {
		so.fitGrant = 4 * gib
	}
	if !so.large {
		if len(so.rows) == 0 {
			so.rows = []int{10_000_000}
			if o.quick {
				so.rows = []int{1_000_000}
			}
		}
		return nil
	}
	o.suites = []string{"spill"}
	if len(so.rows) == 0 {
		so.rows = []int{100_000_000}
	}
	if so.cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("--large: no --spill-cache and no home directory: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		so.cache = filepath.Join(base, "strata-bench")
	}
	return nil
}

// limitFor is the time limit of one run over rows rows.
func (so *spillOptions) limitFor(rows int, sz sizes) time.Duration {
	switch {
	case so.limit > 0:
		return so.limit
	case rows > 10_000_000:
		return 10 * time.Minute
	}
	return sz.QueryLimit
}

// repeatsFor is how many times strata and DuckDB run each query over
// rows rows; PostgreSQL, ten times slower, runs it once.
func (so *spillOptions) repeatsFor(rows int) int {
	switch {
	case so.repeats > 0:
		return so.repeats
	case rows > 10_000_000:
		return 1
	}
	return 3
}

// spillSuite is the outcome of the spill suite: one run per row count.
type spillSuite struct {
	Runs []*spillRun
}

// spillRun is the suite at one row count.
type spillRun struct {
	Rows, Groups    int
	Grant, FitGrant int64
	Limit           time.Duration
	Repeats         int
	Systems         []string
	StrataThreads   map[string]int
	Results         []spillResult
	Notes           []string
	// Where and when it ran: a --large run is drawn in a report made on
	// another day, perhaps on another host.
	Started            time.Time
	Seconds            float64 // the whole run, loading included
	LoadSeconds        float64 // generating and loading the data not in the cache
	Machine            string
	LoadStart, LoadEnd float64
	Cores              int
}

// spillResult is one query's figures.
type spillResult struct {
	Query  windowQuery
	Times  map[string]measure
	Stats  map[string]spillStats // strata's runs
	Sums   map[string]spillSum   // each system's count and checksum (last run)
	Checks []resultCheck
}

// spillStats are the windower's figures of a strata run.
type spillStats struct {
	PeakBytes, SpilledBytes int64
	Grant                   int64
}

// spillRunner is one system of the suite.
type spillRunner struct {
	name  string
	skip  string
	once  bool  // one run whatever the repeats
	grant int64 // strata's grant: timed under its worker's collector (bestOfUnderGrant); 0 for a peer
	prep  func(context.Context) error
	timed func(context.Context, windowQuery, []string) (spillSum, *spillStats, error)
}

func runSpillSuite(ctx context.Context, log *slog.Logger, o options, sz sizes, dir string) (*spillSuite, error) {
	suite := &spillSuite{}
	for _, rows := range o.spill.rows {
		r, err := runSpillRows(ctx, log, o, sz, dir, rows)
		if err != nil {
			return nil, err
		}
		suite.Runs = append(suite.Runs, r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return suite, nil
}

func runSpillRows(ctx context.Context, log *slog.Logger, o options, sz sizes, scratch string, rows int) (*spillRun, error) {
	so := o.spill
	start := time.Now()
	m := describeMachine(ctx)
	run := &spillRun{Rows: rows, Groups: sz.WindowGroups, Grant: so.grant, FitGrant: so.fitGrant, Limit: so.limitFor(rows, sz), Repeats: so.repeatsFor(rows),
		StrataThreads: map[string]int{}, Started: start.UTC(), Machine: m.String(), LoadStart: m.LoadStart, Cores: runtime.NumCPU()}
	t := spillTable{N: rows, Groups: sz.WindowGroups, Seed: 20260101}
	dataDir := filepath.Join(scratch, fmt.Sprintf("w%d", rows))
	cached := so.cache != ""
	if cached {
		dataDir = filepath.Join(so.cache, fmt.Sprintf("w%d-g%d-v%d", rows, t.Groups, spillGenVersion))
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	tmp := filepath.Join(scratch, fmt.Sprintf("spill%d", rows))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	loadStart := time.Now()
	var runners []spillRunner

	// strata.
	strataDir := filepath.Join(dataDir, "strata")
	strataErr := spillReady(dataDir, "strata", func() error {
		os.RemoveAll(strataDir)
		return writeSpillContainer(ctx, t, filepath.Join(strataDir, "c0001"))
	})
	for _, c := range []struct {
		name    string
		threads int
		grant   int64
	}{{sysStrata, 1, so.grant}, {sysStrataAll, runtime.NumCPU(), so.grant}, {sysStrataFit, 1, so.fitGrant}, {sysStrataFitAll, runtime.NumCPU(), so.fitGrant}} {
		run.StrataThreads[c.name] = c.threads
		if strataErr != nil {
			runners = append(runners, spillRunner{name: c.name, skip: strataErr.Error()})
			continue
		}
		c := c
		runners = append(runners, spillRunner{name: c.name, grant: c.grant, timed: func(ctx context.Context, q windowQuery, strs []string) (spillSum, *spillStats, error) {
			return strataSpillRun(ctx, log, q, strs, []string{filepath.Join(strataDir, "c0001")}, tmp, c.threads, c.grant)
		}})
	}
	log.Info("spill data: strata", "rows", rows, "cached", cached, "err", strataErr)

	// DuckDB: a database file, memory_limit = the grant, spilling to tmp.
	if d, err := spillDuck(ctx, t, dataDir); err != nil {
		runners = append(runners, spillRunner{name: sysDuck1, skip: err.Error()}, spillRunner{name: sysDuckAll, skip: err.Error()})
		log.Warn("spill data: duckdb", "err", err)
	} else {
		defer d.Close()
		// DuckDB refuses another temp_directory once it has spilled.
		if err := d.exec(ctx, "SET temp_directory = "+sqlString(filepath.Join(tmp, "duckdb"))); err != nil {
			return nil, err
		}
		timed := func(ctx context.Context, q windowQuery, strs []string) (spillSum, *spillStats, error) {
			rows, err := d.conn.QueryContext(ctx, spillChecksumSQL(q, strs, false))
			if err != nil {
				return spillSum{}, nil, err
			}
			defer rows.Close()
			fields, err := scanStrings(rows)
			if err != nil {
				return spillSum{}, nil, err
			}
			return newSpillSum(fields), nil, nil
		}
		for _, c := range []struct {
			name    string
			threads int
		}{{sysDuck1, 1}, {sysDuckAll, runtime.NumCPU()}} {
			c := c
			runners = append(runners, spillRunner{name: c.name, timed: timed, prep: func(ctx context.Context) error {
				if err := d.setThreads(ctx, c.threads); err != nil {
					return err
				}
				return d.exec(ctx, fmt.Sprintf("SET memory_limit = '%dMiB'", so.grant/mib))
			}})
		}
		if v, err := d.version(ctx); err == nil {
			run.Notes = append(run.Notes, "DuckDB "+v+".")
		}
		log.Info("spill data: duckdb", "rows", rows)
	}

	// PostgreSQL: its own cluster, in the cache when there is one.
	if pg, conn, err := spillPostgres(ctx, log, o.pgBinDir, t, dataDir, cached); err != nil {
		runners = append(runners, spillRunner{name: sysPostgres, skip: err.Error()})
		log.Warn("spill data: postgres", "err", err)
	} else {
		defer pg.stop()
		defer conn.Close(context.Background())
		limit := run.Limit
		runners = append(runners, spillRunner{name: sysPostgres, once: true,
			prep: func(ctx context.Context) error {
				return pgExecAll(ctx, conn, fmt.Sprintf("SET work_mem = '%dMB'", so.grant/mib), fmt.Sprintf("SET statement_timeout = %d", limit.Milliseconds()))
			},
			timed: func(ctx context.Context, q windowQuery, strs []string) (spillSum, *spillStats, error) {
				// statement_timeout stops it and keeps the connection usable.
				rows, err := conn.Query(context.WithoutCancel(ctx), spillChecksumSQL(q, strs, true))
				if isQueryCanceled(err) {
					return spillSum{}, nil, errTimedOut
				}
				if err != nil {
					return spillSum{}, nil, err
				}
				defer rows.Close()
				var fields []string
				for rows.Next() {
					vals, err := rows.Values()
					if err != nil {
						return spillSum{}, nil, err
					}
					for _, v := range vals {
						fields = append(fields, fmt.Sprint(v))
					}
				}
				if err := rows.Err(); err != nil {
					if isQueryCanceled(err) {
						return spillSum{}, nil, errTimedOut
					}
					return spillSum{}, nil, err
				}
				return newSpillSum(fields), nil, nil
			}})
		run.Notes = append(run.Notes, pg.c.version+".")
		log.Info("spill data: postgres", "rows", rows)
	}
	run.LoadSeconds = time.Since(loadStart).Seconds()
	run.Notes = append(run.Notes, fmt.Sprintf("Data: %s rows generated a block at a time (`spillTable`), %s.", formatCount(rows),
		map[bool]string{true: "kept in a cache directory and reused across runs", false: "generated for this run"}[cached]))
	for _, r := range runners {
		run.Systems = append(run.Systems, r.name)
	}

	for _, sq := range spillQueries {
		q, ok := windowbenchQuery(sq.name)
		if !ok || (len(so.queries) > 0 && !slices.Contains(so.queries, sq.name)) {
			continue
		}
		res := spillResult{Query: q, Times: map[string]measure{}, Stats: map[string]spillStats{}, Sums: map[string]spillSum{}}
		for _, r := range runners {
			if r.skip != "" {
				res.Times[r.name] = skipped(r.skip)
				continue
			}
			if r.prep != nil {
				if err := r.prep(ctx); err != nil {
					res.Times[r.name] = failed(err)
					continue
				}
			}
			var sum spillSum
			var st *spillStats
			repeats := run.Repeats
			if r.once {
				repeats = 1
			}
			m := bestOfUnderGrant(ctx, r.grant, repeats, false, run.Limit, func(ctx context.Context) error {
				var err error
				sum, st, err = r.timed(ctx, q, sq.strings)
				return err
			})
			if m.ok() && !m.TimedOut {
				res.Sums[r.name] = sum
				if st != nil {
					res.Stats[r.name] = *st
					m.Note = st.note()
				}
			}
			res.Times[r.name] = m
			log.Info("spill query", "rows", rows, "query", q.Name, "system", r.name, "seconds", m.Seconds, "timedOut", m.TimedOut, "note", m.Note, "err", m.Err)
		}
		res.Checks = checkSpillSums(log, run.Systems, q, res.Sums)
		run.Results = append(run.Results, res)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	run.Seconds = time.Since(start).Seconds()
	run.LoadEnd = loadAverage()
	return run, nil
}

func windowbenchQuery(name string) (windowQuery, bool) {
	for _, q := range windowbench.Queries() {
		if q.Name == name {
			return q, true
		}
	}
	return windowQuery{}, false
}

func (st spillStats) note() string {
	n := fmt.Sprintf("peak %s of %s", formatBytes(st.PeakBytes), formatBytes(st.Grant))
	if st.SpilledBytes > 0 {
		n += fmt.Sprintf(", spilled %s", formatBytes(st.SpilledBytes))
	}
	return n
}

// checkSpillSums compares every pair of systems that finished.
func checkSpillSums(log *slog.Logger, systems []string, q windowQuery, sums map[string]spillSum) []resultCheck {
	var got []string
	for _, s := range systems {
		if _, ok := sums[s]; ok {
			got = append(got, s)
		}
	}
	var checks []resultCheck
	for i := 0; i < len(got); i++ {
		for j := i + 1; j < len(got); j++ {
			a, b := sums[got[i]], sums[got[j]]
			c := resultCheck{A: got[i], B: got[j]}
			if ok, where := a.same(b); ok {
				c.OK, c.Detail = true, fmt.Sprintf("%d rows, checksum %s", a.Rows, a.Sum)
			} else {
				c.Detail = where
				log.Error("spill results differ", "query", q.Name, "a", c.A, "b", c.B, "detail", where)
			}
			checks = append(checks, c)
		}
	}
	return checks
}

// strataSpillRun evaluates q with windower.Run within grant and folds its
// result into the checksum.
func strataSpillRun(ctx context.Context, log *slog.Logger, q windowQuery, strs, dirs []string, tmp string, threads int, grant int64) (spillSum, *spillStats, error) {
	wq, err := sqlparse.Parse(q.Text())
	if err != nil {
		return spillSum{}, nil, err
	}
	res, err := windower.Run(ctx, wq, dirs, windower.Options{Grant: grant, TempDir: tmp, Threads: threads, Logger: log.With("component", "windower")})
	if err != nil {
		return spillSum{}, nil, err
	}
	defer res.Close()
	fold := newSpillFold(q, strs, threads)
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fold.result()
			return spillSum{}, nil, err
		}
		fold.add(rec)
	}
	sum, err := fold.result()
	if err != nil {
		return spillSum{}, nil, err
	}
	st := res.Stats()
	return sum, &spillStats{PeakBytes: st.PeakBytes, SpilledBytes: st.SpilledBytes, Grant: grant}, nil
}

// spillReady makes one system's data with build unless a marker says an
// earlier run made it.
func spillReady(dir, name string, build func() error) error {
	marker := filepath.Join(dir, name+".ready")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	if err := build(); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// spillDuck opens the DuckDB database file of the table, creating it
// from a Parquet export when the cache does not hold it.
func spillDuck(ctx context.Context, t spillTable, dir string) (*duckDB, error) {
	path := filepath.Join(dir, "w.duckdb")
	err := spillReady(dir, "duckdb", func() error {
		os.Remove(path)
		os.Remove(path + ".wal")
		pq := filepath.Join(dir, "w.parquet")
		defer os.Remove(pq)
		if err := writeSpillParquet(ctx, t, pq); err != nil {
			return err
		}
		d, err := openDuck(ctx, path)
		if err != nil {
			return err
		}
		defer d.Close()
		if err := d.exec(ctx, "SET temp_directory = "+sqlString(filepath.Join(dir, "duckdb.tmp"))); err != nil {
			return err
		}
		if err := d.exec(ctx, "CREATE TABLE w AS SELECT * FROM read_parquet("+sqlString(pq)+")"); err != nil {
			return err
		}
		return d.exec(ctx, "CHECKPOINT")
	})
	if err != nil {
		return nil, err
	}
	return openDuck(ctx, path)
}

// scanStrings reads one row of a database/sql result as strings.
func scanStrings(rows interface {
	Columns() ([]string, error)
	Next() bool
	Scan(...any) error
	Err() error
}) ([]string, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for _, v := range vals {
			out = append(out, fmt.Sprint(v))
		}
	}
	return out, rows.Err()
}

// spillPG is the suite's PostgreSQL cluster: a throwaway one, or one kept
// in the cache (stopped, not removed, at the end).
type spillPG struct {
	c    *pgCluster
	keep bool
}

func (p spillPG) stop() {
	if !p.keep {
		p.c.Stop()
		return
	}
	if p.c.running {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.c.command(ctx, "pg_ctl", "-D", p.c.dataDir(), "-m", "fast", "-w", "stop")
		p.c.running = false
	}
}

// spillPostgres starts the suite's cluster with table w loaded.
func spillPostgres(ctx context.Context, log *slog.Logger, bin string, t spillTable, dir string, cached bool) (spillPG, *pgx.Conn, error) {
	var p spillPG
	if !cached {
		c, err := startPostgres(ctx, log, bin)
		if err != nil {
			return p, nil, err
		}
		p.c = c
	} else {
		c, err := cachedPostgres(ctx, log, bin, dir)
		if err != nil {
			return p, nil, err
		}
		p = spillPG{c: c, keep: true}
	}
	conn, err := p.c.connect(ctx)
	if err != nil {
		p.stop()
		return p, nil, err
	}
	ready := filepath.Join(dir, "postgres.ready")
	if _, err := os.Stat(ready); err == nil && cached {
		return p, conn, nil
	}
	const cols = "(id bigint NOT NULL, a bigint, c bigint, g bigint, x bigint, t timestamp, s text, k text NOT NULL)"
	err = pgExecAll(ctx, conn, "DROP TABLE IF EXISTS w", "CREATE TABLE w "+cols)
	if err == nil {
		err = copySpillToPostgres(ctx, conn, t, "w")
	}
	if err == nil {
		err = pgExecAll(ctx, conn, "VACUUM (FREEZE, ANALYZE) w")
	}
	if err == nil && cached {
		err = os.WriteFile(ready, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
	}
	if err != nil {
		conn.Close(context.Background())
		p.stop()
		return p, nil, err
	}
	return p, conn, nil
}

// cachedPostgres starts the cluster kept under dir, creating it the first
// time. Under root the server runs as the postgres user, which may not
// reach a directory under root's home: the cluster then lives under the
// system's temporary directory, keyed by dir.
func cachedPostgres(ctx context.Context, log *slog.Logger, bin, dir string) (*pgCluster, error) {
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("postgresql server binary %s not found in %s (run `make bench-deps`)", b, bin)
		}
	}
	c := &pgCluster{bin: bin, log: log, dir: filepath.Join(dir, "pg")}
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			return nil, err
		}
		c.cred = cred
		if !reachableByOthers(dir) || len(c.dir) > 80 {
			c.dir = filepath.Join(os.TempDir(), "strata-bench-pg-"+fmt.Sprintf("%x", splitmix(hashString(dir)))[:12])
			log.Info("postgres cluster outside the cache (the postgres user cannot reach it)", "dir", c.dir)
		}
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); err != nil {
		os.RemoveAll(c.dir)
		os.Remove(filepath.Join(dir, "postgres.ready"))
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, err
		}
		if c.cred != nil {
			if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, err
			}
		}
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	} else {
		// A server a killed run left behind.
		os.Remove(filepath.Join(c.dataDir(), "postmaster.pid"))
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&c.version); err != nil {
		return nil, err
	}
	c.version = "PostgreSQL " + c.version
	return c, nil
}

// reachableByOthers reports whether every directory from / to dir lets
// other users through.
func reachableByOthers(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

func hashString(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// resultsPath is where this run's figures go: --large-results for a
// --large run, so the make bench figures in --results stay.
func (so *spillOptions) resultsPath(o options) string {
	if so.large {
		return so.largeResults
	}
	return o.results
}

// withLarge is the report to render: after a --large run, the last make
// bench figures (--results, when there) with this run's spill figures
// beside them; otherwise rep with the last --large run's figures, when
// --large-results holds them.
func (so *spillOptions) withLarge(o options, rep *report) (*report, error) {
	if so.large && !o.replot {
		main := &report{Started: rep.Started, Finished: rep.Finished, Command: rep.Command, Quick: rep.Quick, Sizes: rep.Sizes, Machine: rep.Machine, Peers: rep.Peers}
		if _, err := os.Stat(o.results); err == nil {
			if main, err = readResults(o.results); err != nil {
				return nil, err
			}
		}
		main.SpillLarge = rep.Spill
		return main, nil
	}
	if so.largeResults == o.results {
		return rep, nil
	}
	if err := rep.attachLarge(so.largeResults); err != nil {
		return nil, err
	}
	return rep, nil
}
