package merger

import (
	"log/slog"
	"runtime"
	"time"

	"github.com/strata-db/strata/columnar"
)

// Options configures Merge.
type Options struct {
	// Grant is the memory the merge may hold, in bytes. Required.
	Grant int64
	// BlockRows is the output's rows per block; default: the first input's.
	BlockRows int
	// Compression of the output; default LZ4.
	Compression columnar.Compression
	// TempDir holds spill files and intermediate containers; default
	// os.TempDir(). Everything the merge puts there is removed before it returns.
	TempDir string
	// Logger gets the plan and a summary; default: discard.
	Logger *slog.Logger
	// Progress, if set, is called as output is written, with the cells
	// (rows x columns) written so far and in total: a vertical merge moves
	// through its columns one after another, so cells are what advance
	// evenly. It is called from the merge's goroutines, one at a time.
	Progress func(done, total int64)
	// Parallelism bounds the columns gathered at once; default GOMAXPROCS.
	// The grant may allow fewer.
	Parallelism int
	// Table, Projection and ID name the output in its manifest; default: the
	// first input's table and projection, and the output directory's name.
	Table, Projection, ID string
	// Epochs recorded in the output manifest; default: the lowest first and
	// highest last epoch of the inputs.
	Epochs [2]uint64
	// NoSync skips the fsyncs of the output's commit
	// (columnar.WriterOptions.NoSync): for output that can be made again,
	// such as the windower's merged sorted runs.
	NoSync bool
	// Within, if set, is a budget the merge's memory is counted against
	// as well, as a sub-budget of Grant bytes (columnar.Budget.Sub): the
	// windower's run, whose peak and grant then hold its merges.
	Within *columnar.Budget
	// DropMarkersThrough, for keyed inputs, drops the delete markers of
	// version at most this that are their key's current row among the
	// inputs; the others are kept, since a row they delete may be in a
	// container outside the merge. Only a merge of every container of the
	// table may drop any: the scheduler sets it, for such a merge, to the
	// version through which every change is applied. 0 (markers have
	// versions of at least 1) keeps them all. Unkeyed inputs ignore it.
	DropMarkersThrough int64
	// FreezeThrough, for keyed inputs, writes the versions at most this
	// as 0 ("freezing", as PostgreSQL freezes xmin): the output's rows
	// then compress like loaded rows. Only a merge of every container of
	// the table, at or below whose version no change can still arrive,
	// may freeze: a row of version 0 loses to any other version of its
	// key, so a change at or below it applied later would beat it. The
	// mergeout worker sets it with DropMarkersThrough; the scheduler
	// refuses later applies at or below it (scheduler/apply.go). 0
	// freezes nothing. Unkeyed inputs ignore it.
	FreezeThrough int64
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	return o
}

// Stats describes a finished merge.
type Stats struct {
	Plan       string `json:"plan"` // PlanHorizontal, PlanVertical or PlanPasses
	Inputs     int    `json:"inputs"`
	Rows       int64  `json:"rows"` // rows written: the inputs', less SupersededRows
	Columns    int    `json:"columns"`
	BytesIn    int64  `json:"bytes_in"`  // uncompressed Arrow bytes of the inputs
	BytesOut   int64  `json:"bytes_out"` // bytes of the output's column files
	PeakBytes  int64  `json:"peak_bytes"`
	GrantBytes int64  `json:"grant_bytes"`
	// EstimatedBytes is the planner's estimate of PeakBytes (with passes:
	// of the first level), what the plan was fitted to the grant with;
	// with keyed inputs, at least the peak of resolving their versions,
	// which runs before the plan is made.
	EstimatedBytes int64 `json:"estimated_bytes"`
	// PredictedSeconds is the planner's cost model's duration of the plan
	// it chose, the fastest of those that fit (0 with passes).
	PredictedSeconds float64 `json:"predicted_seconds"`
	// FilesOpened counts column files opened for reading (inputs and, with
	// passes, intermediates); every file once is K x columns per level.
	FilesOpened int64 `json:"files_opened"`
	// BlocksDecompressed counts blocks decoded; BlocksTotal is the blocks
	// (column files x blocks) of every container the merge read, and for
	// keyed inputs the blocks resolving their versions read.
	BlocksDecompressed int64 `json:"blocks_decompressed"`
	BlocksTotal        int64 `json:"blocks_total"`
	// BlocksFetched and BytesFetched count the blocks and bytes its
	// inputs' Sources fetched from an object store for it
	// (columnar.FetchCounter): 0 for inputs in directories or wholly in a
	// worker's depot.
	BlocksFetched     int64   `json:"blocks_fetched"`
	BytesFetched      int64   `json:"bytes_fetched"`
	Comparisons       int64   `json:"comparisons"`
	ComparisonsPerRow float64 `json:"comparisons_per_row"`
	Passes            int     `json:"passes"` // merge levels: 1 unless Plan is passes
	Workers           int     `json:"workers"`
	// Overlapped reports that the key merge ran beside the gathers (a
	// vertical plan whose gathers follow the key merge's selection vector).
	Overlapped     bool          `json:"overlapped"`
	RowSourceBytes int64         `json:"row_source_bytes"`
	SpilledBytes   int64         `json:"spilled_bytes"` // row-source bytes written to disk
	Duration       time.Duration `json:"duration_ns"`
	// SupersededRows is the rows of keyed inputs the merge folded away:
	// superseded by a higher version, the second copy of a change applied
	// twice, or a delete marker dropped (Options.DropMarkersThrough).
	SupersededRows int64 `json:"superseded_rows"`
}
