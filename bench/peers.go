package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// System names as they appear in tables and charts.
const (
	sysStrata    = "strata"           // windower with one thread
	sysStrataAll = "strata all cores" // windower with Threads = runtime.NumCPU()
	// sysStrataCold is the windower with one thread and no block cache:
	// every run reads and decodes its blocks (sysStrata and sysStrataAll
	// share a cache, as a worker with --block-cache does).
	sysStrataCold = "strata no cache"
	sysDuck1      = "DuckDB 1 thread"
	sysDuckAll    = "DuckDB all cores"
	sysPostgres   = "PostgreSQL"
)

// peers are the systems strata is compared with, probed once per run. A
// peer that cannot run is kept with the reason, and every figure it would
// have produced is reported as skipped.
type peers struct {
	log     *slog.Logger
	scratch string

	duckVersion string
	duckSkip    string // why DuckDB is not measured; empty when it is

	pg     *pgCluster
	pgSkip string
}

func startPeers(ctx context.Context, o options, scratch string) *peers {
	p := &peers{log: o.logger, scratch: scratch}
	if d, err := openDuck(ctx, ""); err != nil {
		p.duckSkip = err.Error()
	} else {
		if p.duckVersion, err = d.version(ctx); err != nil {
			p.duckSkip = err.Error()
		}
		d.Close()
	}
	if !needsPostgres(o.suites) {
		p.pgSkip = "not needed by the suites run"
		return p
	}
	pg, err := startPostgres(ctx, o.logger, o.pgBinDir)
	if err != nil {
		p.pgSkip = err.Error()
		o.logger.Warn("postgres skipped", "err", err)
		return p
	}
	p.pg = pg
	return p
}

func needsPostgres(suites []string) bool {
	return contains(suites, "windows") || contains(suites, "wal") || contains(suites, "pgwire")
}

func (p *peers) duckOK() bool { return p.duckSkip == "" }
func (p *peers) pgOK() bool   { return p.pg != nil }

// newDuck opens a fresh in-memory DuckDB database with its spill directory
// under the scratch directory.
func (p *peers) newDuck(ctx context.Context, name string) (*duckDB, error) {
	d, err := openDuck(ctx, "")
	if err != nil {
		return nil, err
	}
	if err := d.exec(ctx, "SET temp_directory = "+sqlString(filepath.Join(p.scratch, "duckdb-"+name))); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close stops the PostgreSQL cluster and removes its directory.
func (p *peers) Close() {
	if p.pg != nil {
		if err := p.pg.Stop(); err != nil {
			p.log.Warn("stop postgres", "err", err)
		}
		p.pg = nil
	}
}

// peerInfo is one line of the report's "systems" table.
type peerInfo struct {
	Name     string
	Version  string
	Settings string
	Skipped  string
}

func (p *peers) describe(ctx context.Context) []peerInfo {
	out := []peerInfo{{Name: sysStrata, Version: strataVersion(ctx), Settings: "in process: windower with one thread and with all cores; merger gathering columns on all cores; walwriter with group commit; the store suite against an S3 server (SeaweedFS when bin/weed is built, else gofakes3 in process); " + strataCollector()}}
	duck := peerInfo{Name: "DuckDB", Version: p.duckVersion, Skipped: p.duckSkip,
		Settings: "in-memory database; threads = 1 and = all cores; memory_limit = the grant in the mergeout suite"}
	if duck.Version != "" {
		duck.Version = "DuckDB " + duck.Version + " (github.com/duckdb/duckdb-go/v2)"
	}
	out = append(out, duck)
	pg := peerInfo{Name: sysPostgres, Skipped: p.pgSkip,
		Settings: "throwaway cluster on a unix socket; " + strings.Join(pgSettings[1:], ", ")}
	if p.pg != nil {
		pg.Version = p.pg.version
	}
	return append(out, pg)
}

// strataVersion is the commit the bench was built from.
func strataVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "working tree"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += " (with uncommitted changes)"
	}
	return fmt.Sprintf("commit %s", rev)
}

// strataCollector says which Go collector strata's engines were timed
// under: their worker's for the case's grant (bestOfUnderGrant), or the
// one GOGC or GOMEMLIMIT in the environment set.
func strataCollector() string {
	var env []string
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	if len(env) > 0 {
		return "the windower and merger under the Go collector of the environment (" + strings.Join(env, ", ") + "), not their workers'"
	}
	return "the windower and merger under the Go collector their worker sets for the case's grant (no collection below 1.5 times the grant, at least the grant and 64MiB, `internal/heaplimit`), each run timed with the collection a worker makes after a job"
}
