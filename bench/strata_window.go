package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

// strataWindowGrant is the memory grant of strata's window runs: as generous
// as the peers' settings (PostgreSQL's work_mem, DuckDB's default limit), so
// nothing spills at these sizes.
const strataWindowGrant = 1 * gib

// strataBlockCache is the block cache strata's window runs share (but
// those of sysStrataCold): a worker's --block-cache, kept across the
// suite's queries as a worker keeps it across jobs. It holds both tables'
// columns at a million rows.
const strataBlockCache = 1 * gib

// strataVectorPool is the vector pool every strata window run borrows its
// columns from: a worker's --vector-pool at its default, a quarter of
// --memory, kept across the suite's queries as a worker keeps it across
// jobs.
const strataVectorPool = strataWindowGrant / 4

// strataWindows runs the window suite on strata's windower, over the table
// written as containers: projection by_id (table w: sorted on id, so not on
// any window key) and projection by_a (table w_by_a: sorted on a).
type strataWindows struct {
	log  *slog.Logger
	dirs map[string][]string // suite table name -> container dirs
	tmp  string
	// cache is the block cache of every run but those without one.
	cache *columnar.BlockCache
	// pool is the vector pool of every run.
	pool *bufpool.Pool

	mu    sync.Mutex
	stats map[string]windower.Stats // last run's stats per query
}

func newStrataWindows(_ context.Context, log *slog.Logger, dir string, data *windowTable) (*strataWindows, error) {
	s := &strataWindows{log: log, dirs: map[string][]string{}, tmp: filepath.Join(dir, "tmp"), stats: map[string]windower.Stats{},
		cache: columnar.NewBlockCache(strataBlockCache), pool: bufpool.New(strataVectorPool)}
	if err := os.MkdirAll(s.tmp, 0o755); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		table, projection, key string
		order                  []int64
	}{
		{windowbench.TableByID, "by_id", "id", data.ID},
		{windowbench.TableByA, "by_a", "a", data.A},
	} {
		cdir := columnar.ContainerDir(filepath.Join(dir, "data"), "w", t.projection, "c0001")
		opts := columnar.WriterOptions{Table: "w", Projection: t.projection, ID: "c0001", SortKey: columnar.SortKey{{Name: t.key}}}
		if _, err := data.WriteContainer(cdir, opts, data.OrderBy(t.order)); err != nil {
			return nil, fmt.Errorf("strata window input %s: %w", t.projection, err)
		}
		s.dirs[t.table] = []string{cdir}
	}
	return s, nil
}

// run runs q on threads goroutines, through the block cache if cached.
func (s *strataWindows) run(ctx context.Context, q windowQuery, threads int, cached bool) (*windower.Result, error) {
	wq, err := sqlparse.Parse(q.Text())
	if err != nil {
		return nil, err
	}
	o := windower.Options{Grant: strataWindowGrant, TempDir: s.tmp, Threads: threads, Logger: s.log.With("component", "windower"), VectorPool: s.pool}
	if cached {
		o.BlockCache = s.cache
	}
	return windower.Run(ctx, wq, s.dirs[q.Table], o)
}

// timed evaluates the query and consumes every result batch; the stats
// kept for note are those of the runs through the cache.
func (s *strataWindows) timed(ctx context.Context, q windowQuery, threads int, cached bool) error {
	res, err := s.run(ctx, q, threads, cached)
	if err != nil {
		return err
	}
	defer res.Close()
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rec.Release()
	}
	if cached {
		s.mu.Lock()
		s.stats[q.Name] = res.Stats()
		s.mu.Unlock()
	}
	return nil
}

// note describes the last timed run: peak memory, spill, and whether the
// input streamed without a sort.
func (s *strataWindows) note(q windowQuery) string {
	s.mu.Lock()
	st, ok := s.stats[q.Name]
	s.mu.Unlock()
	if !ok {
		return ""
	}
	n := fmt.Sprintf("peak %s", formatBytes(st.PeakBytes))
	if st.BlocksCached > 0 {
		n += fmt.Sprintf(", %d blocks from the cache", st.BlocksCached)
	}
	if st.SpilledBytes > 0 {
		n += fmt.Sprintf(", spilled %s", formatBytes(st.SpilledBytes))
	}
	if st.SortedInput {
		n += ", presorted input streamed"
	}
	return n
}

// fetch runs q through the block cache, as the runs of the systems whose
// results are checked, and returns every row of its result.
func (s *strataWindows) fetch(ctx context.Context, q windowQuery, threads int) (*resultSet, error) {
	res, err := s.run(ctx, q, threads, true)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	rs := newResultSet(res.Schema().NumFields())
	row := make([]value, rs.cols)
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			return rs, nil
		}
		if err != nil {
			return nil, err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := range row {
				if row[c], err = arrowValue(rec.Column(c), i); err != nil {
					rec.Release()
					return nil, fmt.Errorf("strata result column %s: %w", rec.Schema().Field(c).Name, err)
				}
			}
			rs.append(row)
		}
		rec.Release()
	}
}

func (s *strataWindows) describe() string {
	return fmt.Sprintf("strata reads the table from containers on disk (one per projection, LZ4, in the page cache), "+
		"parses the SQL with its PostgreSQL-grammar parser and runs `windower.Run` with a %s grant, "+
		"with `Threads` = 1 (%s) and `Threads` = %d, the machine's cores (%s). "+
		"Those two share a %s block cache of decoded blocks (`windower.Options.BlockCache`, a worker's `--block-cache`) across the suite, "+
		"as a worker keeps it across jobs, so their best runs take the blocks from it, as DuckDB's take its table from memory; "+
		"%s runs with one thread and no cache: each run reads, checks and decompresses every block it uses. "+
		"All three borrow their integer and float columns from a %s vector pool (`windower.Options.VectorPool`, a worker's `--vector-pool` at its default, a quarter of its memory), "+
		"so a run evaluates in the buffers an earlier run gave back.",
		formatBytes(strataWindowGrant), sysStrata, runtime.NumCPU(), sysStrataAll, formatBytes(strataBlockCache), sysStrataCold, formatBytes(strataVectorPool))
}

func (s *strataWindows) Close() {}

// arrowValue converts one Arrow value to canonical form.
func arrowValue(arr arrow.Array, i int) (value, error) {
	if arr.IsNull(i) {
		return value{}, nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return intValue(a.Value(i)), nil
	case *array.Int32:
		return intValue(int64(a.Value(i))), nil
	case *array.Int16:
		return intValue(int64(a.Value(i))), nil
	case *array.Int8:
		return intValue(int64(a.Value(i))), nil
	case *array.Uint64:
		return canonical(a.Value(i))
	case *array.Uint32:
		return intValue(int64(a.Value(i))), nil
	case *array.Uint16:
		return intValue(int64(a.Value(i))), nil
	case *array.Uint8:
		return intValue(int64(a.Value(i))), nil
	case *array.Float64:
		return floatValue(a.Value(i)), nil
	case *array.Float32:
		return floatValue(float64(a.Value(i))), nil
	case *array.Boolean:
		return canonical(a.Value(i))
	case *array.Timestamp:
		return intValue(int64(a.Value(i))), nil
	case *array.Date32:
		return intValue(int64(a.Value(i))), nil
	case *array.String:
		// Value aliases the array's buffer, which is released (and may be
		// reused) after the batch: keep a copy.
		return stringValue(strings.Clone(a.Value(i))), nil
	case *array.LargeString:
		return stringValue(strings.Clone(a.Value(i))), nil
	case *array.Binary:
		return stringValue(string(a.Value(i))), nil
	}
	return value{}, fmt.Errorf("unsupported result type %s", arr.DataType())
}
