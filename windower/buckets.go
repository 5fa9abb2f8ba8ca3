package windower

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// Range buckets: how a stage whose window group has PARTITION BY runs when
// its input does not fit the grant.
//
// Rather than sorting the whole input in runs and merging them, the stage
// deals its rows into buckets of whole partitions, by ranges of the
// partition key, and evaluates each bucket on its own, in memory when it
// fits:
//
//  1. The first chunk of input (as many rows as a sorted run) gives the
//     ranges: a sample of its rows' partition keys is sorted and B-1 of
//     them at even quantiles, distinct, start buckets 1..B-1. B is sized
//     so that a bucket's in-memory evaluation needs about bucketFill
//     percent of its share of the grant. If the sample shows a partition larger than a bucket may
//     hold (few partitions, or one that dominates), the stage takes the
//     sorted runs instead, from that chunk on.
//  2. Every chunk's rows (WHERE applied, superseded rows dropped) go to
//     their buckets: a container per bucket in the spill directory,
//     holding the input columns the query uses, in input order. Nothing
//     is sorted yet.
//  3. Up to bucketWorkers buckets at a time are read and evaluated, each
//     under a sub-budget of an equal share of the grant (columnar.Budget
//     Sub), the run's threads divided among them; each bucket's result is
//     a container of its own, and the stage's output is those containers
//     in bucket order. A bucket that would not fit in memory (the sample
//     missed how large its partitions are) runs the external path
//     afterwards, on its own, with the whole grant and every thread.
//
// Buckets are consecutive ranges of the partition key, and within a
// bucket the group is always sorted (never hash-numbered, see
// Options.inBucket), so the buckets' results one after another are the
// rows in (partition, order) order, ties in input order: what the sorted
// runs and their merge give, whatever the thread count and whichever
// buckets fit. Against the sorted runs, no merge runs (the merge of the
// runs' keys is one goroutine), the input is spilled once instead of twice
// (runs, then their merge), and buckets evaluate in parallel.

const (
	// bucketWorkers is how many buckets are evaluated at once, on the
	// run's threads divided among them. It is fixed, not the thread count,
	// so that whether a bucket fits its share does not depend on threads.
	bucketWorkers = 2
	// maxBuckets bounds the buckets of a stage (the writers' tails and the
	// containers in the spill directory).
	maxBuckets = 4096
	// bucketFill is the percentage of its share of the grant that a
	// bucket is planned to need: the rest absorbs buckets the sample made
	// larger than planned.
	bucketFill = 70
	// bucketSample is how many rows of the first chunk are sampled for the
	// ranges.
	bucketSample = 1 << 14
)

// buckets deals a stage's input into range buckets and evaluates them.
type buckets struct {
	p     *plan
	runs  *sortedRuns // the fallback; also the used columns
	tmp   string
	o     Options
	st    *Stats
	rows  int64 // input rows, for sizing
	avail int64 // the grant left when the stage started
	// decided is set once the first rows have been seen; active tells
	// whether they went to buckets (false: to sorted runs).
	decided, active bool
	keys            []sortedKey // the splitters, one row each, by partition key
	ints            []int64     // the splitters of one integer key without NULLs (fast path)
	fast            bool
	schema          *arrow.Schema // a bucket's columns: the used input columns
	blockRows       int
	writers         []*columnar.Writer
	written         []int64 // rows dealt to each bucket
}

// bucketStages and bucketsExternal count the stages dealt to range
// buckets and the buckets evaluated on the external path, for tests to
// see which paths ran.
var bucketStages, bucketsExternal atomic.Int64

// newBuckets prepares the range buckets of a stage over cs, falling back
// to r's sorted runs.
func newBuckets(p *plan, r *sortedRuns, cs []*columnar.Container, tmp string, o Options, st *Stats) *buckets {
	b := &buckets{p: p, runs: r, tmp: tmp, o: o, st: st, avail: o.Budget.Available()}
	for _, c := range cs {
		b.rows += c.Rows()
	}
	b.schema = arrow.NewSchema(r.fields[:len(r.used)], nil)
	return b
}

// fit is the most a bucket evaluated in memory may need: its share of the
// grant when bucketWorkers run at once.
func (b *buckets) fit() int64 { return b.avail / bucketWorkers }

// write takes a chunk of input: on the first rows it decides between
// buckets and sorted runs, then deals the chunk to whichever it chose.
func (b *buckets) write(in *input) error {
	if b.decided && !b.active {
		return b.runs.write(in)
	}
	if in.n == 0 {
		return nil
	}
	if len(b.p.where) > 0 {
		keep, err := evalPredicates(b.p.where, in.cols, in.n)
		if err != nil {
			return fmt.Errorf("windower: where: %w", err)
		}
		in.compact(keep)
		if in.n == 0 {
			return nil
		}
	}
	g := b.p.groups[0]
	kv := make([]sortedKey, len(g.partition))
	for i, k := range g.partition {
		v, err := k.expr.eval(in.cols, in.n)
		if err != nil {
			return fmt.Errorf("windower: partition key: %w", err)
		}
		kv[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
	}
	if !b.decided {
		b.decided = true
		b.active = b.chooseRanges(kv, in.n)
		if !b.active {
			b.o.Logger.Debug("window stage sorts runs: partitions too large for range buckets")
			return b.runs.write(in)
		}
		bucketStages.Add(1)
		b.o.Logger.Debug("window stage deals its input to range buckets", "buckets", len(b.writers))
	}
	return b.deal(in, kv)
}

// chooseRanges picks the splitters from the partition keys kv of the
// first n rows, or reports that partitions are too large for buckets.
func (b *buckets) chooseRanges(kv []sortedKey, n int) bool {
	need := b.p.memoryPerRow() * max(b.rows, int64(n))
	nb := int(min(max(need/max(b.fit()*bucketFill/100, 1)+1, 2), maxBuckets))
	s := min(n, bucketSample)
	sample := make([]int32, s)
	for i := range sample {
		sample[i] = int32(int64(i) * int64(n) / int64(s))
	}
	slices.SortStableFunc(sample, func(x, y int32) int { return compareRows(kv, int(x), int(y)) })
	// The largest partition in the sample, as a share of the input.
	longest := 1
	for i, run := 1, 1; i < s; i++ {
		if compareRows(kv, int(sample[i-1]), int(sample[i])) == 0 {
			run++
			longest = max(longest, run)
		} else {
			run = 1
		}
	}
	if float64(longest)/float64(s)*float64(need) > float64(b.fit())*3/4 {
		return false
	}
	var at []int32
	for j := 1; j < nb; j++ {
		row := sample[j*s/nb]
		if len(at) > 0 && compareRows(kv, int(at[len(at)-1]), int(row)) == 0 {
			continue
		}
		if compareRows(kv, int(sample[0]), int(row)) == 0 {
			continue // bucket 0 would hold nothing the sample saw
		}
		at = append(at, row)
	}
	if len(at) == 0 {
		return false
	}
	b.keys = make([]sortedKey, len(kv))
	for i, k := range kv {
		v := k.v.gather(at, &vector{})
		for j := range v.strs {
			v.strs[j] = strings.Clone(v.strs[j]) // outlives the chunk
		}
		b.keys[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
	}
	if k := b.keys[0]; len(b.keys) == 1 && (k.v.kind == kindInt || k.v.kind == kindBool) && !k.desc && k.v.nulls == nil {
		b.fast, b.ints = true, k.v.ints
	}
	nb = len(at) + 1
	b.writers = make([]*columnar.Writer, nb)
	b.written = make([]int64, nb)
	// A block of every column of every bucket waits in its writer until
	// it fills: an eighth of the grant at most.
	var rowBytes int64
	for _, c := range b.runs.used {
		rowBytes += b.p.colBytes(c)
	}
	b.blockRows = min(spillBlockRows(rowBytes, b.o.Budget.Limit()), int(max(64, b.avail/8/int64(nb)/max(rowBytes, 1))))
	return true
}

// bucketOf returns the bucket of row i of keys kv: the number of
// splitters at or below its key.
func (b *buckets) bucketOf(kv []sortedKey, i int) int {
	if b.fast {
		v := kv[0].v
		if v.isNull(i) {
			if kv[0].nullsFirst {
				return 0
			}
			return len(b.ints)
		}
		x := v.ints[i]
		lo, hi := 0, len(b.ints)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if b.ints[m] <= x {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo
	}
	lo, hi := 0, b.keys[0].v.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareRowsTo(kv, i, b.keys, m) >= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// deal appends the rows of in (keys kv) to their buckets' containers.
func (b *buckets) deal(in *input, kv []sortedKey) error {
	n, nb := in.n, len(b.writers)
	t := min(max(b.o.Threads, 1), maxThreads)
	of := make([]uint16, n)
	ranges := splitRows(n, t)
	counts := make([][]int, len(ranges))
	parallelFor(len(ranges), func(k int) {
		c := make([]int, nb)
		for i := ranges[k][0]; i < ranges[k][1]; i++ {
			x := b.bucketOf(kv, i)
			of[i] = uint16(x)
			c[x]++
		}
		counts[k] = c
	})
	// Rows grouped by bucket, in input order within each.
	start := make([]int, nb+1)
	for x := 0; x < nb; x++ {
		for k := range counts {
			start[x+1] += counts[k][x]
		}
		start[x+1] += start[x]
	}
	perm := make([]int32, n)
	next := slices.Clone(start[:nb])
	for i, x := range of {
		perm[next[x]] = int32(i)
		next[x]++
	}
	for x := 0; x < nb; x++ {
		if start[x+1] > start[x] && b.writers[x] == nil {
			w, err := columnar.Create(b.dir(x), columnar.WriterOptions{Table: "windower", Projection: "bucket", ID: filepath.Base(b.dir(x)),
				Schema: b.schema, Allocator: b.o.Budget, Compression: columnar.CompressionNone, BlockRows: b.blockRows, NoSync: true})
			if err != nil {
				return fmt.Errorf("windower: spill bucket %d: %w", x, err)
			}
			b.writers[x] = w
		}
	}
	cols := b.runs.used
	t = min(t, len(cols))
	errs := make([]error, t)
	parallelFor(t, func(k int) {
		for j := k; j < len(cols); j += t {
			for x := 0; x < nb; x++ {
				lo, hi := start[x], start[x+1]
				if lo == hi {
					continue
				}
				arr := in.cols[cols[j]].gather(perm[lo:hi], &vector{}).toArrow(b.o.Budget)
				err := b.writeColumn(x, j, arr)
				arr.Release()
				if err != nil {
					errs[k] = fmt.Errorf("windower: spill bucket %d: %w", x, err)
					return
				}
			}
		}
	})
	for x := 0; x < nb; x++ {
		b.written[x] += int64(start[x+1] - start[x])
	}
	return errors.Join(errs...)
}

// writeColumn appends arr to column j of bucket x without the writer
// keeping arr: the rows that complete the bucket's pending block and the
// whole blocks after them are written from arr, and the rest, which waits
// for the next chunk, is copied first.
func (b *buckets) writeColumn(x, j int, arr arrow.Array) error {
	w, br, n := b.writers[x], b.blockRows, arr.Len()
	direct := 0
	if head := (br - int(b.written[x]%int64(br))) % br; n >= head {
		direct = head + (n-head)/br*br
	}
	if direct > 0 {
		part := array.NewSlice(arr, 0, int64(direct))
		err := w.WriteColumn(j, part)
		part.Release()
		if err != nil {
			return err
		}
	}
	if direct == n {
		return nil
	}
	part := array.NewSlice(arr, int64(direct), int64(n))
	tail, err := array.Concatenate([]arrow.Array{part}, b.o.Budget)
	part.Release()
	if err != nil {
		return fmt.Errorf("copy %d rows: %w", n-direct, err)
	}
	err = w.WriteColumn(j, tail)
	tail.Release()
	return err
}

func (b *buckets) dir(x int) string { return filepath.Join(b.tmp, fmt.Sprintf("bucket-%05d", x)) }

// finish commits the buckets' containers, or aborts them if err is not
// nil.
func (b *buckets) finish(err error) error {
	var errs []error
	for _, w := range b.writers {
		if w == nil {
			continue
		}
		if err != nil {
			w.Abort()
			continue
		}
		m, cerr := w.Commit()
		if cerr != nil {
			w.Abort()
			errs = append(errs, cerr)
			continue
		}
		b.st.SpilledBytes += m.CompressedBytes()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("windower: spill buckets: %w", err)
	}
	return nil
}

// evaluate evaluates every bucket and returns the directories of their
// results, in bucket order. Buckets that fit their share of the grant are
// evaluated in memory, bucketWorkers at a time; the others then run the
// external path one at a time, each with the whole grant and every
// thread.
func (b *buckets) evaluate(ctx context.Context) ([]string, error) {
	var todo []int
	for x, w := range b.writers {
		if w != nil {
			todo = append(todo, x)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	q := *b.p.source
	q.Where, q.Limit = nil, 0 // WHERE ran as the rows were dealt; the result applies LIMIT
	workers := min(bucketWorkers, max(b.o.Threads, 1), len(todo))
	share, threads := b.avail/int64(workers), max(b.o.Threads/workers, 1)
	outs := make([]string, len(todo))
	var (
		next     atomic.Int64
		mu       sync.Mutex
		errs     []error
		deferred []int // indexes into todo of the buckets left to the external path
		failed   atomic.Bool
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	add := func(i int, out string, st Stats) {
		outs[i] = out
		b.st.Partitions += st.Partitions
		b.st.Rows += st.Rows
		b.st.SpilledBytes += st.SpilledBytes
	}
	parallelFor(workers, func(int) {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= len(todo) {
				return
			}
			out, st, err := b.evaluateBucket(ctx, &q, todo[i], share, threads, false)
			mu.Lock()
			switch {
			case err != nil:
				errs = append(errs, err)
				failed.Store(true)
				cancel()
			case out == "":
				deferred = append(deferred, i)
			default:
				add(i, out, st)
			}
			mu.Unlock()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.Sort(deferred)
	for _, i := range deferred {
		bucketsExternal.Add(1)
		out, st, err := b.evaluateBucket(ctx, &q, todo[i], b.avail, b.o.Threads, true)
		if err != nil {
			return nil, err
		}
		add(i, out, st)
	}
	b.st.PeakBytes = max(b.st.PeakBytes, b.o.Budget.Peak())
	return outs, nil
}

// evaluateBucket evaluates query q over bucket x under a sub-budget of
// share bytes on threads goroutines, writes its result as a container and
// returns its directory and the bucket's figures (SpilledBytes counting
// the result). In memory unless external; a bucket that does not fit in
// memory is left as it is, and the directory returned is empty.
func (b *buckets) evaluateBucket(ctx context.Context, q *messages.WindowQuery, x int, share int64, threads int, external bool) (string, Stats, error) {
	budget := b.o.Budget.Sub(share)
	o := b.o
	o.Budget, o.Threads, o.TempDir, o.inBucket = budget, threads, b.tmp, true
	c, err := columnar.Open(b.dir(x), columnar.OpenOptions{Allocator: budget, Logger: o.Logger})
	if err != nil {
		return "", Stats{}, fmt.Errorf("windower: open bucket %d: %w", x, err)
	}
	cs := []*columnar.Container{c}
	p, err := compile(q, c.Schema())
	if err != nil {
		return "", Stats{}, fmt.Errorf("windower: plan of bucket %d: %w", x, err)
	}
	p.measureStrings(cs)
	rows := c.Rows()
	var res *Result
	if external {
		res, err = runExternal(ctx, p, cs, nil, rows, o)
	} else {
		res, err = b.inMemory(ctx, p, cs, o)
	}
	if err != nil {
		return "", Stats{}, fmt.Errorf("windower: bucket %d: %w", x, err)
	}
	if res == nil {
		return "", Stats{}, nil
	}
	defer res.Close()
	out := b.dir(x) + ".out"
	m, err := WriteContainer(res, out, columnar.WriterOptions{Table: "windower", Projection: "bucket", ID: filepath.Base(out),
		Allocator: budget, Compression: columnar.CompressionNone, BlockRows: spillBlockRows(p.rowBytes(), o.Budget.Limit()), NoSync: true})
	if err != nil {
		return "", Stats{}, err
	}
	st := res.Stats()
	st.SpilledBytes += m.CompressedBytes()
	os.RemoveAll(b.dir(x)) // consumed
	return out, st, nil
}

// inMemory evaluates the one-group plan p over a bucket's container in
// memory, or returns nil if it needs more than a bucket may (fit) or its
// results repeat long strings that do not fit beside it.
func (b *buckets) inMemory(ctx context.Context, p *plan, cs []*columnar.Container, o Options) (*Result, error) {
	rows := cs[0].Rows()
	if p.memoryPerRow()*rows > b.fit() {
		return nil, nil
	}
	in, err := loadContainers(ctx, p, cs, nil, rows, o.Budget, o.Threads)
	if err != nil {
		return nil, err
	}
	if extra := p.repeatedStringBytes(in); extra > o.Budget.Available() {
		o.Budget.Release(in.reserved)
		return nil, nil
	}
	return evaluate(ctx, p, in, o)
}
