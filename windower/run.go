package windower

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/messages"
)

// The package's entry points: Run over containers and RunRecords over
// in-memory batches, with their options and figures.

// MinGrant is the smallest memory grant a query runs with.
const MinGrant = 8 << 20

// Options configure a run. The zero value is usable.
type Options struct {
	// Grant is the memory the run may hold, in bytes (default 64 MiB).
	// It must be at least MinGrant.
	Grant int64
	// Budget, if set, is the budget memory is counted against instead of a
	// new one of Grant bytes (Grant is then Budget.Limit()).
	Budget *columnar.Budget
	// BatchRows is the number of rows per result batch (default 65536).
	BatchRows int
	// TempDir is where sorted runs and large partitions are spilled
	// (default os.TempDir()).
	TempDir string
	// InputSorted declares that the input is already ordered on the
	// (partition, order) keys of the query's only window group, so it
	// streams without a sort. Run sets it from the containers' sort key.
	InputSorted bool
	// Threads is how many goroutines may evaluate the run (default
	// runtime.GOMAXPROCS(0), at most 64). They share the grant: a step
	// whose parallel buffers do not fit it runs on one thread.
	Threads int
	// Prefetch, if set, is called by Run and RunSources once the query
	// is compiled, before any data is read: for each input source in
	// turn, with the names of the columns the query reads (in schema
	// order; not called when it reads none). A worker whose inputs are in
	// a depot passes depot.PrefetchColumns with a context that ends with
	// the job, so a cold depot fetches those columns' files in the
	// background, adjacent ones together, while the run reads them, and
	// no other column's. A keyed table's key, version and deleted
	// columns, which resolving its rows may read, are not named. It must
	// not block. RunRecords does not call it.
	Prefetch func(src columnar.Source, columns []string)
	// BlockCache, if set, is the process's cache of decoded input blocks
	// (columnar.BlockCache). A query that runs in memory and reads at
	// most half the cache (BlockCache.Admits) takes the blocks the cache
	// holds from it and keeps there those it reads; a larger one, or one
	// that spills, reads around it, so that a scan does not push out the
	// blocks others reuse. The cache's memory is not the run's grant.
	BlockCache *columnar.BlockCache
	// VectorPool, if set, is the process's pool of column buffers
	// (bufpool.Pool). A query that runs in memory borrows its integer and
	// float columns, input and result, from it, and they go back when its
	// Result is closed and every batch read from it released: a worker
	// that runs query after query over tables of the same size reuses the
	// same memory instead of clearing new buffers and collecting the old.
	// The borrowed buffers are counted by the grant as fresh ones are;
	// the idle ones are the process's.
	VectorPool *bufpool.Pool
	Logger     *slog.Logger
	// bucketDepth is how deep in range buckets (buckets.go) this run is:
	// 0 for a query's own run, 1 for the run of a bucket of one of its
	// stages, 2 for a bucket of that run's. A run maxBucketDepth deep does
	// not deal its input into buckets again.
	bucketDepth int
	// removals removes the spilled files of the query's external run
	// that it no longer reads (nil: at once).
	removals *remover
	// inputRead is called once the first stage of an external run has
	// read the query's input (nil: nothing to do): the buffers kept to
	// recycle its blocks go back to the grant before the stage evaluates.
	inputRead func()
}

// maxBucketDepth is how deep range buckets nest. A bucket the sample of
// its stage's first chunk made too large for memory (its keys more
// common later in the input) deals its own rows into buckets, from a
// sample of them; a bucket of those that is still too large takes the
// sorted runs.
const maxBucketDepth = 2

func (o *Options) withDefaults() (Options, error) {
	out := *o
	if out.Budget != nil {
		out.Grant = out.Budget.Limit()
	}
	if out.Grant == 0 {
		out.Grant = 64 << 20
	}
	if out.Grant < MinGrant {
		return out, fmt.Errorf("%w: %d bytes, the minimum is %d", ErrGrantTooSmall, out.Grant, MinGrant)
	}
	if out.Budget == nil {
		out.Budget = columnar.NewBudget(out.Grant, nil)
	}
	if out.BatchRows <= 0 {
		out.BatchRows = 65536
	}
	if out.Threads <= 0 {
		out.Threads = runtime.GOMAXPROCS(0)
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

// Stats describe a finished run.
type Stats struct {
	Rows         int64 // result rows
	InputRows    int64 // rows read
	Partitions   int64 // partitions over all window groups (a spilled result read to its LIMIT counts those it evaluated)
	Groups       int   // window groups (distinct PARTITION BY + ORDER BY)
	SortedInput  bool  // the input streamed without a sort
	PeakBytes    int64 // peak of the budget
	SpilledBytes int64 // bytes written to spill files
	// SupersededRows counts the rows of a keyed table's containers that
	// the run dropped before reading them as input: older versions of a
	// key, the same change applied twice, and delete markers. InputRows
	// counts the rest.
	SupersededRows int64
	// BlocksFetched and BytesFetched count the input blocks and bytes
	// read from an object store rather than local disk.
	BlocksFetched int64
	BytesFetched  int64
	// BlocksCached counts the input blocks taken from Options.BlockCache,
	// neither read nor decoded.
	BlocksCached int64
}

// Run evaluates q over the containers at dirs (the live containers of
// q.Table) within the grant in opts. The query is checked against the
// containers' schema before any data is read.
func Run(ctx context.Context, q *messages.WindowQuery, dirs []string, opts Options) (*Result, error) {
	return RunSources(ctx, q, columnar.DirSources(dirs), opts)
}

// RunSources is Run over containers read from any columnar.Source: a
// directory, or an object store through a worker's depot.
func RunSources(ctx context.Context, q *messages.WindowQuery, srcs []columnar.Source, opts Options) (*Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	res, err := run(ctx, q, srcs, o)
	if err != nil {
		return nil, err
	}
	res.stats.BlocksFetched, res.stats.BytesFetched = columnar.Fetched(srcs)
	if opts.Budget == nil {
		// The run's own budget: once the Result is closed, it has counted
		// all the run's memory. A run that passed its grant gave correct
		// rows, but its plan broke its promise: report it loudly.
		release := res.release
		res.release = func() {
			if release != nil {
				release()
			}
			if o.Budget.Exceeded() {
				o.Logger.Error("window query passed its memory grant", "sql", q.SQL, "peak", o.Budget.Peak(), "grant", o.Budget.Limit())
				if grantPassed != nil {
					grantPassed(q, o.Budget.Peak(), o.Budget.Limit())
				}
			}
		}
	}
	return res, nil
}

// grantPassed, when set, is called as the Result of a run whose budget
// Run made closes, if the run's memory passed the grant at some point
// (Arrow buffers are counted as they are allocated, and cannot be
// refused). The tests set it, to fail any test whose run did.
var grantPassed func(q *messages.WindowQuery, peak, grant int64)

func run(ctx context.Context, q *messages.WindowQuery, srcs []columnar.Source, o Options) (*Result, error) {
	// Block buffers are recycled while the input is read: up to a block's
	// columns and their compressed forms, of the same sizes. Without, each
	// block takes new memory, which the collector clears or the kernel
	// faults in.
	mem := columnar.NewRecycler(o.Budget, 16, 0)
	defer mem.Close()
	var ioStats columnar.IOStats
	cs, schema, err := openInputs(srcs, &o, mem, &ioStats)
	if err != nil {
		return nil, err
	}
	p, err := compile(q, schema)
	if err != nil {
		return nil, err
	}
	if used := p.usedColumns(); o.Prefetch != nil && len(used) > 0 {
		cols := make([]string, len(used))
		for i, c := range used {
			cols[i] = schema.Field(c).Name
		}
		for _, src := range srcs {
			o.Prefetch(src, cols)
		}
	}
	p.measureStrings(cs)
	var rows int64
	for _, c := range cs {
		rows += c.Rows()
	}
	// A keyed table's input is its current rows: the others are found
	// now and dropped as each path reads the blocks.
	changes, drop, err := resolveChanges(ctx, cs, o.Budget)
	if err != nil {
		return nil, err
	}
	defer changes.Release()
	if changes != nil {
		rows = changes.Live
	}
	res, err := runResolved(ctx, p, cs, drop, rows, mem, o)
	if err != nil {
		return nil, err
	}
	if changes != nil {
		res.stats.SupersededRows = changes.DroppedRows()
	}
	res.stats.BlocksCached = ioStats.BlocksCached.Load()
	return res, nil
}

// runResolved evaluates p over the containers cs without the rows drop
// names (rows are left), in memory when they fit and in stages if not.
func runResolved(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, rows int64, mem *columnar.Recycler, o Options) (*Result, error) {
	if len(cs) == 1 && len(p.groups) == 1 && sortedFor(cs[0].SortKey(), p.groups[0]) {
		o.InputSorted = true
	}
	// Loading holds, beside the input, a block on each reader (a
	// goroutine per thread, the block's columns at most) and the
	// buffers kept to recycle, bounded to as much. The choice to run in
	// memory counts one reader, and the input loads on as many as the
	// grant has room for: the paths order ties differently (in memory,
	// every group's in input order; spilled, each stage's in the last
	// stage's), so a query that chose by its threads would give its rows
	// in another order on other threads.
	block := maxBlockBytes(cs, p.usedColumns())
	room := o.Budget.Limit() - o.Budget.InUse() - p.memoryPerRow()*rows
	if room < 2*block {
		// A spilling run reads its input a chunk at a time: about a
		// block's buffers are enough to recycle, and none once it is read.
		mem.KeepAtMost(block)
		o.inputRead = mem.Close
		return runExternal(ctx, p, cs, drop, rows, o)
	}
	readers := int(min(int64(max(o.Threads, 1)), room/max(2*block, 1)))
	mem.KeepAtMost(block * int64(readers))
	var cache *columnar.BlockCache
	if o.BlockCache != nil && o.BlockCache.Admits(rawBytes(cs, p.usedColumns())) {
		cache = o.BlockCache
	}
	lease := o.VectorPool.Lease()
	in, err := loadContainers(ctx, p, cs, drop, rows, o.Budget, readers, cache, lease)
	mem.Close()
	if err != nil {
		lease.End()
		return nil, err
	}
	if extra := p.repeatedStringBytes(in); extra > o.Budget.Available() {
		// A long string repeated on many rows: the results do not fit
		// beside the input. Spill, evaluating in buffers that bound them.
		o.Logger.Info("window query spills: results repeat long strings", "rows", rows, "extra_bytes", extra)
		o.Budget.Release(in.reserved)
		in = nil
		lease.End()
		return runExternal(ctx, p, cs, drop, rows, o)
	}
	return evaluate(ctx, p, in, o)
}

// RunRecords evaluates q over in-memory input batches (all of schema),
// in memory: it copies the columns the query uses and fails with an error
// wrapping columnar.ErrBudgetExceeded if they and the evaluation's
// buffers do not fit the grant (Run spills instead). The result's columns
// are memory owned by the Result, counted against the budget until Close.
func RunRecords(ctx context.Context, q *messages.WindowQuery, schema *arrow.Schema, recs []arrow.RecordBatch, opts Options) (*Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := compile(q, schema)
	if err != nil {
		return nil, err
	}
	in, err := loadRecords(p, recs, o.Budget)
	if err != nil {
		return nil, err
	}
	if extra := p.repeatedStringBytes(in); extra > o.Budget.Available() {
		o.Budget.Release(in.reserved)
		return nil, fmt.Errorf("windower: results repeating long strings take %d bytes more than the %d-byte grant has left (Run spills instead): %w",
			extra, o.Budget.Limit(), columnar.ErrBudgetExceeded)
	}
	return evaluate(ctx, p, in, o)
}
