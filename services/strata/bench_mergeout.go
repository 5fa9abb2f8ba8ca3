package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/internal/heaplimit"
	"github.com/strata-db/strata/merger"
)

func init() {
	register(command{
		name:    "bench mergeout",
		summary: "merge generated wide tables under several memory grants and report speed, memory and I/O",
		run: func(ctx context.Context, args []string) error {
			return runBenchMergeout(ctx, args, os.Stdout)
		},
	})
}

// benchMergeoutConfig is the parsed command line of `strata bench mergeout`.
type benchMergeoutConfig struct {
	widths      []int
	containers  int
	rows        int
	blockRows   int
	grants      []int64
	compression columnar.Compression
	parallelism int
	seed        int64
	dir         string
	json        bool
	repeat      int
	verbose     bool
	cpuProfile  string
	store       string // --store: also read the inputs from this store
}

// mergeoutCase is one line of the benchmark's output.
type mergeoutCase struct {
	Width              int     `json:"width"`
	Containers         int     `json:"containers"`
	Rows               int     `json:"rows"` // per container
	TotalRows          int64   `json:"total_rows"`
	BlockRows          int     `json:"block_rows"`
	GrantBytes         int64   `json:"grant_bytes"`
	Plan               string  `json:"plan"`
	Seconds            float64 `json:"seconds"`
	MBPerS             float64 `json:"mb_per_s"` // uncompressed input MB (1e6 bytes) merged per second
	BytesIn            int64   `json:"bytes_in"`
	PeakBytes          int64   `json:"peak_bytes"`
	EstimatedBytes     int64   `json:"estimated_bytes"`   // the planner's estimate of peak_bytes
	PredictedSeconds   float64 `json:"predicted_seconds"` // the planner's cost model's duration of its plan
	FilesOpened        int64   `json:"files_opened"`
	FilesExpected      int64   `json:"files_expected"` // containers x width: every input column file once
	BlocksDecompressed int64   `json:"blocks_decompressed"`
	BlocksTotal        int64   `json:"blocks_total"`
	CPUSeconds         float64 `json:"cpu_seconds"` // user+system CPU of the process during the merge
	CodecFloorSeconds  float64 `json:"codec_floor_seconds"`
	CodecFloorCPU      float64 `json:"codec_floor_cpu_seconds"`
	FloorRatio         float64 `json:"floor_ratio"` // seconds / codec_floor_seconds
	ComparisonsPerRow  float64 `json:"comparisons_per_row"`
	Workers            int     `json:"workers"`
	Passes             int     `json:"passes"`
	SpilledBytes       int64   `json:"spilled_bytes"`
	// With --store: how the inputs were read (local, cold or warm), what
	// was fetched from the store, the inputs' compressed bytes, and the
	// seconds over those of the local read at the same grant.
	Read            string  `json:"read"`
	BlocksFetched   int64   `json:"blocks_fetched"`
	BytesFetched    int64   `json:"bytes_fetched"`
	CompressedBytes int64   `json:"compressed_bytes"`
	LocalRatio      float64 `json:"local_ratio,omitempty"`
	// AcquireSeconds is the time to acquire the inputs from the depot
	// (cold: their manifests fetched, their packs created), before the
	// merge's seconds; FilesCreated the files the depot created for them.
	AcquireSeconds float64 `json:"acquire_seconds,omitempty"`
	FilesCreated   int64   `json:"files_created"`
}

func parseBenchMergeout(args []string) (*benchMergeoutConfig, error) {
	cmd := newCmdLine("bench mergeout", "usage: strata bench mergeout [flags]")
	fs := cmd.fs
	widths := fs.String("widths", "100,200,400", "comma-separated table widths (columns)")
	containers := fs.Int("containers", 32, "input containers per merge")
	rows := fs.Int("rows", 16384, "rows per input container")
	blockRows := fs.Int("block-rows", columnar.DefaultBlockRows, "rows per block of the inputs and the output")
	grants := fs.String("grants", "32MiB,100MiB,1GiB,8GiB", "comma-separated memory grants")
	compression := fs.String("compression", "lz4", "codec of inputs and output: lz4, zstd or none")
	parallelism := fs.Int("parallelism", runtime.GOMAXPROCS(0), "columns gathered at once, at most")
	seed := fs.Int64("seed", 1, "generator seed")
	dir := fs.String("dir", "", "directory for the generated tables (default: the system temporary directory); removed after")
	verbose := fs.Bool("v", false, "log each merge's plan and phases to stderr")
	repeat := fs.Int("repeat", 1, "run the codec floor and every merge this many times (grants in alternating order) and keep the fastest of each: steadier figures on a busy machine")
	asJSON := fs.Bool("json", false, "print one JSON object per case and line")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (generation, codec floor and merges) to this file")
	storeURL := fs.String("store", "", "also upload the inputs to this store (s3://BUCKET/PREFIX?endpoint=URL&region=REGION or file:///DIR) and merge them from there by ranges with no depot (direct), through an empty depot (cold) and again through the same depot (warm), beside the local merge")
	if err := cmd.parse(args); err != nil {
		return nil, err
	}
	cfg := &benchMergeoutConfig{
		containers: *containers, rows: *rows, blockRows: *blockRows, parallelism: *parallelism,
		seed: *seed, dir: *dir, json: *asJSON, cpuProfile: *cpuProfile, repeat: *repeat, verbose: *verbose,
		store: *storeURL,
	}
	for _, w := range strings.Split(*widths, ",") {
		if strings.TrimSpace(w) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("%w: --widths: %q is not a width of at least 2 columns", errUsage, w)
		}
		cfg.widths = append(cfg.widths, n)
	}
	var err error
	if cfg.grants, err = bytesize.ParseList(*grants); err != nil {
		return nil, fmt.Errorf("%w: --grants: %v", errUsage, err)
	}
	if cfg.compression, err = columnar.ParseCompression(*compression); err != nil {
		return nil, fmt.Errorf("%w: --compression: %v", errUsage, err)
	}
	switch {
	case len(cfg.widths) == 0:
		return nil, fmt.Errorf("%w: --widths: no width given", errUsage)
	case len(cfg.grants) == 0:
		return nil, fmt.Errorf("%w: --grants: no grant given", errUsage)
	case cfg.containers < 1:
		return nil, fmt.Errorf("%w: --containers must be at least 1", errUsage)
	case cfg.repeat < 1:
		return nil, fmt.Errorf("%w: --repeat must be at least 1", errUsage)
	case cfg.rows < 1:
		return nil, fmt.Errorf("%w: --rows must be at least 1", errUsage)
	case cfg.blockRows < 1 || cfg.blockRows > columnar.MaxBlockRows:
		return nil, fmt.Errorf("%w: --block-rows must be in [1, %d]", errUsage, columnar.MaxBlockRows)
	}
	return cfg, nil
}

func runBenchMergeout(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseBenchMergeout(args)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp(cfg.dir, "strata-bench-mergeout-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	out := newCaseWriter(stdout, cfg.json)
	for _, width := range cfg.widths {
		cases, err := benchWidth(ctx, cfg, root, width)
		if err != nil {
			return fmt.Errorf("width %d: %w", width, err)
		}
		for _, c := range cases {
			if err := out.write(c); err != nil {
				return err
			}
		}
	}
	return out.flush()
}

// benchWidth generates the inputs of one width, measures the codec floor,
// and merges them under every grant.
func benchWidth(ctx context.Context, cfg *benchMergeoutConfig, root string, width int) (_ []mergeoutCase, err error) {
	data := filepath.Join(root, fmt.Sprintf("w%d", width))
	defer os.RemoveAll(data)
	mans, err := columnar.Generate(data, columnar.GenOptions{
		Table: "bench", Projection: fmt.Sprintf("w%d", width), Columns: width, Containers: cfg.containers,
		RowsPerContainer: cfg.rows, Seed: cfg.seed, BlockRows: cfg.blockRows, Compression: cfg.compression,
	})
	if err != nil {
		return nil, fmt.Errorf("generate inputs: %w", err)
	}
	dirs := make([]string, len(mans))
	for i, m := range mans {
		dirs[i] = columnar.ContainerDir(data, m.Table, m.Projection, m.ID)
	}
	reads := []string{readLocal}
	var bs *benchStore
	if cfg.store != "" {
		if bs, err = openBenchStore(ctx, cfg.store, root); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := bs.close(context.WithoutCancel(ctx)); err == nil {
				err = cerr
			}
		}()
		if err := bs.upload(ctx, data, mans); err != nil {
			return nil, err
		}
		reads = append(reads, readDirect, readCold, readWarm)
	}
	cases := make([]mergeoutCase, len(cfg.grants)*len(reads))
	floor, floorCPU := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for rep := range cfg.repeat {
		// Each run under the Go collector a merger of its grant sets (the
		// floor under the largest grant's); GOGC or GOMEMLIMIT in the
		// environment leaves it alone. The command ends on an error, so
		// only the runs that end well restore it.
		_, restoreCollector := heaplimit.Apply(slices.Max(cfg.grants))
		cpu0 := cputime.Process()
		f, err := codecFloor(ctx, dirs, filepath.Join(data, "floor"), cfg)
		if err != nil {
			return nil, fmt.Errorf("codec floor: %w", err)
		}
		floor, floorCPU = min(floor, f), min(floorCPU, cputime.Process()-cpu0)
		restoreCollector()
		for j := range cfg.grants {
			// Alternate the order of the grants between repeats, so that no
			// grant always runs right after the codec floor's writes.
			g := j
			if rep%2 == 1 {
				g = len(cfg.grants) - 1 - j
			}
			grant := cfg.grants[g]
			collector, restoreCollector := heaplimit.Apply(grant)
			var warmDepot *depot.Depot
			for r, read := range reads {
				i := g*len(reads) + r
				var created0 int64
				if read == readWarm && warmDepot != nil {
					created0 = warmDepot.Stats().FilesCreated
				}
				acquire0 := time.Now()
				srcs, done, err := benchInputs(ctx, read, dirs, mans, bs, &warmDepot)
				if err != nil {
					return nil, fmt.Errorf("inputs read %s: %w", read, err)
				}
				acquire := time.Since(acquire0).Seconds()
				cpu0 := cputime.Process()
				st, err := benchMerge(ctx, cfg, srcs, filepath.Join(data, fmt.Sprintf("out%d", i)), root, grant)
				cpu := (cputime.Process() - cpu0).Seconds()
				var created int64
				if (read == readCold || read == readWarm) && warmDepot != nil {
					created = warmDepot.Stats().FilesCreated - created0
				} else {
					acquire = 0
				}
				done()
				collector.Collect() // as a merger does after a job
				if err != nil {
					return nil, fmt.Errorf("merge with grant %s, inputs read %s: %w", bytesize.Format(grant), read, err)
				}
				if rep > 0 {
					cases[i].CPUSeconds = min(cases[i].CPUSeconds, cpu)
					if st.Duration.Seconds() >= cases[i].Seconds {
						continue
					}
				}
				secs := st.Duration.Seconds()
				cpuMin := cpu
				if rep > 0 {
					cpuMin = cases[i].CPUSeconds
				}
				cases[i] = mergeoutCase{
					Width: width, Containers: cfg.containers, Rows: cfg.rows, TotalRows: st.Rows, BlockRows: cfg.blockRows,
					GrantBytes: grant, Plan: st.Plan, Seconds: secs, MBPerS: float64(st.BytesIn) / 1e6 / secs,
					CPUSeconds: cpuMin, BytesIn: st.BytesIn, PeakBytes: st.PeakBytes, EstimatedBytes: st.EstimatedBytes,
					PredictedSeconds: st.PredictedSeconds, FilesOpened: st.FilesOpened,
					FilesExpected: int64(cfg.containers) * int64(width), BlocksDecompressed: st.BlocksDecompressed,
					BlocksTotal: st.BlocksTotal, ComparisonsPerRow: st.ComparisonsPerRow, Workers: st.Workers,
					Passes: st.Passes, SpilledBytes: st.SpilledBytes,
					Read: read, BlocksFetched: st.BlocksFetched, BytesFetched: st.BytesFetched, CompressedBytes: compressedBytes(mans),
					AcquireSeconds: acquire, FilesCreated: created,
				}
			}
			restoreCollector()
		}
	}
	for i := range cases {
		cases[i].CodecFloorSeconds = floor.Seconds()
		cases[i].CodecFloorCPU = floorCPU.Seconds()
		cases[i].FloorRatio = cases[i].Seconds / floor.Seconds()
		if bs != nil {
			cases[i].LocalRatio = cases[i].Seconds / cases[i-i%len(reads)].Seconds
		}
	}
	return cases, nil
}

// benchInputs returns the inputs of one merge as read says they are read,
// and what ends their use: the directories; or the store through a new
// depot, which *warm keeps; or through *warm.
func benchInputs(ctx context.Context, read string, dirs []string, mans []*columnar.Manifest, bs *benchStore, warm **depot.Depot) ([]columnar.Source, func(), error) {
	switch read {
	case readDirect:
		srcs, err := bs.directSources(ctx, mans)
		return srcs, func() {}, err
	case readCold:
		d, remove, err := bs.newDepot()
		if err != nil {
			return nil, nil, err
		}
		*warm = d
		srcs, release, err := acquireAll(ctx, d, mans, true)
		if err != nil {
			remove()
			return nil, nil, err
		}
		return srcs, release, nil
	case readWarm:
		d := *warm
		srcs, release, err := acquireAll(ctx, d, mans, true)
		if err != nil {
			return nil, nil, err
		}
		return srcs, func() { release(); d.Close(); os.RemoveAll(d.Dir().Path()) }, nil
	default:
		return columnar.DirSources(dirs), func() {}, nil
	}
}

// benchMerge runs one merge into outDir and removes the output.
func benchMerge(ctx context.Context, cfg *benchMergeoutConfig, inputs []columnar.Source, outDir, tmp string, grant int64) (*merger.Stats, error) {
	opts := merger.Options{
		Grant: grant, BlockRows: cfg.blockRows, Compression: cfg.compression,
		TempDir: tmp, Parallelism: cfg.parallelism,
	}
	if cfg.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	st, err := merger.MergeSources(ctx, inputs, outDir, opts)
	if err != nil {
		return nil, err
	}
	return st, os.RemoveAll(outDir)
}

// codecFloor times the work no merge can avoid on the same data: decoding
// every block of every input column and encoding them into one output
// container, column by column over the same number of workers, with no key
// comparison and no reordering.
func codecFloor(ctx context.Context, dirs []string, outDir string, cfg *benchMergeoutConfig) (time.Duration, error) {
	start := time.Now()
	ins := make([]*columnar.Container, len(dirs))
	for i, d := range dirs {
		c, err := columnar.Open(d, columnar.OpenOptions{})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		ins[i] = c
	}
	w, err := columnar.Create(outDir, columnar.WriterOptions{
		Table: "bench", Projection: "floor", ID: "floor", Schema: ins[0].Schema(),
		BlockRows: cfg.blockRows, Compression: cfg.compression,
	})
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(outDir)
	cols := make(chan int)
	errs := make(chan error, cfg.parallelism)
	var wg sync.WaitGroup
	for range max(1, cfg.parallelism) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range cols {
				if err := copyColumn(ins, c, w); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for c := range ins[0].Schema().NumFields() {
		if ctx.Err() != nil {
			break
		}
		cols <- c
	}
	close(cols)
	wg.Wait()
	close(errs)
	if err := errors.Join(<-errs, ctx.Err()); err != nil {
		w.Abort()
		return 0, err
	}
	if _, err := w.Commit(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// copyColumn appends column c of every input, in order, to w.
func copyColumn(ins []*columnar.Container, c int, w *columnar.Writer) error {
	for _, in := range ins {
		r, err := in.OpenColumn(c)
		if err != nil {
			return err
		}
		for {
			arr, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return err
			}
			err = w.WriteColumn(c, arr)
			arr.Release()
			if err != nil {
				r.Close()
				return err
			}
		}
		r.Close()
	}
	return w.FinishColumn(c)
}

// caseWriter prints cases as JSON lines or as an aligned table.
type caseWriter struct {
	json bool
	enc  *json.Encoder
	tw   *tabwriter.Writer
	rows int
}

func newCaseWriter(w io.Writer, asJSON bool) *caseWriter {
	if asJSON {
		return &caseWriter{json: true, enc: json.NewEncoder(w)}
	}
	return &caseWriter{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
}

func (cw *caseWriter) write(c mergeoutCase) error {
	if cw.json {
		return cw.enc.Encode(c)
	}
	if cw.rows == 0 {
		fmt.Fprintln(cw.tw, "width\tinputs\trows\tgrant\tread\tplan\tworkers\tseconds\tx local\tacquire s\tpredicted s\tMB/s\tfloor s\tx floor\tcpu s\tfloor cpu s\tpeak\testimate\tfiles\tblocks\tfetched\tfetched/compressed\tcreated\tcmp/row\t")
	}
	cw.rows++
	fetched := 0.0
	if c.CompressedBytes > 0 {
		fetched = float64(c.BytesFetched) / float64(c.CompressedBytes)
	}
	_, err := fmt.Fprintf(cw.tw, "%d\t%d\t%d\t%s\t%s\t%s\t%d\t%.2f\t%.2f\t%.3f\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%d/%d\t%d/%d\t%s\t%.3f\t%d\t%.2f\t\n",
		c.Width, c.Containers, c.TotalRows, bytesize.Format(c.GrantBytes), c.Read, c.Plan, c.Workers, c.Seconds, c.LocalRatio, c.AcquireSeconds, c.PredictedSeconds, c.MBPerS,
		c.CodecFloorSeconds, c.FloorRatio, c.CPUSeconds, c.CodecFloorCPU, bytesize.Format(c.PeakBytes), bytesize.Format(c.EstimatedBytes),
		c.FilesOpened, c.FilesExpected,
		c.BlocksDecompressed, c.BlocksTotal, bytesize.Format(c.BytesFetched), fetched, c.FilesCreated, c.ComparisonsPerRow)
	return err
}

func (cw *caseWriter) flush() error {
	if cw.json {
		return nil
	}
	return cw.tw.Flush()
}
