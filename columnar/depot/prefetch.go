package depot

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/strata-db/strata/columnar"
)

// runBytes bounds the bytes one prefetch request fetches from a pack:
// column files adjacent in the store's pack object are fetched together,
// up to this many bytes a request, so a cold container of many small
// column files costs a few requests rather than one a file. It is small
// beside a container (a 100-column container of 8192 rows is about 5MiB)
// so that the queue can order a container's columns among other
// containers': a mergeout's gather phase reads column group by column
// group over all its inputs, and finds the first group of every input
// fetched after one request per input, not after every input whole. A
// request streams to disk, holding a copy buffer, not its bytes.
var runBytes int64 = 2 << 20 // a variable for tests

// rowChains bounds the requests of one column file a PrefetchColumns has
// in flight at once: its segments are fetched by that many chains (with
// two, segments 0, 2, 4, ... and 1, 3, 5, ...), each a run a segment, the
// next queued, by the rows it holds, once the one before it is in. So a
// request's round trip is hidden behind the other's stream, and the
// column's later segments do not take the bandwidth its first ones need.
var rowChains = 2

// Prefetch fetches in the background every column file of src (a Source
// Acquire returned) that the depot does not hold, with up to
// Options.Fetchers ranged GETs in flight over every container being
// prefetched (each streamed into the container's pack, so what a request
// holds in memory is a copy buffer, not its segment). A container the
// store keeps as a pack is fetched in reads of up to 2MiB each, of the
// column files adjacent in the pack; one of an object per column file, a
// file at a time. A file of several segments (one larger than a read) is
// fetched a segment a read, so that its segments come side by side.
//
// The requests of every Prefetch under way share one queue, in the order
// a job reads its inputs: the sort-key columns of every container first,
// then the other columns by their position in the schema, across
// containers (ties in the order they were asked for). A mergeout of many
// inputs thus starts its key merge once the small key columns are in, and
// finds each column group fetched, or being fetched, when it gathers it,
// so the fetches overlap its work. Prefetch keeps the container pinned
// until its requests are done or ctx ends; a file a reader is filling is
// shared with it.
func (d *Depot) Prefetch(ctx context.Context, src columnar.Source) {
	d.prefetch(ctx, src, nil, byColumn)
}

// PrefetchColumns is Prefetch of the column files of the named columns
// (all of them if columns is nil), for a job that reads them side by
// side, block by block (a windower): it fetches them with as few requests
// as Prefetch fetches all, the files adjacent in a pack read together,
// and queues the requests in the order of the rows they hold (each ranked
// by its first block), so that the first blocks of every column come
// first, and the job decodes them while the rest streams in. A file's
// segments are fetched by rowChains chains, not all side by side.
func (d *Depot) PrefetchColumns(ctx context.Context, src columnar.Source, columns []string) {
	d.prefetch(ctx, src, columns, byRow)
}

// prefetchOrder is the order a job reads an input's column files in,
// which its Prefetch queues their requests in.
type prefetchOrder int

const (
	// byColumn is a mergeout's order: the sort-key columns first, then
	// the others by their position.
	byColumn prefetchOrder = iota
	// byRow is a windower's: every column's blocks from the first row on,
	// each request ranked by the first block it holds.
	byRow
)

func (d *Depot) prefetch(ctx context.Context, src columnar.Source, columns []string, order prefetchOrder) {
	s, ok := src.(*source)
	if !ok || s.d != d {
		return
	}
	e := s.e
	var keys []int
	if schema, err := e.m.ArrowSchema(); err == nil && order == byColumn {
		if k, err := e.m.SortKey.Indices(schema); err == nil {
			keys = k
		}
	}
	wanted := func(i int) bool {
		return columns == nil || slices.Contains(columns, e.m.Files[i].Column)
	}
	var keyFiles, rest []int
	d.mu.Lock()
	for _, i := range keys {
		if wanted(i) && e.present[e.m.Files[i].Name] == 0 && !slices.Contains(keyFiles, i) {
			keyFiles = append(keyFiles, i)
		}
	}
	for i := range e.m.Files {
		if wanted(i) && e.present[e.m.Files[i].Name] == 0 && !slices.Contains(keys, i) {
			rest = append(rest, i)
		}
	}
	if len(keyFiles)+len(rest) > 0 {
		e.pins++
	}
	d.mu.Unlock()
	if len(keyFiles)+len(rest) == 0 {
		return // all held: a warm depot
	}
	ps := &source{d: d, e: e, ctx: ctx, counts: s.counts}
	runs := ps.runs(keyFiles, 0, order)
	runs = append(runs, ps.runs(rest, len(keyFiles), order)...)
	d.queue.push(e, runs)
}

// runs cuts files (indices in the manifest, in the order to fetch them)
// into the requests that fetch them. In byColumn order each is ranked by
// the position of its first file, counted from first, and a file alone in
// its request that is fetched in several segments is a request a
// segment, of one rank, so that its segments are fetched side by side. In
// byRow order each is ranked by the first block it holds (a request of
// whole files by 0), and a file of several segments is fetched by
// rowChains chains of runs, a run a segment.
func (s *source) runs(files []int, first int, order prefetchOrder) []*prefetchRun {
	if len(files) == 0 {
		return nil
	}
	// rank ranks a request whose first file is files[p] and whose first
	// block is block.
	rank := func(p, block int) int {
		if order == byRow {
			return block
		}
		return first + p
	}
	var runs []*prefetchRun
	one := func(i, p int) {
		fm := &s.e.m.Files[i]
		segs := segments(fm)
		if len(segs) == 1 {
			runs = append(runs, &prefetchRun{s: s, files: []int{i}, rank: rank(p, 0)})
			return
		}
		chains := len(segs) // a segment each: side by side
		if order == byRow {
			chains = min(rowChains, len(segs))
		}
		file := &segmentedFile{s: s, fm: fm, left: chains}
		for c := range chains {
			r := &prefetchRun{s: s, files: []int{i}, file: file, rank: rank(p, segs[c].block)}
			for seg := c; seg < len(segs); seg += chains {
				r.segs = append(r.segs, seg)
			}
			runs = append(runs, r)
		}
	}
	if loc, err := s.locate(); err == nil && loc.Pack != "" && s.e.pack != nil {
		pos := make(map[int]int, len(files))
		for p, i := range files {
			pos[i] = p
		}
		for _, r := range loc.Ranges(files, runBytes) {
			if r.First == r.Last {
				one(r.First, pos[r.First])
				continue
			}
			run := &prefetchRun{s: s, rank: rank(pos[r.First], 0)}
			for i := r.First; i <= r.Last; i++ {
				run.files = append(run.files, i)
			}
			runs = append(runs, run)
		}
		return runs
	}
	for p, i := range files {
		one(i, p)
	}
	return runs
}

// A prefetchRun is one request of a Prefetch: column files adjacent in
// the container's pack, or one file of a container (in a container of
// column files, or alone in its range of the pack), or one segment of
// such a file.
type prefetchRun struct {
	s     *source
	files []int
	// file, for a run of some segments of a file, is the file the runs
	// of its segments share, and segs the run's, in the order it fetches
	// them.
	file *segmentedFile
	segs []int
	rank int    // its first file's position (byColumn) or its first block (byRow)
	seq  uint64 // the order it was queued in
	left *int   // its Prefetch's runs not done yet, guarded by the queue's mu
}

// fetch does the run's request, unless its Prefetch's ctx has ended, and
// returns the run that follows it in its chain of a file's segments, if
// one does.
func (r *prefetchRun) fetch() *prefetchRun {
	switch {
	case r.file != nil:
		return r.file.fetch(r) // its share of the file ends even if ctx has
	case r.s.ctx.Err() != nil:
	case len(r.files) == 1:
		r.s.prefetch(&r.s.e.m.Files[r.files[0]])
	default:
		r.s.prefetchRun(r.files)
	}
	return nil
}

// segmentedFile is a column file whose segments are prefetched by runs of
// their own: a run a segment (Prefetch), or chains of runs, each run
// fetching the first segment of its chain and queueing the rest
// (PrefetchColumns). The runs share one open of it, the first to start
// opening it and the last to end closing it: a fill is completed when its
// last open closes, and one closed between two segments' runs would be
// dropped with the second segment missing, its first fetched for nothing.
type segmentedFile struct {
	s  *source
	fm *columnar.FileMeta

	mu     sync.Mutex
	opened bool
	f      columnar.File // nil if OpenFile failed or ctx ended first
	left   int           // chains not ended (a run of one segment is a chain)
}

// fetch fetches the first segment of r's chain unless the depot holds
// it, or a reader has fetched it, by now, or the Prefetch's ctx has ended,
// and returns the run of the chain's next segment, ranked by its first
// block; or, at the chain's end (or once a fetch failed or ctx ended),
// nil.
func (sf *segmentedFile) fetch(r *prefetchRun) *prefetchRun {
	ctx := sf.s.ctx
	sf.mu.Lock()
	if !sf.opened && ctx.Err() == nil {
		sf.opened = true
		if f, err := sf.s.OpenFile(sf.fm.Name, sf.fm.Size); err == nil {
			sf.f = f
		}
	}
	f := sf.f
	sf.mu.Unlock()
	if ff, ok := f.(*fillFile); ok && ctx.Err() == nil {
		segs := ff.f.segs
		seg := r.segs[0]
		if seg < len(segs) && ff.ensure(seg, segs[seg].end-segs[seg].start) == nil && len(r.segs) > 1 && r.segs[1] < len(segs) {
			return &prefetchRun{s: r.s, files: r.files, file: sf, segs: r.segs[1:], rank: segs[r.segs[1]].block}
		}
	}
	sf.mu.Lock()
	sf.left--
	last := sf.left == 0
	f = sf.f
	sf.mu.Unlock()
	if last && f != nil {
		f.Close()
	}
	return nil
}

// prefetchQueue holds the requests of every Prefetch under way, lowest
// rank first, and runs them on up to max goroutines, started as requests
// come and ended when none is left.
type prefetchQueue struct {
	d       *Depot
	max     int
	mu      sync.Mutex
	runs    runHeap
	seq     uint64
	workers int
}

// push queues the runs of one Prefetch of e, which unpins e once they are
// all done.
func (q *prefetchQueue) push(e *entry, runs []*prefetchRun) {
	left := len(runs)
	if left == 0 {
		q.d.unpin(e)
		return
	}
	q.mu.Lock()
	for _, r := range runs {
		r.seq, r.left = q.seq, &left
		q.seq++
		heap.Push(&q.runs, r)
	}
	start := min(q.max-q.workers, q.runs.Len())
	q.workers += start
	q.mu.Unlock()
	for range start {
		go q.work()
	}
}

// work runs queued requests until none is left.
func (q *prefetchQueue) work() {
	for {
		q.mu.Lock()
		if q.runs.Len() == 0 {
			q.workers--
			q.mu.Unlock()
			return
		}
		r := heap.Pop(&q.runs).(*prefetchRun)
		q.mu.Unlock()
		next := r.fetch()
		q.mu.Lock()
		if next != nil {
			// The rest of r's chain, queued in its place.
			next.seq, next.left = q.seq, r.left
			q.seq++
			heap.Push(&q.runs, next)
			q.mu.Unlock()
			continue
		}
		*r.left--
		last := *r.left == 0
		q.mu.Unlock()
		if last {
			q.d.unpin(r.s.e)
		}
	}
}

// runHeap orders queued requests by rank, then by the order they came.
type runHeap []*prefetchRun

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].seq < h[j].seq
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*prefetchRun)) }
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}

// prefetch fetches every segment of column file fm not held, if no reader
// holds it by now.
func (s *source) prefetch(fm *columnar.FileMeta) {
	f, err := s.OpenFile(fm.Name, fm.Size)
	if err != nil {
		return
	}
	if ff, ok := f.(*fillFile); ok {
		for seg := range ff.f.segs {
			// Only the segment's bounds, which never change: its state
			// is the fill's mu's.
			sg := &ff.f.segs[seg]
			if ff.ensure(seg, sg.end-sg.start) != nil {
				break
			}
		}
	}
	f.Close()
}

// prefetchRun fetches the column files run, adjacent in the store's pack
// and so in the depot's, with one ranged GET: each file not held and
// with no segment fetched or being fetched is claimed whole (its
// segments marked being fetched, so readers wait for this request rather
// than fetch them), the claimed files adjacent to one another are read
// together, and each file is then completed as any fill is (its CRC-32C
// checked when its last reader closes it). A file held, or partly
// fetched by a reader, is fetched by itself as prefetch does.
func (s *source) prefetchRun(run []int) {
	e := s.e
	var claimed []*fillFile
	var rest []*columnar.FileMeta
	var open []columnar.File
	for _, i := range run {
		fm := &e.m.Files[i]
		f, err := s.OpenFile(fm.Name, fm.Size)
		if err != nil {
			continue
		}
		open = append(open, f)
		ff, ok := f.(*fillFile)
		if !ok {
			continue // held
		}
		if ff.claim() {
			claimed = append(claimed, ff)
		} else {
			rest = append(rest, fm)
		}
	}
	// Requests: runs of claimed files adjacent in the object and the pack.
	for lo := 0; lo < len(claimed); {
		hi := lo + 1
		for hi < len(claimed) {
			a, b := claimed[hi-1].f, claimed[hi].f
			if a.key != b.key || a.objOff+a.fm.Size != b.objOff || a.w != b.w || a.base+a.fm.Size != b.base {
				break
			}
			hi++
		}
		fetchClaimed(s.ctx, claimed[lo:hi])
		lo = hi
	}
	for _, f := range open {
		f.Close()
	}
	for _, fm := range rest {
		s.prefetch(fm)
	}
}

// claim marks every segment of the fill being fetched, if none is
// fetched or being fetched, and reports whether it did.
func (ff *fillFile) claim() bool {
	f := ff.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.segs {
		if s.state != segmentAbsent {
			return false
		}
	}
	for i := range f.segs {
		f.segs[i].claim()
	}
	return true
}

// fetchClaimed fetches the claimed fills group, adjacent in one store
// object and in one pack, with one ranged GET, streamed into the pack:
// readers read each segment's bytes as they are written, and each
// segment is marked present once its last byte is; what the read did not
// bring is marked absent again, for a reader to fetch and report. Each
// segment's CRC-32C is taken as its bytes pass, so completing a file
// fetched whole reads nothing back.
func fetchClaimed(ctx context.Context, group []*fillFile) {
	first, last := group[0].f, group[len(group)-1].f
	start, end := first.objOff, last.objOff+last.fm.Size
	if _, err := groupWriter(group).fetch(ctx, first.key, start, end-start); err != nil && !errors.Is(err, context.Canceled) {
		first.d.log.Debug("depot: prefetch", "key", first.key, "offset", start, "bytes", end-start, "err", err)
	}
}
