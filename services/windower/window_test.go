package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

func testWindowJob(t *testing.T, sql string) (*windowJob, *messages.WindowJob) {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 5, Containers: 2, RowsPerContainer: 250, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqlparse.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	job := &messages.WindowJob{JobID: "w1", Query: *q, ResultTable: "t_w", Output: "w1", Grant: messages.Grant{Bytes: 16 << 20}}
	for _, m := range ms {
		job.Inputs = append(job.Inputs, messages.ContainerRef{Table: "t", Projection: "p", ID: m.ID})
	}
	return &windowJob{dataDir: data, tempDir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}, job
}

func TestWindowJobWritesResultOnce(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
	out, err := w.run(context.Background(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Existing || out.RowsTotal != 500 || out.Output.Table != "t_w" || out.Output.Projection != ResultProjection {
		t.Fatalf("first run: %+v", out)
	}
	c, err := columnar.Open(columnar.ContainerDir(w.dataDir, "t_w", ResultProjection, "w1"), columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Schema().Field(1).Name; got != "rn" {
		t.Errorf("result column 1 is %q, want rn", got)
	}
	again, err := w.run(context.Background(), job, nil)
	if err != nil || !again.Existing || again.RowsTotal != 500 {
		t.Fatalf("second run: %+v, %v; want the existing result", again, err)
	}
}

func TestWindowJobBadQueryIsPermanent(t *testing.T) {
	w, job := testWindowJob(t, "SELECT no_such_column, row_number() OVER () AS rn FROM t")
	if _, err := w.run(context.Background(), job, nil); err == nil || !engineerr.Permanent(err) {
		t.Fatalf("unknown column: err %v, want a permanent error", err)
	}
}

// TestWindowJobCannotReadOutside runs jobs whose names (unchecked here:
// the worker validates before Run) point outside the data directory: the
// confined root refuses them and no result is written.
func TestWindowJobCannotReadOutside(t *testing.T) {
	for name, forge := range map[string]func(j *messages.WindowJob){
		"input projection": func(j *messages.WindowJob) { j.Inputs[0].Projection = "../../otherdeployment/data/secret/p" },
		"input id":         func(j *messages.WindowJob) { j.Inputs[0].ID = "../../../../etc" },
		"query table":      func(j *messages.WindowJob) { j.Query.Table = "../otherdeployment" },
		"result table":     func(j *messages.WindowJob) { j.ResultTable = "../../outside" },
	} {
		t.Run(name, func(t *testing.T) {
			w, job := testWindowJob(t, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t")
			forge(job)
			if job.Validate() == nil {
				t.Fatalf("job validates: %+v", job)
			}
			if _, err := w.run(context.Background(), job, nil); err == nil || !engineerr.Permanent(err) {
				t.Fatalf("err %v, want a permanent error", err)
			}
			if _, err := columnar.ReadManifest(columnar.ContainerDir(w.dataDir, "t_w", ResultProjection, "w1")); err == nil {
				t.Fatal("a result was written")
			}
		})
	}
}

// A worker with a block cache answers a job that reads what an earlier job
// read from the cache, with the same result, and counts it on /metrics.
func TestWindowJobBlockCache(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, c001_utf8, max(c002_float64) OVER (PARTITION BY c001_utf8 ORDER BY k0) AS m FROM t")
	w.cache = columnar.NewBlockCache(64 << 20)
	reg := prometheus.NewRegistry()
	registerBlockCacheMetrics(reg, w.cache)
	rows := func(output string) []string { return resultColumns(t, w, output) }
	if _, err := w.run(context.Background(), job, nil); err != nil {
		t.Fatal(err)
	}
	first := w.cache.Stats()
	if first.Hits != 0 || first.Misses == 0 || first.Blocks != first.Misses {
		t.Fatalf("after the first job: %+v, want every block read and kept", first)
	}
	again := *job
	again.JobID, again.Output = "w2", "w2"
	if _, err := w.run(context.Background(), &again, nil); err != nil {
		t.Fatal(err)
	}
	if s := w.cache.Stats(); s.Hits != first.Misses || s.Misses != first.Misses {
		t.Fatalf("after the second job: %+v, want its %d blocks from the cache", s, first.Misses)
	}
	if a, b := rows("w1"), rows("w2"); len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("the job answered from the cache wrote another result (%d and %d column blocks)", len(a), len(b))
	}
	fams := metricstest.Families(t, reg)
	if h := metricstest.Value(fams, "strata_block_cache_hits_total"); h != float64(first.Misses) {
		t.Fatalf("strata_block_cache_hits_total %v, want %d", h, first.Misses)
	}
	if b := metricstest.Value(fams, "strata_block_cache_bytes"); b <= 0 {
		t.Fatalf("strata_block_cache_bytes %v, want the blocks held", b)
	}
}

// resultColumns reads the result container output of w's test job (three
// columns), a column block a string.
func resultColumns(t *testing.T, w *windowJob, output string) []string {
	t.Helper()
	c, err := columnar.Open(columnar.ContainerDir(w.dataDir, "t_w", ResultProjection, output), columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	br, err := c.OpenColumns([]int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var out []string
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range rec.Columns() {
			out = append(out, col.String())
		}
		rec.Release()
	}
}

// A worker with a vector pool evaluates the jobs after the first in the
// buffers the first gave back, writes the same result container, byte for
// byte, and counts it on /metrics.
func TestWindowJobVectorPool(t *testing.T) {
	w, job := testWindowJob(t, "SELECT k0, c002_float64, lag(c002_float64) OVER (ORDER BY k0) AS p FROM t")
	w.pool = bufpool.New(64 << 20).WithMinBytes(1) // the test table is small
	reg := prometheus.NewRegistry()
	registerVectorPoolMetrics(reg, w.pool)
	var outputs []string
	for i := range 3 {
		j := *job
		j.JobID, j.Output = fmt.Sprintf("p%d", i), fmt.Sprintf("p%d", i)
		if _, err := w.run(context.Background(), &j, nil); err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, j.Output)
	}
	s := w.pool.Stats()
	if s.Made == 0 || s.Lent < 2*s.Made || s.Bytes == 0 {
		t.Fatalf("after three jobs: %+v, want the first job's buffers lent to the next two", s)
	}
	first := resultColumns(t, w, outputs[0])
	manifest := func(output string) *columnar.Manifest {
		c, err := columnar.Open(columnar.ContainerDir(w.dataDir, "t_w", ResultProjection, output), columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Manifest()
	}
	for _, out := range outputs[1:] {
		if got := resultColumns(t, w, out); len(first) == 0 || !slices.Equal(got, first) {
			t.Fatalf("job %s, in lent buffers, wrote another result than the first", out)
		}
		// The same bytes: values under NULLs too, which a lent buffer
		// would otherwise hold from the job before.
		for f, file := range manifest(out).Files {
			if want := manifest(outputs[0]).Files[f].CRC; file.CRC != want {
				t.Fatalf("job %s: column file %d has checksum %08x, the first job's %08x", out, f, file.CRC, want)
			}
		}
	}
	fams := metricstest.Families(t, reg)
	if v := metricstest.Value(fams, "strata_vector_pool_lent_total"); v != float64(s.Lent) {
		t.Errorf("strata_vector_pool_lent_total %v, want %d", v, s.Lent)
	}
	if v := metricstest.Value(fams, "strata_vector_pool_capacity_bytes"); v != 64<<20 {
		t.Errorf("strata_vector_pool_capacity_bytes %v, want %d", v, 64<<20)
	}
}

// A --block-cache or --vector-pool that is not a size stops the worker
// before it starts, naming the flag.
func TestBlockCacheFlagRefused(t *testing.T) {
	for _, flag := range []string{"--block-cache", "--vector-pool"} {
		for _, v := range []string{"lots", "-1MiB"} {
			err := run([]string{flag, v, "--data", t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), flag) {
				t.Fatalf("%s %s: err %v, want one naming the flag", flag, v, err)
			}
		}
	}
}
