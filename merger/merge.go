package merger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
)

// Merge merges the containers in inputs (directories, in container order)
// into one container at output, within opts.Grant bytes of memory. Rows
// with equal keys keep input order. On error nothing is left at output or in
// opts.TempDir, and the inputs are untouched.
func Merge(ctx context.Context, inputs []string, output string, opts Options) (*Stats, error) {
	return MergeSources(ctx, columnar.DirSources(inputs), output, opts)
}

// MergeSources is Merge of containers read from any columnar.Source: a
// directory, or an object store through a worker's depot.
func MergeSources(ctx context.Context, inputs []columnar.Source, output string, opts Options) (*Stats, error) {
	opts = opts.withDefaults()
	start := time.Now()
	if len(inputs) == 0 {
		return nil, ErrNoInputs
	}
	if opts.Grant <= 0 {
		return nil, fmt.Errorf("%w: grant %d: a positive grant is required", ErrGrantTooSmall, opts.Grant)
	}
	if _, err := os.Stat(output); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrOutputExists, output)
	}
	budget := columnar.NewBudget(opts.Grant, nil)
	if opts.Within != nil {
		budget = opts.Within.Sub(opts.Grant)
	}
	m := &merge{
		ctx:    ctx,
		opts:   opts,
		budget: budget,
		io:     &columnar.IOStats{},
		stats:  &Stats{GrantBytes: opts.Grant, Inputs: len(inputs)},
	}
	if err := m.run(inputs, output); err != nil {
		return nil, err
	}
	m.stats.PeakBytes = m.budget.Peak()
	m.stats.FilesOpened = m.io.FilesOpened.Load()
	m.stats.BlocksDecompressed = m.io.BlocksDecompressed.Load()
	m.stats.BlocksFetched, m.stats.BytesFetched = columnar.Fetched(inputs)
	if m.stats.Rows > 0 {
		m.stats.ComparisonsPerRow = float64(m.stats.Comparisons) / float64(m.stats.Rows)
	}
	m.stats.Duration = time.Since(start)
	opts.Logger.Info("mergeout done", "output", output, "plan", m.stats.Plan, "inputs", len(inputs),
		"rows", m.stats.Rows, "peak", m.stats.PeakBytes, "grant", opts.Grant,
		"duration", m.stats.Duration)
	if m.budget.Exceeded() {
		// The output is correct, but the plan broke its promise: report it loudly.
		opts.Logger.Error("mergeout exceeded its memory grant", "peak", m.stats.PeakBytes, "grant", opts.Grant)
		if grantPassed != nil {
			grantPassed(output, m.stats.PeakBytes, opts.Grant)
		}
	}
	return m.stats, nil
}

// grantPassed, when set, is called by a merge whose memory passed its
// grant. The tests set it, to fail any test whose merge did.
var grantPassed func(output string, peak, grant int64)

// merge is one Merge call's state.
type merge struct {
	ctx      context.Context
	opts     Options
	budget   *columnar.Budget
	io       *columnar.IOStats
	stats    *Stats
	progress atomic.Int64
	// fold is the resolved versions of keyed inputs (fold.go); nil for
	// unkeyed ones.
	fold *resolution
}

// input is an open input container.
type input struct {
	c   *columnar.Container
	dir string
	// drop are the rows of a keyed input the merge skips (fold.go); nil
	// when it keeps every row.
	drop *roaring.Bitmap
}

// keptRows is the rows the merge writes from ins.
func keptRows(ins []input) int64 {
	var n int64
	for _, in := range ins {
		n += in.c.Rows()
		if in.drop != nil {
			n -= int64(in.drop.GetCardinality())
		}
	}
	return n
}

func (m *merge) run(inputs []columnar.Source, output string) error {
	ins, err := m.open(inputs)
	if err != nil {
		return err
	}
	defer closeInputs(ins)
	first := ins[0].c
	schema := first.Schema()
	keyIdx, err := first.SortKey().Indices(schema)
	if err != nil {
		return fmt.Errorf("merger: sort key of %s: %w", ins[0].dir, err)
	}
	if len(keyIdx) == 0 {
		return fmt.Errorf("%w: %s has no sort key", ErrMismatch, ins[0].dir)
	}
	var resolvePeak int64
	if keyedInputs(ins) {
		if m.fold, err = m.resolve(ins); err != nil {
			return err
		}
		defer m.fold.release()
		resolvePeak = m.budget.Peak()
	}
	for _, in := range ins {
		m.stats.BytesIn += in.c.Manifest().RawBytes()
	}
	rows := keptRows(ins)
	m.stats.Rows = rows
	m.stats.Columns = schema.NumFields()
	blockRows := m.opts.BlockRows
	if blockRows <= 0 {
		blockRows = first.Manifest().BlockRows
	}
	costs := columnCosts(ins, keyIdx, blockRows)
	freezeCost(costs, m.freezeColumn(ins, keyIdx))
	p, err := makePlan(planInput{
		inputs:    len(ins),
		columns:   costs,
		grant:     m.opts.Grant,
		workers:   m.opts.Parallelism,
		rowSource: rowSourceEstimate(rows, len(ins)),
		rows:      rows,
		held:      m.fold.bytes(),
	})
	if err != nil {
		return err
	}
	m.stats.Plan = p.kind
	m.stats.Overlapped = p.overlap
	m.stats.EstimatedBytes = max(p.estimate, resolvePeak)
	m.stats.PredictedSeconds = p.seconds
	m.opts.Logger.Info("mergeout plan", "plan", p.kind, "inputs", len(ins), "rows", rows, "superseded_rows", m.stats.SupersededRows, "columns", len(costs),
		"grant", m.opts.Grant, "key_phase_bytes", p.keyPhase, "gather_phase_bytes", p.gatherPhase,
		"estimated_bytes", p.estimate, "predicted_seconds", p.seconds, "workers", p.workers, "groups", len(p.groups),
		"shared_sel", p.sharedSel, "overlap", p.overlap, "row_source_in_memory", p.rowSourceMem > 0, "fan_in", p.fanIn)
	total := rows * int64(len(costs))
	if p.kind == PlanPasses {
		// Every level writes every row once more.
		for n := len(ins); n > p.fanIn; n = (n + p.fanIn - 1) / p.fanIn {
			total += rows * int64(len(costs))
		}
		return m.passes(ins, output, p, blockRows, total)
	}
	m.stats.Passes = 1
	return m.once(ins, output, p, keyIdx, blockRows, total)
}

// open opens every input and checks they agree on schema and sort key.
func (m *merge) open(srcs []columnar.Source) ([]input, error) {
	ins := make([]input, 0, len(srcs))
	for _, src := range srcs {
		d := src.String()
		c, err := columnar.OpenSource(src, columnar.OpenOptions{Allocator: m.budget, Stats: m.io, Logger: m.opts.Logger})
		if err != nil {
			closeInputs(ins)
			return nil, fmt.Errorf("merger: open input %s: %w", d, err)
		}
		ins = append(ins, input{c: c, dir: d})
		if len(ins) == 1 {
			continue
		}
		a, b := ins[0].c.Manifest(), c.Manifest()
		if !slices.Equal(a.PrimaryKey, b.PrimaryKey) {
			closeInputs(ins)
			return nil, fmt.Errorf("%w: primary key of %s (%s) differs from %s (%s)", ErrMismatch,
				d, strings.Join(b.PrimaryKey, ", "), ins[0].dir, strings.Join(a.PrimaryKey, ", "))
		}
		if !slices.Equal(a.Schema, b.Schema) {
			closeInputs(ins)
			return nil, fmt.Errorf("%w: schema of %s differs from %s: %s", ErrMismatch, d, ins[0].dir, schemaDiff(a.Schema, b.Schema))
		}
		if !a.SortKey.Equal(b.SortKey) {
			closeInputs(ins)
			return nil, fmt.Errorf("%w: sort key of %s (%s) differs from %s (%s)", ErrMismatch, d, b.SortKey, ins[0].dir, a.SortKey)
		}
	}
	return ins, nil
}

func schemaDiff(a, b []columnar.ColumnSchema) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d columns against %d", len(b), len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("column %d is %s %s (nullable %v) against %s %s (nullable %v)",
				i, b[i].Name, b[i].Type, b[i].Nullable, a[i].Name, a[i].Type, a[i].Nullable)
		}
	}
	return "same"
}

func closeInputs(ins []input) {
	for _, in := range ins {
		in.c.Close()
	}
}

// rowSourceEstimate bounds the row-source stream of rows rows from k inputs:
// at worst every row is its own run, of its input's varint and a 1-byte count.
func rowSourceEstimate(rows int64, k int) int64 {
	perRun := int64(uvarintLen(uint64(max(k-1, 0))) + 1)
	return int64(len(rowSourceMagic)) + rows*perRun + (rows*perRun/rowSourceChunk+1)*(binary.MaxVarintLen64+4)
}

// columnCosts sizes every column from the inputs' manifests.
func columnCosts(ins []input, keyIdx []int, outBlockRows int) []columnCost {
	schema := ins[0].c.Manifest().Schema
	totalRows := keptRows(ins)
	costs := make([]columnCost, len(schema))
	keyPos := make(map[int]bool, len(keyIdx))
	for _, k := range keyIdx {
		keyPos[k] = true
	}
	for c := range schema {
		cost := columnCost{name: schema[c].Name, key: keyPos[c]}
		var perRow float64 // largest uncompressed bytes per row of any block
		var blockRows int
		for _, in := range ins {
			man := in.c.Manifest()
			if c >= len(man.Files) {
				continue
			}
			if in.drop != nil {
				// A block with dropped rows is copied without them
				// while it is held (fold.go).
				for _, fb := range man.Files[c].Blocks {
					cost.filter = max(cost.filter, fb.RawBytes+1024)
				}
				cost.filtered++
			}
			for b, fb := range man.Files[c].Blocks {
				cost.raw += fb.RawBytes
				cost.read = max(cost.read, fb.ReadBytes(false))
				if b < len(man.Blocks) && man.Blocks[b].Rows > 0 {
					perRow = max(perRow, float64(fb.RawBytes)/float64(man.Blocks[b].Rows))
					blockRows = max(blockRows, man.Blocks[b].Rows)
				}
			}
		}
		outBlock := int64(perRow*float64(outBlockRows)) + 1024
		if tailRows := totalRows % int64(outBlockRows); tailRows > 0 {
			cost.tail = int64(perRow*float64(tailRows)) + 1024
		}
		// The gathered block, and the writer's compressed copy of it (LZ4
		// may grow incompressible data slightly).
		cost.block = outBlock
		cost.out = 2*outBlock + outBlock/8
		// The gather's selection vector, and its rows grouped by input
		// (counted per column: conservative when a worker gathers several).
		cost.out += 2*int64(outBlockRows) + groupsBytesUpTo(len(ins), outBlockRows)
		// A block of an intermediate container of passes (written in the
		// output's block size): decoded, and encoded (at most its bytes
		// again, LZ4's growth and the IPC message's framing).
		rawBlock := int64(perRow * float64(outBlockRows))
		cost.interRead = 2*rawBlock + rawBlock/128 + 1024
		if cost.key {
			// Normalized key: marker + value (strings escaped: ~+10% and a terminator),
			// plus 16 bytes of offsets per row.
			cost.keyBytes = int64((perRow*1.1+3+16)*float64(blockRows)) + 1024
			cost.interKeyBytes = int64((perRow*1.1+3+16)*float64(outBlockRows)) + 1024
		}
		costs[c] = cost
	}
	return costs
}

// once merges ins into output in one level (horizontal or vertical).
func (m *merge) once(ins []input, output string, p plan, keyIdx []int, blockRows int, total int64) (err error) {
	first := ins[0].c.Manifest()
	wopts := columnar.WriterOptions{
		Table:       firstNonEmpty(m.opts.Table, first.Table),
		Projection:  firstNonEmpty(m.opts.Projection, first.Projection),
		ID:          firstNonEmpty(m.opts.ID, filepath.Base(output)),
		Schema:      ins[0].c.Schema(),
		SortKey:     ins[0].c.SortKey(),
		PrimaryKey:  first.PrimaryKey,
		BlockRows:   blockRows,
		Compression: m.opts.Compression,
		Allocator:   m.budget,
		Epochs:      m.opts.Epochs,
		Stats:       m.io,
		Logger:      m.opts.Logger,
		NoSync:      m.opts.NoSync,
	}
	if wopts.Epochs == ([2]uint64{}) {
		wopts.Epochs = epochsOf(ins)
	}
	w, err := columnar.Create(output, wopts)
	if err != nil {
		return fmt.Errorf("merger: create output: %w", err)
	}
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	for _, in := range ins {
		m.stats.BlocksTotal += int64(len(in.c.Manifest().Blocks) * len(in.c.Manifest().Files))
	}
	// Serialize progress reports; writes to distinct columns run in parallel.
	var progressMu sync.Mutex
	freeze := m.freezeColumn(ins, keyIdx)
	emit := func(col int, arr arrow.Array) error {
		if col == freeze {
			frozen, copied, err := freezeVersions(m.budget, arr, m.opts.FreezeThrough)
			if err != nil {
				return err
			}
			if copied {
				defer frozen.Release()
				arr = frozen
			}
		}
		if err := w.WriteColumn(col, arr); err != nil {
			return err
		}
		if m.opts.Progress != nil {
			progressMu.Lock()
			m.opts.Progress(m.progress.Add(int64(arr.Len())), total)
			progressMu.Unlock()
		}
		return nil
	}

	var rest []int
	for c := range ins[0].c.Schema().NumFields() {
		if !slices.Contains(keyIdx, c) {
			rest = append(rest, c)
		}
	}
	if p.overlap {
		if err := m.keysBesideGathers(ins, keyIdx, rest, p, blockRows, w, emit); err != nil {
			return err
		}
	} else if err := m.keysThenGathers(ins, keyIdx, rest, p, blockRows, w, emit); err != nil {
		return err
	}
	if err := m.ctx.Err(); err != nil {
		return err
	}
	man, err := w.Commit()
	if err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	// With passes the last call is the final level: BytesOut is its output.
	m.stats.BytesOut = man.CompressedBytes()
	return nil
}

// keysThenGathers runs the key merge, then the gathers of the columns cols
// over the row-source stream it wrote.
func (m *merge) keysThenGathers(ins []input, keyIdx, cols []int, p plan, blockRows int, w *columnar.Writer,
	emit func(int, arrow.Array) error) error {
	keyStart := time.Now()
	rs, err := m.mergeKeys(m.ctx, ins, keyIdx, blockRows, p, w, nil, emit)
	if err != nil {
		return err
	}
	m.opts.Logger.Debug("key merge done", "rows", rs.rows, "runs", rs.runs, "row_source_bytes", rs.size,
		"spilled", rs.spilled, "elapsed", time.Since(keyStart), "in_use", m.budget.InUse())
	gatherStart := time.Now()
	defer rs.Close()
	m.stats.RowSourceBytes = rs.size
	if rs.spilled {
		m.stats.SpilledBytes = rs.size
	}
	if p.sharedSel && rs.rows > 0 {
		if err := rs.expand(m.budget); err != nil {
			return fmt.Errorf("merger: %w", err)
		}
	}
	if err := m.gatherAll(m.ctx, ins, cols, rs, p, blockRows, w, nil, emit); err != nil {
		return err
	}
	m.opts.Logger.Debug("gather done", "columns", len(cols), "workers", p.workers, "finishers", p.finishers,
		"defer_finish", p.deferFinish, "elapsed", time.Since(gatherStart))
	return nil
}

// keysBesideGathers runs the key merge and the gathers of the columns cols
// at once (the overlapped plan): the key merge fills a selection vector of
// every row, and all the plan's workers but one gather columns from the
// part filled so far, one output block behind it; the last worker joins
// them once the key merge is done. The row-source stream is still written
// (its size is reported) and dropped after the key merge.
func (m *merge) keysBesideGathers(ins []input, keyIdx, cols []int, p plan, blockRows int, w *columnar.Writer,
	emit func(int, arrow.Array) error) error {
	rows := keptRows(ins)
	need := 2 * rows
	if err := m.budget.Reserve(need); err != nil {
		return fmt.Errorf("merger: selection vector of %d rows: %w", rows, err)
	}
	defer m.budget.Release(need)
	ls := newLiveSel(rows)
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	keysDone := make(chan struct{})
	gathered := make(chan error, 1)
	start := time.Now()
	go func() {
		err := m.gatherAll(ctx, ins, cols, &rowSource{inputs: len(ins), rows: rows, live: ls}, p, blockRows, w, keysDone, emit)
		if err != nil {
			cancel() // stop the key merge
		}
		gathered <- err
	}()
	rs, err := m.mergeKeys(ctx, ins, keyIdx, blockRows, p, w, ls, emit)
	if err == nil && ls.n != len(ls.sel) {
		rs.Close()
		err = fmt.Errorf("%w: the key columns hold %d rows, the inputs' manifests %d (less the rows folded away)", ErrMismatch, ls.n, len(ls.sel))
	}
	if err != nil {
		// Stop the gathers before waking them, so that none reports the
		// rows missing as an error of its own.
		cancel()
		ls.close()
		close(keysDone)
		gerr := <-gathered
		if gerr != nil && !errors.Is(gerr, context.Canceled) && errors.Is(err, context.Canceled) && m.ctx.Err() == nil {
			return gerr // a gather failed and stopped the key merge
		}
		return err
	}
	ls.close()
	m.opts.Logger.Debug("key merge done", "rows", rs.rows, "runs", rs.runs, "row_source_bytes", rs.size,
		"spilled", rs.spilled, "elapsed", time.Since(start), "in_use", m.budget.InUse(), "overlapped", true)
	m.stats.RowSourceBytes = rs.size
	if rs.spilled {
		m.stats.SpilledBytes = rs.size
	}
	if err := rs.Close(); err != nil {
		cancel()
		close(keysDone)
		<-gathered
		return fmt.Errorf("merger: %w", err)
	}
	close(keysDone)
	if err := <-gathered; err != nil {
		return err
	}
	m.opts.Logger.Debug("gather done", "columns", len(cols), "workers", p.workers, "finishers", p.finishers,
		"defer_finish", p.deferFinish, "elapsed", time.Since(start))
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func epochsOf(ins []input) [2]uint64 {
	var e [2]uint64
	for i, in := range ins {
		me := in.c.Manifest().Epochs
		if i == 0 || me[0] < e[0] {
			e[0] = me[0]
		}
		e[1] = max(e[1], me[1])
	}
	return e
}

// mergeKeys runs the key merge: it writes the output's key columns and
// returns the row-source stream.
// With live non-nil it also fills live, publishing it once per output
// block, for the gathers that run beside it; it checks ctx rather than the
// merge's context, so that a failed gather stops it.
func (m *merge) mergeKeys(ctx context.Context, ins []input, keyIdx []int, blockRows int, p plan, w *columnar.Writer,
	live *liveSel, emit func(int, arrow.Array) error) (_ *rowSource, err error) {
	schema := ins[0].c.Schema()
	enc, err := columnar.NewKeyEncoder(schema, ins[0].c.SortKey())
	if err != nil {
		return nil, fmt.Errorf("merger: %w", err)
	}
	srcs := make([]recordSource, len(ins))
	names := make([]string, len(ins))
	var readers []*columnar.BatchReader
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	for i, in := range ins {
		r, err := in.c.OpenKeyColumns()
		if err != nil {
			return nil, fmt.Errorf("merger: open key columns of input %d (%s): %w", i, in.dir, err)
		}
		readers = append(readers, r)
		srcs[i], names[i] = r, in.dir
		if in.drop != nil {
			srcs[i] = &filteredBatches{src: r, drop: newDropCursor(in.drop), mem: m.budget}
		}
	}
	keyCols := make([]int, len(keyIdx))
	for j := range keyCols {
		keyCols[j] = j
	}
	kw, err := newKway(enc, keyCols, srcs, names, m.budget)
	if err != nil {
		return nil, fmt.Errorf("merger: %w", err)
	}
	defer kw.close()
	builders := make([]columnBuilder, len(keyIdx))
	defer func() {
		for _, b := range builders {
			if b != nil {
				b.release()
			}
		}
	}()
	for j, c := range keyIdx {
		if builders[j], err = newColumnBuilder(schema.Field(c).Type, m.budget, blockRows); err != nil {
			return nil, err
		}
	}
	rsw, err := newRowSourceWriter(len(ins), p.rowSourceMem, m.opts.TempDir, m.budget)
	if err != nil {
		return nil, fmt.Errorf("merger: %w", err)
	}
	defer func() {
		if err != nil {
			rsw.abort()
		}
	}()
	flush := func() error {
		for j, b := range builders {
			if b.len() == 0 {
				continue
			}
			arr := b.finish()
			err := emit(keyIdx[j], arr)
			arr.Release()
			if err != nil {
				return fmt.Errorf("merger: write key column %q: %w", schema.Field(keyIdx[j]).Name, err)
			}
		}
		return nil
	}
	// Views of each input's current key batch, refreshed when it changes.
	lastRec := make([]arrow.RecordBatch, len(ins))
	views := make([][]blockView, len(ins))
	for i := range views {
		views[i] = make([]blockView, len(keyIdx))
	}
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		input, rec, start, cnt, err := kw.next(blockRows - builders[0].len())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("merger: %w", err)
		}
		if rec != lastRec[input] {
			lastRec[input] = rec
			for j := range builders {
				views[input][j] = newBlockView(rec.Column(j))
			}
		}
		for j, b := range builders {
			if err := b.appendRun(&views[input][j], start, cnt); err != nil {
				return nil, err
			}
		}
		if err := rsw.append(input, int64(cnt)); err != nil {
			return nil, err
		}
		if live != nil {
			if err := live.append(input, cnt); err != nil {
				return nil, err
			}
		}
		if builders[0].len() == blockRows {
			if err := flush(); err != nil {
				return nil, err
			}
			if live != nil {
				live.publish()
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	m.stats.Comparisons += kw.comparisons()
	for _, c := range keyIdx {
		if err := w.FinishColumn(c); err != nil {
			return nil, fmt.Errorf("merger: %w", err)
		}
	}
	return rsw.finish()
}

// gatherAll writes the non-key columns cols, a group of the plan's at a
// time per worker, each group in one pass over the row source: horizontal
// plans have one group per worker, vertical plans hand groups to workers as
// they finish the previous one.
//
// With keysDone non-nil the key merge is still running (rs.live): all
// workers but one start at once, the last once keysDone is closed.
func (m *merge) gatherAll(parent context.Context, ins []input, cols []int, rs *rowSource, p plan, blockRows int,
	w *columnar.Writer, keysDone <-chan struct{}, emit func(int, arrow.Array) error) error {
	if len(cols) == 0 {
		return nil
	}
	groups := p.groups
	var grouped int
	for _, g := range groups {
		grouped += len(g)
	}
	if grouped != len(cols) {
		return fmt.Errorf("%w: the plan groups %d columns of %d", ErrInternal, grouped, len(cols))
	}
	workers := max(1, min(p.workers, len(groups)))
	m.stats.Workers = workers
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	early := workers
	if keysDone != nil {
		early = max(1, workers-1)
	}
	work := make(chan []int)
	errs := make(chan error, 2*workers+len(cols))
	fail := func(err error) {
		errs <- err
		cancel()
	}
	// Finishing a column (its last block, footer and fsync) mostly waits on
	// the disk: it runs beside the gathers, p.finishers at a time.
	finishing := make(chan struct{}, max(1, p.finishers))
	var finishers sync.WaitGroup
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.recoverTo(fail)
			if i >= early {
				select {
				case <-keysDone:
				case <-ctx.Done():
					return
				}
			}
			for g := range work {
				if err := m.gatherGroup(ctx, ins, g, rs, blockRows, emit); err != nil {
					fail(err)
					return
				}
				if p.deferFinish {
					continue
				}
				for _, c := range g {
					finishing <- struct{}{}
					finishers.Add(1)
					go func() {
						defer finishers.Done()
						defer func() { <-finishing }()
						defer m.recoverTo(fail)
						if err := w.FinishColumn(c); err != nil {
							fail(fmt.Errorf("merger: %w", err))
						}
					}()
				}
			}
		}()
	}
feed:
	for _, g := range groups {
		select {
		case work <- g:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if p.deferFinish && ctx.Err() == nil {
		// Every column is gathered: finish them all now, so no fsync runs
		// while other columns are still being written.
		for _, c := range cols {
			finishing <- struct{}{}
			finishers.Add(1)
			go func() {
				defer finishers.Done()
				defer func() { <-finishing }()
				defer m.recoverTo(fail)
				if err := w.FinishColumn(c); err != nil {
					fail(fmt.Errorf("merger: %w", err))
				}
			}()
		}
	}
	finishers.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return m.ctx.Err()
}

// recoverTo, deferred in a goroutine of the merge, turns a panic of that
// goroutine into an error wrapping ErrInternal passed to fail, and logs its
// stack. A panic off the caller's goroutine cannot be recovered by the
// caller and would end the process.
func (m *merge) recoverTo(fail func(error)) {
	v := recover()
	if v == nil {
		return
	}
	m.opts.Logger.Error("merger: goroutine panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	fail(fmt.Errorf("%w: panic: %v", ErrInternal, v))
}

// gatherSel drives gathers with selection vectors of one output block each:
// the row source is expanded once per block and applied column by column,
// so one column's input blocks stay in cache while it is applied.
func gatherSel(ctx context.Context, gathers []*columnGather, rr *rowSourceReader, blockRows int, res reserver) error {
	need := int64(2 * blockRows)
	if err := res.Reserve(need); err != nil {
		return fmt.Errorf("merger: selection vector: %w", err)
	}
	defer res.Release(need)
	sel := make([]uint16, blockRows)
	groups, err := newSelGroups(len(gathers[0].srcs), blockRows, res)
	if err != nil {
		return err
	}
	defer res.Release(groupsBytes(len(gathers[0].srcs), blockRows))
	f := selFiller{rr: rr}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := f.fill(sel[:blockRows-gathers[0].outRows])
		if err != nil {
			return fmt.Errorf("merger: %w", err)
		}
		if n == 0 {
			return nil
		}
		gr := groups.group(sel[:n])
		for _, g := range gathers {
			if err := g.takeSelGrouped(sel[:n], gr); err != nil {
				return fmt.Errorf("merger: %w", err)
			}
		}
	}
}

// gatherShared drives gathers with slices of a selection vector of every row.
func gatherShared(ctx context.Context, gathers []*columnGather, sel []uint16, blockRows int, res reserver) error {
	groups, err := newSelGroups(len(gathers[0].srcs), blockRows, res)
	if err != nil {
		return err
	}
	defer res.Release(groupsBytes(len(gathers[0].srcs), blockRows))
	for off := 0; off < len(sel); {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(blockRows-gathers[0].outRows, len(sel)-off)
		gr := groups.group(sel[off : off+n])
		for _, g := range gathers {
			if err := g.takeSelGrouped(sel[off:off+n], gr); err != nil {
				return fmt.Errorf("merger: %w", err)
			}
		}
		off += n
	}
	return nil
}

// gatherRuns drives gathers with batches of runs, for merges of more inputs
// than a selection vector can name.
func gatherRuns(ctx context.Context, gathers []*columnGather, rr *rowSourceReader, res reserver) error {
	if err := res.Reserve(gatherBatchBytes); err != nil {
		return fmt.Errorf("merger: run batch: %w", err)
	}
	defer res.Release(gatherBatchBytes)
	batch := make([]run, 0, gatherBatchRuns)
	for eof := false; !eof; {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch = batch[:0]
		for len(batch) < cap(batch) {
			input, count, err := rr.next()
			if errors.Is(err, io.EOF) {
				eof = true
				break
			}
			if err != nil {
				return fmt.Errorf("merger: %w", err)
			}
			batch = append(batch, run{input, count})
		}
		for _, g := range gathers {
			for _, r := range batch {
				if err := g.take(r.input, r.count); err != nil {
					return fmt.Errorf("merger: %w", err)
				}
			}
		}
	}
	return nil
}

// gatherBatchRuns is how many runs a gather decodes before applying them.
const (
	gatherBatchRuns  = 4096
	gatherBatchBytes = gatherBatchRuns * 16 // sizeof(run)
)

// gatherGroup gathers the columns cols in one pass over the row source,
// opening each input's file of each column once. The caller finishes the
// columns.
func (m *merge) gatherGroup(ctx context.Context, ins []input, cols []int, rs *rowSource, blockRows int,
	emit func(int, arrow.Array) error) (err error) {
	schema := ins[0].c.Schema()
	names := make([]string, len(ins))
	for i, in := range ins {
		names[i] = in.dir
	}
	gathers := make([]*columnGather, 0, len(cols))
	var readers []*columnar.ColumnReader
	defer func() {
		for _, g := range gathers {
			g.release()
		}
		for _, r := range readers {
			r.Close()
		}
	}()
	for _, c := range cols {
		srcs := make([]blockSource, len(ins))
		for i, in := range ins {
			r, err := in.c.OpenColumn(c)
			if err != nil {
				return fmt.Errorf("merger: open column %q of input %d (%s): %w", schema.Field(c).Name, i, in.dir, err)
			}
			readers = append(readers, r)
			srcs[i] = r
			if in.drop != nil {
				srcs[i] = &filteredBlocks{src: r, drop: newDropCursor(in.drop), mem: m.budget}
			}
		}
		g, err := newColumnGather(c, schema.Field(c).Name, schema.Field(c).Type, srcs, names, blockRows, m.budget, emit)
		if err != nil {
			return err
		}
		gathers = append(gathers, g)
	}
	if rs.sel != nil || rs.live != nil {
		if rs.live != nil {
			err = gatherLive(ctx, gathers, rs.live, blockRows, m.budget)
		} else {
			err = gatherShared(ctx, gathers, rs.sel, blockRows, m.budget)
		}
		if err != nil {
			return err
		}
		for _, g := range gathers {
			if err := g.finish(); err != nil {
				return fmt.Errorf("merger: %w", err)
			}
		}
		return nil
	}
	rr, err := rs.newReader(m.budget)
	if err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	defer rr.close()
	if len(ins) <= maxSelInputs {
		if err := gatherSel(ctx, gathers, rr, blockRows, m.budget); err != nil {
			return err
		}
	} else if err := gatherRuns(ctx, gathers, rr, m.budget); err != nil {
		return err
	}
	for _, g := range gathers {
		if err := g.finish(); err != nil {
			return fmt.Errorf("merger: %w", err)
		}
	}
	return nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
