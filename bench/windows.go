package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/strata-db/strata/windower/windowbench"
)

// windowSuite is the outcome of the window suite.
type windowSuite struct {
	Rows, Groups int
	Repeats      int
	Limit        time.Duration // per query run
	Systems      []string
	Results      []windowResult
	Notes        []string
	// StrataThreads maps each strata system of Systems to the
	// windower.Options.Threads it ran with (absent in results of runs
	// before strata was timed at several thread counts).
	StrataThreads map[string]int `json:",omitempty"`
	// ShortRuns: queries whose fastest run was under shortRun ran more
	// than Repeats times (bestOf; false in results of runs before).
	ShortRuns bool `json:",omitempty"`
}

// windowResult is one query's figures and the result checks.
type windowResult struct {
	Query  windowQuery
	Times  map[string]measure
	Checks []resultCheck
}

// resultCheck is the comparison of two systems' results for one query.
type resultCheck struct {
	A, B   string
	OK     bool
	Detail string // the first differing row, or why the check did not run
}

// windowRunner is one system in the window suite.
type windowRunner struct {
	name  string
	skip  string
	prep  func(context.Context) error                            // before timing a query (e.g. SET threads)
	timed func(context.Context, windowQuery) error               // one timed run
	fetch func(context.Context, windowQuery) (*resultSet, error) // the full result, for the checks; nil: not fetched
	note  func(windowQuery) string                               // optional detail of the last timed run
	grant int64                                                  // strata's memory (grant and block cache): timed under its worker's collector (bestOfUnderGrant); 0 for a peer
}

func runWindowSuite(ctx context.Context, log *slog.Logger, sz sizes, dir string, p *peers) (*windowSuite, error) {
	suite := &windowSuite{Rows: sz.WindowRows, Groups: sz.WindowGroups, Repeats: sz.Repeats, Limit: sz.QueryLimit, ShortRuns: true}
	start := time.Now()
	data := windowbench.Generate(sz.WindowRows, sz.WindowGroups, 20260101)
	log.Info("window data generated", "rows", data.N, "seconds", time.Since(start).Seconds())

	var runners []windowRunner

	// strata, at each thread count: one thread, all cores, and any other
	// count --threads asks for. The one-thread and all-cores runs fetch
	// their results for the checks, so the parallel evaluation is checked
	// against the peers too.
	sw, err := newStrataWindows(ctx, log, filepath.Join(dir, "strata"), data)
	suite.StrataThreads = map[string]int{}
	type strataRun struct {
		name    string
		threads int
		cached  bool
	}
	var strataRuns []strataRun
	for _, threads := range strataThreadCounts(sz.Threads) {
		strataRuns = append(strataRuns, strataRun{strataSystem(threads), threads, true})
	}
	strataRuns = append(strataRuns, strataRun{sysStrataCold, 1, false})
	for _, sr := range strataRuns {
		suite.StrataThreads[sr.name] = sr.threads
		if err != nil {
			runners = append(runners, windowRunner{name: sr.name, skip: err.Error()})
			continue
		}
		profile := fmt.Sprintf("t%d", sr.threads)
		memory := int64(strataWindowGrant + strataVectorPool) // the grant, the pool and the cache: a worker's --memory, --vector-pool and --block-cache
		if sr.cached {
			memory += strataBlockCache
		} else {
			profile += "-nocache"
		}
		timed := func(ctx context.Context, q windowQuery) error {
			return profiled(sz.ProfileDir, fmt.Sprintf("window-%s-%s", q.Name, profile), func() error { return sw.timed(ctx, q, sr.threads, sr.cached) })
		}
		r := windowRunner{name: sr.name, timed: timed, grant: memory}
		if sr.cached {
			r.note = sw.note
		}
		if sr.cached && (sr.threads == 1 || sr.threads == runtime.NumCPU()) {
			r.fetch = func(ctx context.Context, q windowQuery) (*resultSet, error) { return sw.fetch(ctx, q, sr.threads) }
		}
		runners = append(runners, r)
	}
	if err == nil {
		defer sw.Close()
		suite.Notes = append(suite.Notes, sw.describe())
	}

	// DuckDB, one database timed with one thread and with all cores.
	if !p.duckOK() {
		runners = append(runners, windowRunner{name: sysDuck1, skip: p.duckSkip}, windowRunner{name: sysDuckAll, skip: p.duckSkip})
	} else {
		duck, err := loadDuckWindows(ctx, log, p, dir, data)
		if err != nil {
			return nil, err
		}
		defer duck.Close()
		timed := func(ctx context.Context, q windowQuery) error { return duck.queryRow(ctx, timedText(q)) }
		runners = append(runners,
			windowRunner{name: sysDuck1, prep: func(ctx context.Context) error { return duck.setThreads(ctx, 1) }, timed: timed},
			windowRunner{name: sysDuckAll, prep: func(ctx context.Context) error { return duck.setThreads(ctx, runtime.NumCPU()) }, timed: timed,
				fetch: func(ctx context.Context, q windowQuery) (*resultSet, error) { return duck.fetch(ctx, q.Text()) }},
		)
	}

	// PostgreSQL.
	if !p.pgOK() {
		runners = append(runners, windowRunner{name: sysPostgres, skip: p.pgSkip})
	} else {
		conn, err := p.pg.connect(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		if err := loadPostgresWindows(ctx, log, conn, data); err != nil {
			return nil, err
		}
		limit := fmt.Sprintf("SET statement_timeout = %d", sz.QueryLimit.Milliseconds())
		runners = append(runners, windowRunner{name: sysPostgres,
			prep: func(ctx context.Context) error { return pgExecAll(ctx, conn, limit) },
			timed: func(ctx context.Context, q windowQuery) error {
				// The server stops a query at statement_timeout, which keeps the
				// connection usable (a cancelled context would close it).
				_, err := conn.Exec(context.WithoutCancel(ctx), timedText(q))
				if isQueryCanceled(err) {
					return errTimedOut
				}
				return err
			},
			fetch: func(ctx context.Context, q windowQuery) (*resultSet, error) {
				if err := pgExecAll(ctx, conn, "SET statement_timeout = 0"); err != nil {
					return nil, err
				}
				return pgFetch(ctx, conn, q.Text())
			},
		})
	}
	for _, r := range runners {
		suite.Systems = append(suite.Systems, r.name)
	}

	for _, q := range windowQueries() {
		res := windowResult{Query: q, Times: map[string]measure{}}
		for _, r := range runners {
			res.Times[r.name] = timeWindowQuery(ctx, r, q, sz.Repeats, sz.QueryLimit)
			log.Info("window query", "query", q.Name, "system", r.name, "seconds", res.Times[r.name].Seconds, "err", res.Times[r.name].Err)
		}
		res.Checks = checkWindowResults(ctx, log, runners, q, res.Times)
		suite.Results = append(suite.Results, res)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return suite, nil
}

// strataThreadCounts is the thread counts strata runs the window suite
// with: one and runtime.NumCPU() always, with the others asked for, in
// increasing order.
func strataThreadCounts(asked []int) []int {
	counts := []int{1, runtime.NumCPU()}
	for _, t := range asked {
		if t > 0 {
			counts = append(counts, t)
		}
	}
	slices.Sort(counts)
	return slices.Compact(counts)
}

// strataSystem names strata run with threads goroutines.
func strataSystem(threads int) string {
	switch threads {
	case 1:
		return sysStrata
	case runtime.NumCPU():
		return sysStrataAll
	}
	return fmt.Sprintf("strata %d threads", threads)
}

func timeWindowQuery(ctx context.Context, r windowRunner, q windowQuery, runs int, limit time.Duration) measure {
	if r.skip != "" {
		return skipped(r.skip)
	}
	if r.prep != nil {
		if err := r.prep(ctx); err != nil {
			return failed(err)
		}
	}
	m := bestOfUnderGrant(ctx, r.grant, runs, true, limit, func(ctx context.Context) error { return r.timed(ctx, q) })
	if r.note != nil && m.ok() && !m.TimedOut {
		m.Note = r.note(q)
	}
	return m
}

// checkWindowResults fetches every system's full result, sorts it (no query
// of the suite has an ORDER BY, so row order is not part of the answer) and
// compares each pair.
func checkWindowResults(ctx context.Context, log *slog.Logger, runners []windowRunner, q windowQuery, times map[string]measure) []resultCheck {
	type fetched struct {
		name string
		rs   *resultSet
		err  error
	}
	var got []fetched
	for _, r := range runners {
		if r.skip != "" || r.fetch == nil {
			continue
		}
		if m := times[r.name]; !m.ok() || m.TimedOut {
			continue // failed or too slow to fetch in full: its timing row says why
		}
		rs, err := r.fetch(ctx, q)
		if err == nil {
			rs.sortRows()
		}
		got = append(got, fetched{name: r.name, rs: rs, err: err})
	}
	var checks []resultCheck
	for i := 0; i < len(got); i++ {
		for j := i + 1; j < len(got); j++ {
			a, b := got[i], got[j]
			c := resultCheck{A: a.name, B: b.name}
			switch {
			case a.err != nil:
				c.Detail = fmt.Sprintf("%s: %v", a.name, a.err)
			case b.err != nil:
				c.Detail = fmt.Sprintf("%s: %v", b.name, b.err)
			default:
				if m := diffResults(a.rs, b.rs); m != nil {
					c.Detail = m.String()
				} else {
					c.OK = true
					c.Detail = fmt.Sprintf("%d rows identical", a.rs.rows())
				}
			}
			if !c.OK {
				log.Error("window results differ", "query", q.Name, "a", a.name, "b", b.name, "detail", c.Detail)
			}
			checks = append(checks, c)
		}
	}
	return checks
}

func loadDuckWindows(ctx context.Context, log *slog.Logger, p *peers, dir string, data *windowTable) (*duckDB, error) {
	start := time.Now()
	pq := filepath.Join(dir, "w.parquet")
	if err := writeWindowParquet(data, pq); err != nil {
		return nil, err
	}
	duck, err := p.newDuck(ctx, "windows")
	if err != nil {
		return nil, err
	}
	if err := duck.exec(ctx, "CREATE TABLE w AS SELECT * FROM read_parquet("+sqlString(pq)+")"); err != nil {
		duck.Close()
		return nil, err
	}
	if err := duck.exec(ctx, "CREATE TABLE w_by_a AS SELECT * FROM w ORDER BY a"); err != nil {
		duck.Close()
		return nil, err
	}
	log.Info("duckdb loaded", "rows", data.N, "seconds", time.Since(start).Seconds())
	return duck, nil
}

func loadPostgresWindows(ctx context.Context, log *slog.Logger, conn *pgx.Conn, data *windowTable) error {
	start := time.Now()
	const cols = "(id bigint NOT NULL, a bigint, c bigint, g bigint, x bigint, t timestamp, s text, k text NOT NULL)"
	if err := pgExecAll(ctx, conn, "DROP TABLE IF EXISTS w, w_by_a", "CREATE TABLE w "+cols); err != nil {
		return err
	}
	if err := copyWindowToPostgres(ctx, conn, data, "w"); err != nil {
		return err
	}
	if err := pgExecAll(ctx, conn,
		"CREATE TABLE w_by_a AS SELECT * FROM w ORDER BY a",
		"VACUUM (FREEZE, ANALYZE) w",
		"VACUUM (FREEZE, ANALYZE) w_by_a",
	); err != nil {
		return err
	}
	log.Info("postgres loaded", "rows", data.N, "seconds", time.Since(start).Seconds())
	return nil
}
