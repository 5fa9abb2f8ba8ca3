package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/internal/heaplimit"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

func init() {
	register(command{
		name:    "bench window",
		summary: "run the window-function suite over generated containers and report speed, memory and allocations",
		run:     runBenchWindow,
	})
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
	Runs               int     `json:"runs"`          // the figures are of the run of median CPU time
	Threads            int     `json:"threads"`       // windower.Options.Threads
	BlocksCached       int64   `json:"blocks_cached"` // input blocks taken from the block cache (--block-cache)
	// With --store: how the input was read (local, cold or warm), what was
	// fetched from the store, the input's compressed bytes, and the
	// seconds over those of the local read of the same query.
	Read            string  `json:"read"`
	BlocksFetched   int64   `json:"blocks_fetched"`
	BytesFetched    int64   `json:"bytes_fetched"`
	CompressedBytes int64   `json:"compressed_bytes"`
	LocalRatio      float64 `json:"local_ratio,omitempty"`
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
	threads       int
	store         string
	blockCache    int64
	vectorPool    int64
}

func parseBenchWindow(args []string) (*benchWindowConfig, error) {
	cmd := newCmdLine("bench window", "usage: strata bench window [flags]")
	fs := cmd.fs
	rows := fs.Int("rows", 1000000, "rows of the generated tables")
	bigRows := fs.Int("big-rows", 10000000, "rows of the spilling case's single partition")
	grant := fs.String("grant", "1GiB", "memory grant of every query but the spilling case (64MiB)")
	dir := fs.String("dir", "", "directory for the generated containers (default: a new temporary directory, removed after)")
	js := fs.Bool("json", false, "print one JSON object per query instead of a table")
	only := fs.String("only", "", "run only the case of this name")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	repeat := fs.Int("repeat", 1, "run each case this many times in the process and report the run of median CPU time (the first run of a fresh process also pays for growing its heap)")
	threads := fs.Int("threads", 0, "threads each query is evaluated on (default: GOMAXPROCS)")
	cpu := fs.String("cpuprofile", "", "write a CPU profile of the timed section to this file (of the middle run of each read; with more than one case, to this file.<case>, and with --store, to this file.<read> after that)")
	blockCache := fs.String("block-cache", "0", "a block cache of this size (windower --block-cache), kept across each case's runs: with --repeat, the runs after the first take their blocks from it (0: none, every run reads and decodes its blocks)")
	vectorPool := fs.String("vector-pool", "0", "a vector pool of this size (windower --vector-pool), kept across each case's runs: with --repeat, the runs after the first evaluate in the column buffers the first gave back (0: none, every run makes its columns anew)")
	storeURL := fs.String("store", "", "also upload each table to this store (s3://BUCKET/PREFIX?endpoint=URL&region=REGION or file:///DIR) and run each query from there by ranges with no depot (direct), through an empty depot (cold) and again through the same depot (warm), beside the local run")
	if err := cmd.parse(args); err != nil {
		return nil, err
	}
	g, err := bytesize.Parse(*grant)
	if err != nil {
		return nil, fmt.Errorf("%w: --grant: %v", errUsage, err)
	}
	cacheBytes, err := bytesize.Parse(*blockCache)
	if err != nil || cacheBytes < 0 {
		return nil, fmt.Errorf("%w: --block-cache %q: want a size such as 256MiB, or 0 for none", errUsage, *blockCache)
	}
	poolBytes, err := bytesize.Parse(*vectorPool)
	if err != nil || poolBytes < 0 {
		return nil, fmt.Errorf("%w: --vector-pool %q: want a size such as 256MiB, or 0 for none", errUsage, *vectorPool)
	}
	if *rows <= 0 || *bigRows <= 0 || *repeat <= 0 {
		return nil, fmt.Errorf("%w: --rows, --big-rows and --repeat must be positive", errUsage)
	}
	if *threads < 0 {
		return nil, fmt.Errorf("%w: --threads must be positive (or 0 for GOMAXPROCS)", errUsage)
	}
	if *threads == 0 {
		*threads = runtime.GOMAXPROCS(0)
	}
	return &benchWindowConfig{rows: *rows, bigRows: *bigRows, grant: g, dir: *dir, json: *js, only: *only, seed: *seed, cpuProfile: *cpu, repeat: *repeat, threads: *threads, store: *storeURL, blockCache: cacheBytes, vectorPool: poolBytes}, nil
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
	tables := &windowTables{dir: dir, seed: cfg.seed}
	for _, q := range windowbench.Queries() {
		if cfg.only != "" && q.Name != cfg.only {
			continue
		}
		rows, grant := cfg.rows, cfg.grant
		if q.Spill {
			rows, grant = cfg.bigRows, windowbench.SpillGrant
		}
		containerDir, err := tables.container(q.Table, rows)
		if err != nil {
			return fmt.Errorf("generate table %s of %d rows: %w", q.Table, rows, err)
		}
		profile := ""
		if cfg.cpuProfile != "" {
			profile = cfg.cpuProfile
			if cfg.only == "" {
				profile += "." + q.Name // one profile per case
			}
		}
		reads := []string{readLocal}
		var bs *benchStore
		var mans []*columnar.Manifest
		if cfg.store != "" {
			if bs, mans, err = tables.uploaded(ctx, cfg.store, containerDir); err != nil {
				return fmt.Errorf("%s: %w", q.Name, err)
			}
			reads = append(reads, readDirect, readCold, readWarm)
		}
		rs, err := benchWindowReads(ctx, cfg, q, reads, containerDir, bs, mans, grant, filepath.Join(dir, "tmp"), profile)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	if err := tables.close(ctx); err != nil {
		return err
	}
	if !cfg.json {
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
		if cfg.store == "" {
			fmt.Fprintln(tw, "name\trows\tpartitions\tsorted\tthreads\tms\tcpu ms\tMrows/s\tpeak MiB\tspilled MiB\tallocs/partition\t")
		} else {
			fmt.Fprintln(tw, "name\trows\tpartitions\tsorted\tthreads\tms\tcpu ms\tMrows/s\tpeak MiB\tspilled MiB\tallocs/partition\tread\tx local\tfetched MiB\tblocks fetched\t")
		}
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.4f\t", r.Name, r.Rows, r.Partitions, r.SortedInput, r.Threads,
				r.Seconds*1e3, r.CPUSeconds*1e3, r.RowsPerS/1e6, float64(r.PeakBytes)/(1<<20), float64(r.SpilledBytes)/(1<<20), r.AllocsPerPartition)
			if cfg.store != "" {
				fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%d\t", r.Read, r.LocalRatio, float64(r.BytesFetched)/(1<<20), r.BlocksFetched)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	return nil
}

// benchWindowReads runs case q cfg.repeat times for each read, with the Go
// collector as a windower worker of this grant sets it (GOGC or
// GOMEMLIMIT in the environment leaves it alone), and returns each read's
// median run by CPU time.
func benchWindowReads(ctx context.Context, cfg *benchWindowConfig, q windowbench.Query, reads []string, containerDir string, bs *benchStore, mans []*columnar.Manifest, grant int64, tmp, profile string) ([]windowResult, error) {
	_, restoreCollector := heaplimit.Apply(grant + cfg.blockCache + cfg.vectorPool)
	defer restoreCollector()
	cache := columnar.NewBlockCache(cfg.blockCache)
	pool := bufpool.New(cfg.vectorPool)
	var results []windowResult
	var local float64
	for _, read := range reads {
		var runs []windowResult
		for k := 0; k < cfg.repeat; k++ {
			p := profile
			if p != "" && len(reads) > 1 {
				p += "." + read // one profile per read
			}
			if k != cfg.repeat/2 {
				p = "" // profile one run of each read: the middle one
			}
			r, err := runWindowRead(ctx, q, read, containerDir, bs, mans, grant, cache, pool, cfg.threads, tmp, p)
			if err != nil {
				return nil, fmt.Errorf("%s, input read %s: %w", q.Name, read, err)
			}
			runs = append(runs, r)
		}
		slices.SortFunc(runs, func(a, b windowResult) int { return cmp.Compare(a.CPUSeconds, b.CPUSeconds) })
		r := runs[len(runs)/2]
		r.Runs = cfg.repeat
		if read == readLocal {
			local = r.Seconds
		}
		if bs != nil {
			r.LocalRatio = r.Seconds / local
		}
		results = append(results, r)
		if cfg.json {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		}
	}
	return results, nil
}

// runWindowRead runs one case with its input read as read says: from
// containerDir (through cache and pool, if not nil), or from the store bs
// holds it in through a new depot (cold) and then that depot again
// (warm), never through the cache or the pool, so that those reads are of
// the store and the depot.
func runWindowRead(ctx context.Context, c windowbench.Query, read, containerDir string, bs *benchStore, mans []*columnar.Manifest, grant int64, cache *columnar.BlockCache, pool *bufpool.Pool, threads int, tmp, profile string) (windowResult, error) {
	if read == readLocal {
		r, err := runWindowCase(ctx, c, columnar.DirSource(containerDir), nil, grant, cache, pool, threads, tmp, profile)
		r.Read = read
		return r, err
	}
	if read == readDirect {
		srcs, err := bs.directSources(ctx, mans)
		if err != nil {
			return windowResult{}, err
		}
		r, err := runWindowCase(ctx, c, srcs[0], nil, grant, nil, nil, threads, tmp, profile)
		r.Read, r.CompressedBytes = read, compressedBytes(mans)
		return r, err
	}
	d := bs.depot
	if read == readCold || d == nil {
		if d != nil {
			bs.removeDepot()
		}
		var err error
		if d, bs.removeDepot, err = bs.newDepot(); err != nil {
			return windowResult{}, err
		}
		bs.depot = d
	}
	srcs, release, err := acquireAll(ctx, d, mans, false)
	if err != nil {
		return windowResult{}, err
	}
	defer release()
	r, err := runWindowCase(ctx, c, srcs[0], d, grant, nil, nil, threads, tmp, profile)
	r.Read, r.CompressedBytes = read, compressedBytes(mans)
	return r, err
}

// runWindowCase runs one case; with profile set, it writes a CPU profile
// of the timed section (the run and reading its result) there. An input
// of depot d is prefetched as the windower service does: the columns the
// query reads, once it is compiled (windower.Options.Prefetch).
func runWindowCase(ctx context.Context, c windowbench.Query, input columnar.Source, d *depot.Depot, grant int64, cache *columnar.BlockCache, pool *bufpool.Pool, threads int, tmp, profile string) (windowResult, error) {
	sql := c.Text()
	q, err := sqlparse.Parse(sql)
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
	opts := windower.Options{Grant: grant, TempDir: tmp, Threads: threads, BlockCache: cache, VectorPool: pool}
	if d != nil {
		prefetch, stop := context.WithCancel(ctx)
		defer stop()
		opts.Prefetch = func(src columnar.Source, columns []string) { d.PrefetchColumns(prefetch, src, columns) }
	}
	res, err := windower.RunSources(ctx, q, []columnar.Source{input}, opts)
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
		Query: sql, Name: c.Name, Rows: rows, Partitions: st.Partitions, SortedInput: st.SortedInput,
		Seconds: elapsed.Seconds(), CPUSeconds: cpu.Seconds(), RowsPerS: float64(rows) / elapsed.Seconds(),
		PeakBytes: st.PeakBytes, GrantBytes: grant, SpilledBytes: st.SpilledBytes,
		Mallocs: after.Mallocs - before.Mallocs, Threads: threads,
		BlocksFetched: st.BlocksFetched, BytesFetched: st.BytesFetched, BlocksCached: st.BlocksCached,
	}
	if st.Partitions > 0 {
		r.AllocsPerPartition = float64(r.Mallocs) / float64(st.Partitions)
	}
	return r, nil
}

// windowTables writes the suite's tables as containers under dir, each
// table of each size once: a --dir of an earlier run keeps them.
type windowTables struct {
	dir    string
	seed   uint64
	data   *windowbench.Table     // the rows last generated
	stores map[string]*benchStore // with --store: of each container uploaded
}

// uploaded returns the store holding the container at dir, uploading it
// to a store of its own (a fresh prefix of rawURL) the first time.
func (t *windowTables) uploaded(ctx context.Context, rawURL, dir string) (*benchStore, []*columnar.Manifest, error) {
	m, err := columnar.ReadManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	mans := []*columnar.Manifest{m}
	if bs := t.stores[dir]; bs != nil {
		return bs, mans, nil
	}
	bs, err := openBenchStore(ctx, rawURL, t.dir)
	if err != nil {
		return nil, nil, err
	}
	if _, err := store.Upload(ctx, bs.st, dir, m.Table, m.Projection, m.ID); err != nil {
		bs.close(ctx)
		return nil, nil, fmt.Errorf("upload to %s: %w", bs.st, err)
	}
	if t.stores == nil {
		t.stores = map[string]*benchStore{}
	}
	t.stores[dir] = bs
	return bs, mans, nil
}

// close removes what the benchmark put in stores.
func (t *windowTables) close(ctx context.Context) error {
	var first error
	for _, bs := range t.stores {
		if err := bs.close(context.WithoutCancel(ctx)); err != nil && first == nil {
			first = err
		}
	}
	t.stores = nil
	return first
}

// container returns the container of table (windowbench.TableByID,
// TableByA or TableSeries) with rows rows, writing it if it is not there.
func (t *windowTables) container(table string, rows int) (string, error) {
	key := map[string]string{windowbench.TableByID: "id", windowbench.TableByA: "a", windowbench.TableSeries: "ts"}[table]
	if key == "" {
		return "", fmt.Errorf("unknown table %q", table)
	}
	d := filepath.Join(t.dir, fmt.Sprintf("%s_%d_seed%d", table, rows, t.seed))
	if _, err := columnar.Open(d, columnar.OpenOptions{}); err == nil {
		return d, nil
	}
	os.RemoveAll(d) // half written by an interrupted run, if there
	if table == windowbench.TableSeries {
		// Written a batch at a time: unsorted, any size.
		_, err := windowbench.WriteSeries(d, columnar.WriterOptions{Table: table, Projection: "p", ID: "c0"}, rows, t.seed)
		return d, err
	}
	if t.data == nil || t.data.N != rows {
		t.data = nil // let the old rows go first
		t.data = windowbench.Generate(rows, windowGroups, t.seed)
	}
	order := t.data.ID
	if key == "a" {
		order = t.data.A
	}
	opts := columnar.WriterOptions{Table: "w", Projection: "by_" + key, ID: "c0", SortKey: columnar.SortKey{{Name: key}}}
	if _, err := t.data.WriteContainer(d, opts, t.data.OrderBy(order)); err != nil {
		return "", err
	}
	return d, nil
}

// windowGroups is the number of values of the generated tables' column g:
// partitions of about rows/1000 rows.
const windowGroups = 1000
