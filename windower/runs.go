package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/hugepage"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/messages"
)

// Sorted runs: input that does not fit the grant and is not in a
// group's order is sorted in runs that fit, spilled, and merged into one
// sorted container.

// runRows is how many rows a sorted run of the input cs holds: three
// quarters of what the grant has left once an input block is read, at
// what a row of a run holds (runRowBytes); the rest is slack for what is
// not counted row by row (the writers' blocks, the sorter's small
// buffers). When the parallel sort's buffers leave too few rows a run, the
// runs are sorted and written on one thread. A grant that leaves fewer
// rows a run than fewestRows is too small.
func (r *sortedRuns) runRows(cs []*columnar.Container) (int, error) {
	o := r.o
	block := maxBlockBytes(cs, r.used)
	perRow := r.runRowBytes()
	rows := int((o.Budget.Limit() - o.Budget.InUse() - block) / 4 * 3 / perRow)
	if rows < o.fewestRows() && r.threads() > 1 {
		r.singleThread()
		return r.runRows(cs)
	}
	if rows < o.fewestRows() {
		return 0, fmt.Errorf("%w: a %d-byte grant holds only %d rows per sorted run (%d bytes a row, input blocks of up to %d bytes)",
			ErrGrantTooSmall, o.Budget.Limit(), max(rows, 0), perRow, block)
	}
	return rows, nil
}

// minRunRows is the fewest rows a sorted run, or the sorted stream's
// buffer, may hold: a grant that leaves fewer is refused as too small
// before anything is read. A range bucket on the external path
// (buckets.go) may take down to minBucketRunRows: its stage was accepted
// and may be streaming its result already, and a bucket of long strings
// (its range of the partition key) needs more a row than the stage's
// average, which sized the stage. Its rows are a range's, so short runs
// are few.
const (
	minRunRows       = 1024
	minBucketRunRows = 64
)

// fewestRows is the fewest rows a sorted run or the sorted stream's
// buffer may hold under o (minRunRows).
func (o Options) fewestRows() int {
	if o.bucketDepth > 0 {
		return minBucketRunRows
	}
	return minRunRows
}

// sortedRuns writes the sorted runs of one window group's input under
// tmp and merges them.
type sortedRuns struct {
	p   *plan
	tmp string
	o   Options
	st  *Stats
	// A run's columns: the used input columns, then the computed keys.
	used     []int
	fields   []arrow.Field
	keys     []sortKey // PARTITION BY, then ORDER BY
	keyNames []string  // the run's column of each key
	computed []int     // indexes into keys of keys that need a column
	schema   *arrow.Schema
	sortKey  columnar.SortKey
	s        sorter
	runs     []string // the runs' directories
	// pending is the run being written in the background (nil: none); it
	// sends the write's error when done.
	pending chan error
	mu      sync.Mutex // st.SpilledBytes, which a background write adds to
}

func newSortedRuns(p *plan, tmp string, o Options, st *Stats) *sortedRuns {
	g := p.groups[0]
	r := &sortedRuns{p: p, tmp: tmp, o: o, st: st, used: p.usedColumns()}
	for _, c := range r.used {
		r.fields = append(r.fields, p.schema.schema.Field(c))
	}
	r.keys = append(append([]sortKey(nil), g.partition...), g.order...)
	r.keyNames = make([]string, len(r.keys))
	for i, k := range r.keys {
		if k.expr.col >= 0 {
			r.keyNames[i] = k.expr.colName
			continue
		}
		r.keyNames[i] = fmt.Sprintf("__key%d", i)
		r.computed = append(r.computed, i)
		r.fields = append(r.fields, arrow.Field{Name: r.keyNames[i], Type: k.expr.typ, Nullable: true})
	}
	r.schema = arrow.NewSchema(r.fields, nil)
	inKey := map[string]bool{}
	for i, k := range r.keys {
		if inKey[r.keyNames[i]] {
			continue // a repeated key orders nothing its first use did not
		}
		inKey[r.keyNames[i]] = true
		r.sortKey = append(r.sortKey, columnar.SortColumn{Name: r.keyNames[i], Desc: k.desc, NullsFirst: k.nullsFirst})
	}
	return r
}

// write filters, sorts and spills the rows of in as a run. On more than
// one thread the rows are sorted on all of them (as an in-memory group
// is), and the run is written (encoded, compressed) in the background
// while the caller reads the next chunk into in: the sorted columns are
// gathered out of in first, their bytes reserved until the run is
// written. One run at most is being written; without room in the grant
// for its columns, the run is written before write returns.
func (r *sortedRuns) write(in *input) error {
	p, o := r.p, r.o
	if in.n == 0 {
		return nil
	}
	if len(p.where) > 0 {
		keep, err := evalPredicates(p.where, in.cols, in.n)
		if err != nil {
			return fmt.Errorf("windower: where: %w", err)
		}
		in.compact(keep)
	}
	n := in.n
	// The sort's buffers and the computed keys, until the run is gathered
	// (written, on one thread).
	sorting := int64(n) * sortRowBytes
	for _, i := range r.computed {
		sorting += int64(n) * (kindBytes(r.keys[i].expr.kind) + 1)
	}
	if o.Budget.Reserve(sorting) != nil {
		// The run being written may hold what this one needs.
		if err := r.wait(); err != nil {
			return err
		}
		if err := o.Budget.Reserve(sorting); err != nil {
			return fmt.Errorf("windower: sort a run of %d rows: %w", n, err)
		}
	}
	defer func() { o.Budget.Release(sorting) }()
	sk := make([]sortedKey, len(r.keys))
	kv := make([]*vector, len(r.keys))
	for i, k := range r.keys {
		v, err := k.expr.eval(in.cols, n)
		if err != nil {
			return fmt.Errorf("windower: sort key: %w", err)
		}
		kv[i] = v
		sk[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
	}
	perm := r.sortPerm(sk, kv, n)
	cols := make([]*vector, 0, len(r.fields))
	for _, c := range r.used {
		cols = append(cols, in.cols[c])
	}
	for _, i := range r.computed {
		cols = append(cols, kv[i])
	}
	dir := filepath.Join(r.tmp, fmt.Sprintf("run-%06d", len(r.runs)))
	r.runs = append(r.runs, dir)
	// The run being written holds the gathered columns and the strings
	// they point to (in's, which in lets go of when it is reset).
	if err := r.wait(); err != nil {
		return err
	}
	if r.threads() > 1 {
		held := stringBytes(in, 0, n)
		for _, v := range cols {
			held += int64(n)*(kindBytes(v.kind)+1) + 16 // values, NULL flags
		}
		if o.Budget.Reserve(held) == nil {
			if perm == nil { // in order: copied all the same, as in is reused
				perm = hugepage.Make[int32](n, n)
				for i := range perm {
					perm[i] = int32(i)
				}
			}
			sorted := make([]*vector, len(cols))
			t := r.threads()
			parallelFor(min(t, len(cols)), func(k int) {
				for j := k; j < len(cols); j += min(t, len(cols)) {
					sorted[j] = cols[j].gather(perm, &vector{})
				}
			})
			done := make(chan error, 1)
			r.pending = done
			runsWrittenBehind.Add(1)
			go func() {
				err := r.spill(dir, sorted, nil, max(1, t-1))
				o.Budget.Release(held)
				done <- err
			}()
			return nil
		}
	}
	return r.spill(dir, cols, perm, 1)
}

// singleThread makes the runs sorted and written on one thread.
func (r *sortedRuns) singleThread() { r.o.Threads = 1 }

// runsWrittenBehind counts the runs written in the background, for tests
// to see that they took that path.
var runsWrittenBehind atomic.Int64

// runRowBytes is the memory a row of a run takes while it is sorted and
// written: its input columns in the chunk buffer and its computed keys
// (base), the sort's permutation, keys, scratch and flags, a sorted copy
// of a column and the Arrow copy of the string columns being written. On
// more than one thread, also the parallel sort's buffers and the run
// written in the background meanwhile: its sorted columns (a copy of
// base) and their Arrow strings.
func (r *sortedRuns) runRowBytes() int64 {
	var base, arrow int64
	for _, c := range r.used {
		base += r.p.colBytes(c)
		if r.p.schema.kinds[c] == kindString {
			arrow += r.p.colBytes(c) - kindBytes(kindString) + 5 // value bytes, offset, validity
		}
	}
	var keys int64
	for _, k := range r.keys {
		keys += kindBytes(k.expr.kind) + 1
	}
	for _, i := range r.computed {
		base += kindBytes(r.keys[i].expr.kind) + 1
	}
	n := 2*base + sortRowBytes + arrow
	if r.threads() > 1 {
		n += parallelSortRowBytes + keys + base + arrow
	}
	return n
}

// sortRowBytes is what the single-thread sort holds per row: permutation,
// radix keys and their scratch, flags (as sortedGroup reserves);
// parallelSortRowBytes what the parallel sort adds besides each key's
// copy (as parallelSortPerm reserves).
const (
	sortRowBytes         = 4 + 8 + 8 + 2
	parallelSortRowBytes = 2 + 4 + 4 + 4 + 8 + 4
)

// threads is how many goroutines the runs are sorted and written on.
func (r *sortedRuns) threads() int { return min(max(r.o.Threads, 1), maxThreads) }

// sortPerm sorts the run's rows on its keys (kv, partition keys first),
// by the packed sort or on all the threads when there are enough rows
// and the grant holds the buffers (evaluation.sortKeys), with the
// permutation the single-thread sort gives.
func (r *sortedRuns) sortPerm(sk []sortedKey, kv []*vector, n int) []int32 {
	t := r.threads()
	if n < parallelMinRows {
		t = 1
	}
	// The evaluation sorts with the run's sorter, whose buffers the runs
	// reuse.
	ev := &evaluation{p: r.p, o: r.o, budget: r.o.Budget, s: r.s}
	defer func() { r.s = ev.s }()
	np := len(r.p.groups[0].partition)
	if perm, _, _, ok := ev.sortKeys(&groupKeys{keys: sk, part: kv[:np], order: kv[np:]}, n, t); ok {
		return perm
	}
	return ev.s.sortPerm(sk, n, nil)
}

// spill writes cols, in the order perm (nil: as they are), as the run at
// dir, writing up to t columns at once.
func (r *sortedRuns) spill(dir string, cols []*vector, perm []int32, t int) error {
	o := r.o
	w, err := r.create(dir)
	if err != nil {
		return fmt.Errorf("windower: spill run: %w", err)
	}
	t = min(t, len(cols))
	errs := make([]error, t)
	parallelFor(t, func(k int) {
		for j := k; j < len(cols); j += t {
			arr := cols[j].gather(perm, &vector{}).toArrow(o.Budget)
			err := w.WriteColumn(j, arr)
			arr.Release()
			if err != nil {
				errs[k] = err
				return
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		w.Abort()
		return fmt.Errorf("windower: spill run %s: %w", dir, err)
	}
	m, err := w.Commit()
	if err != nil {
		w.Abort()
		return fmt.Errorf("windower: spill run %s: %w", dir, err)
	}
	r.mu.Lock()
	r.st.SpilledBytes += m.CompressedBytes()
	r.mu.Unlock()
	return nil
}

// create starts the container of a run, or of the runs concatenated, at
// dir.
func (r *sortedRuns) create(dir string) (*columnar.Writer, error) {
	p, o := r.p, r.o
	// Uncompressed: a run is read once, by the merge, and removed; LZ4
	// would cost more CPU than the page cache saves.
	return columnar.Create(dir, columnar.WriterOptions{Table: "windower", Projection: "run", ID: filepath.Base(dir),
		Schema: r.schema, SortKey: r.sortKey, Allocator: o.Budget, Compression: columnar.CompressionNone, BlockRows: spillBlockRows(p.rowBytes()+9*int64(len(r.computed)), o.Budget.Limit()),
		NoSync: true}) // spilled: made again if lost
}

// wait waits for the run being written in the background, if any, and
// returns its error.
func (r *sortedRuns) wait() error {
	if r.pending == nil {
		return nil
	}
	err := <-r.pending
	r.pending = nil
	return err
}

// merge merges the runs into one sorted container and returns its
// directory (the run itself when there is one).
func (r *sortedRuns) merge(ctx context.Context) (string, error) {
	o, st := r.o, r.st
	merged := filepath.Join(r.tmp, "sorted")
	switch len(r.runs) {
	case 0:
		w, err := columnar.Create(merged, columnar.WriterOptions{Table: "windower", Projection: "run", ID: "sorted", Schema: r.schema, SortKey: r.sortKey, NoSync: true})
		if err != nil {
			return "", err
		}
		if _, err := w.Commit(); err != nil {
			return "", err
		}
	case 1:
		merged = r.runs[0]
	default:
		if len(r.sortKey) == 0 {
			// A group without PARTITION BY or ORDER BY: its runs are in
			// no order, so any order of their rows is sorted, and the
			// merger takes only inputs with a sort key.
			if err := r.concat(ctx, merged); err != nil {
				return "", err
			}
			break
		}
		o.Logger.Debug("merging sorted runs", "runs", len(r.runs))
		ms, err := merger.Merge(ctx, r.runs, merged, merger.Options{
			Grant: o.Budget.Limit() - o.Budget.InUse(), Within: o.Budget, TempDir: r.tmp, Logger: o.Logger, Parallelism: o.Threads, NoSync: true, Compression: columnar.CompressionNone,
		})
		if err != nil {
			return "", fmt.Errorf("windower: merge %d sorted runs: %w", len(r.runs), err)
		}
		st.PeakBytes = max(st.PeakBytes, o.Budget.Peak()) // the merge's memory beside the run's
		st.SpilledBytes += ms.BytesOut + ms.SpilledBytes
		for _, run := range r.runs {
			r.o.removals.remove(run)
		}
	}
	return merged, nil
}

// concat writes the runs one after another as the container at dir, a
// block of every column at a time, and removes them.
func (r *sortedRuns) concat(ctx context.Context, dir string) error {
	o := r.o
	w, err := r.create(dir)
	if err != nil {
		return fmt.Errorf("windower: concatenate sorted runs: %w", err)
	}
	all := make([]int, len(r.fields))
	for i := range all {
		all[i] = i
	}
	for _, run := range r.runs {
		if err := r.append(ctx, w, run, all); err != nil {
			w.Abort()
			return fmt.Errorf("windower: concatenate sorted runs: %w", err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		return fmt.Errorf("windower: concatenate sorted runs: %w", err)
	}
	o.Logger.Debug("concatenated runs without a sort key", "runs", len(r.runs))
	r.st.SpilledBytes += m.CompressedBytes()
	for _, run := range r.runs {
		r.o.removals.remove(run)
	}
	return nil
}

// append writes the rows of the run at dir to w.
func (r *sortedRuns) append(ctx context.Context, w *columnar.Writer, dir string, cols []int) error {
	c, err := columnar.Open(dir, columnar.OpenOptions{Allocator: r.o.Budget, Logger: r.o.Logger})
	if err != nil {
		return err
	}
	br, err := c.OpenColumns(cols)
	if err != nil {
		return err
	}
	defer br.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
}

// rewriteForRuns rebuilds the query from the plan's source query shape:
// every window call's keys become the run's key columns.
func rewriteForRuns(p *plan, keyNames []string) *messages.WindowQuery {
	q := p.source
	out := &messages.WindowQuery{Table: q.Table, Select: make([]messages.SelectItem, len(q.Select)), Limit: q.Limit}
	g := p.groups[0]
	np := len(g.partition)
	for i, it := range q.Select {
		out.Select[i] = it
		if it.Window == nil {
			continue
		}
		w := *it.Window
		w.PartitionBy = make([]messages.Expr, np)
		for k := 0; k < np; k++ {
			w.PartitionBy[k] = messages.Expr{Column: keyNames[k]}
		}
		w.OrderBy = make([]messages.SortItem, len(g.order))
		for k, o := range g.order {
			w.OrderBy[k] = messages.SortItem{Expr: messages.Expr{Column: keyNames[np+k]}, Desc: o.desc, NullsFirst: o.nullsFirst}
		}
		out.Select[i].Window = &w
	}
	return out
}

// readChunks reads the used columns of the containers, without the rows
// drop names, in chunks of at most chunkRows rows, and of no more string
// bytes than chunkRows rows of the input's average hold, and calls fn
// with each, and a last time with what is left (perhaps nothing). A
// block is cut where a chunk fills, so the buffer holds chunkRows rows
// and no more. The columns' blocks are read and decoded on up to threads
// goroutines at once.
//
// On more than one thread, when overlap is set and reports true once fn
// took the first chunk, fn takes each later chunk on a goroutine of its
// own while the next is read (readOverlapped). fn must not keep a chunk
// after it returns. When overlap is set, on any number of threads, the
// first chunk is a quarter of chunkRows: until fn has it, nothing
// overlaps the reading, which on its own keeps one thread busy.
func readChunks(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, used []int, chunkRows int, budget *columnar.Budget, threads int, fn func(*input) error, overlap func() bool) error {
	r := &chunkReader{cs: cs, drop: drop, used: used, threads: threads}
	defer r.close()
	in, reserved, err := reserveBuffer(p, chunkRows, budget)
	if err != nil {
		return err
	}
	defer budget.Release(reserved)
	strCap := p.stringCap(chunkRows)
	first := chunkRows
	if overlap != nil {
		first = max(chunkRows/4, 1)
	}
	done, err := r.fill(ctx, in, first, strCap)
	if err == nil {
		err = fn(in)
	}
	if err != nil || done {
		return err
	}
	if overlap != nil && threads > 1 && overlap() {
		return readOverlapped(ctx, p, r, in, max(chunkRows/2, 1), budget, fn)
	}
	for !done {
		in.reset()
		if done, err = r.fill(ctx, in, chunkRows, strCap); err != nil {
			return err
		}
		if err := fn(in); err != nil {
			return err
		}
	}
	return nil
}

// chunksReadBehind counts the chunks taken while the next was read, for
// tests to see that they took that path.
var chunksReadBehind atomic.Int64

// readOverlapped reads the rest of r's input in chunks of chunkRows rows
// into two buffers, first and one more of chunkRows rows, while fn takes
// the chunk in the other on a goroutine of its own: the reading and
// decoding overlap what fn does. The chunks are half those before, so
// that the two buffers (and what fn holds of the chunk it took and the
// one before) take less memory than one buffer and fn's copies of two
// chunks did.
func readOverlapped(ctx context.Context, p *plan, r *chunkReader, first *input, chunkRows int, budget *columnar.Budget, fn func(*input) error) error {
	second, reserved, err := reserveBuffer(p, chunkRows, budget)
	if err != nil {
		return err
	}
	defer budget.Release(reserved)
	free := make(chan *input, 2)
	full := make(chan *input, 2)
	free <- first
	free <- second
	taken := make(chan error, 1)
	var failed atomic.Bool
	go func() {
		var err error
		for in := range full {
			chunksReadBehind.Add(1)
			if err == nil {
				if err = fn(in); err != nil {
					failed.Store(true)
				}
			}
			free <- in
		}
		taken <- err
	}()
	strCap := p.stringCap(chunkRows)
	for done := false; !done && !failed.Load(); {
		in := <-free
		in.reset()
		if done, err = r.fill(ctx, in, chunkRows, strCap); err != nil {
			break
		}
		full <- in
	}
	close(full)
	if ferr := <-taken; ferr != nil {
		return ferr
	}
	return err
}

// chunkReader reads the used columns of containers cs, without the rows
// drop names, into chunks: a block at a time, cut where a chunk fills.
type chunkReader struct {
	cs      []*columnar.Container
	drop    superseded
	used    []int
	threads int

	i     int                   // the container being read
	br    *columnar.BatchReader // its reader; nil: not open
	f     rowFilter             // its superseded rows
	rec   arrow.RecordBatch     // the block being read; nil: the next
	off   int64                 // rows of rec taken
	first int64                 // the container's row of rec's first
}

// fill appends rows to in until it holds rows rows or more than strCap
// string bytes, or the input ends, which it reports.
func (r *chunkReader) fill(ctx context.Context, in *input, rows int, strCap int64) (done bool, err error) {
	var strHeld int64
	for in.n < rows && strHeld <= strCap {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if r.rec == nil {
			more, err := r.next()
			if err != nil || !more {
				return !more, err
			}
		}
		c := r.cs[r.i]
		take := min(r.rec.NumRows()-r.off, int64(rows-in.n))
		// Cut where the chunk's strings pass strCap, after one row at
		// least: a block of long strings taken whole holds far more than
		// the chunk was planned for.
		if take = rowsWithinStrings(r.rec, r.off, take, strCap-strHeld, in.n == 0); take == 0 {
			return false, nil
		}
		part := r.rec.NewSlice(r.off, r.off+take)
		start := in.n
		err := in.appendRecord(part, r.used)
		part.Release()
		if err == nil && r.f.active() {
			_, err = r.f.apply(in, start, r.first+r.off)
		}
		if err != nil {
			return false, fmt.Errorf("windower: read %s: %w", c.Dir(), err)
		}
		strHeld += stringBytes(in, start, in.n)
		if r.off += take; r.off == r.rec.NumRows() {
			r.first += r.rec.NumRows()
			r.rec.Release()
			r.rec = nil
		}
	}
	return false, nil
}

// rowsWithinStrings returns how many of the take rows of rec from off
// on hold at most room bytes of strings in rec's string columns: at least
// one if atLeastOne, else perhaps none.
func rowsWithinStrings(rec arrow.RecordBatch, off, take, room int64, atLeastOne bool) int64 {
	var offsets []func(i int64) int64
	for _, col := range rec.Columns() {
		switch a := col.(type) {
		case *array.String:
			offsets = append(offsets, offsetsOf(a.ValueOffsets()))
		case *array.LargeString:
			offsets = append(offsets, offsetsOf(a.ValueOffsets()))
		case *array.Binary:
			offsets = append(offsets, offsetsOf(a.ValueOffsets()))
		case *array.LargeBinary:
			offsets = append(offsets, offsetsOf(a.ValueOffsets()))
		}
	}
	bytes := func(k int64) int64 { // of rows [off, off+k)
		var n int64
		for _, at := range offsets {
			n += at(off+k) - at(off)
		}
		return n
	}
	if bytes(take) <= room {
		return take // the common case: the whole slice fits
	}
	// The string bytes grow with the rows taken: the most rows within
	// room, by bisection.
	k := int64(sort.Search(int(take), func(k int) bool { return bytes(int64(k)+1) > room }))
	if k == 0 && atLeastOne {
		k = 1
	}
	return k
}

// offsetsOf returns the offset of row i of a string array whose
// offsets are offs.
func offsetsOf[T int32 | int64](offs []T) func(i int64) int64 {
	return func(i int64) int64 { return int64(offs[i]) }
}

// next reads the next block into rec, opening the next container when
// one ends; it reports false when every container is read.
func (r *chunkReader) next() (bool, error) {
	for r.i < len(r.cs) {
		c := r.cs[r.i]
		if r.br == nil {
			br, err := c.OpenColumns(r.used)
			if err != nil {
				return false, fmt.Errorf("windower: read %s: %w", c.Dir(), err)
			}
			br.ReadConcurrently(r.threads)
			br.ReuseBuffers() // fill copies each block into the chunk and releases it before the next
			r.br, r.f, r.first = br, rowFilter{dropped: r.drop.of(r.i)}, 0
		}
		rec, err := r.br.Next()
		if err == nil {
			r.rec, r.off = rec, 0
			return true, nil
		}
		if !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("windower: read %s: %w", c.Dir(), err)
		}
		err = r.br.Close()
		r.br = nil
		if err != nil {
			return false, err
		}
		r.i++
	}
	return false, nil
}

// close releases the block and the reader being read, if any.
func (r *chunkReader) close() {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	if r.br != nil {
		r.br.Close()
		r.br = nil
	}
}
