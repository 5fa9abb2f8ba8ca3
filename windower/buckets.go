package windower

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/hugepage"
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
//  1. The first chunk of input (a quarter of the rows of one thread's
//     sorted run: the rest of the input is read while it is dealt, on
//     more than one thread) gives the ranges: a sample of its rows' partition keys is sorted
//     and cut, where the key changes, into B pieces of about equal rows;
//     the first key of each piece but the first starts a bucket. B is
//     sized so that a bucket's in-memory evaluation needs about
//     bucketFill percent of its share of the grant; a partition larger
//     than a piece is a bucket of its own. If one partition holds most of
//     the sample, or the grant has no room for the buckets' blocks beside
//     the chunks and the block read, the stage takes the sorted runs
//     instead, from that chunk on.
//  2. Every chunk's rows (WHERE applied, superseded rows dropped) go to
//     their buckets: a container per bucket in the spill directory,
//     holding the input columns the query uses, in input order. Nothing
//     is sorted yet. Each chunk's columns are scattered into bucket
//     order (into the storage of the chunk written before) and written
//     in the background while the next chunk is dealt; what a chunk
//     deals to a bucket waits in the bucket's block buffers
//     (blockbuffer.go) until a block fills, the buffers as large as the
//     grant leaves room for. On more than one thread the chunks after
//     the first are half as large, and each is dealt on a goroutine of
//     its own while the next is read and decoded (readChunks), so that
//     reading, dealing and writing overlap.
//  3. Up to bucketWorkers buckets at a time are read and evaluated, each
//     under a sub-budget of an equal share of the grant (columnar.Budget
//     Sub), the run's threads divided among them; each bucket's result is
//     a container of its own, and the stage's output is those containers
//     in bucket order. A bucket that would not fit in memory (the sample
//     missed how large its partitions are) runs the external path
//     afterwards, on its own, with the whole grant and every thread:
//     its rows go to range buckets of their own, cut from a sample of
//     them, unless one partition holds most of them or the bucket is
//     already one of a bucket's (maxBucketDepth); then the sorted runs.
//     The first chunk is a poor sample of keys that grow common later in
//     the input: at 100M rows, 34 of count_by_s's 219 buckets did not
//     fit, and their sorted runs were most of the query's time.
//
// Buckets are consecutive ranges of the partition key, so the buckets'
// results one after another are the rows by partition, each partition in
// its group's order: a sorted group's rows in (partition, order) order,
// ties in input order, as the sorted runs and their merge give them; a
// group numbered by hash partitions (unsorted.go) gives each bucket's rows
// in input order. Nothing that decides which rows share a bucket and how
// a bucket is evaluated depends on the threads: the chunks are sized as
// for one thread, and a bucket is evaluated in memory when it needs no
// more than half the grant (fit), whatever the share its worker holds. So
// a query gives the same rows in the same order on any number of threads
// (the chunks after the first only cut the input differently: a bucket's
// rows are in input order however they were dealt).
// Against the sorted runs, no merge runs (the merge of the runs' keys is
// one goroutine), the input is spilled once instead of twice (runs, then
// their merge), and buckets evaluate in parallel.

const (
	// bucketWorkers is how many buckets are evaluated at once, on the
	// run's threads divided among them. It is fixed, not the thread count,
	// so that what fits a share (fit) does not depend on threads.
	bucketWorkers = 2
	// maxBuckets bounds the buckets of a stage (their block buffers and
	// containers in the spill directory).
	maxBuckets = 4096
	// scatterBuckets is the most buckets a chunk's columns are dealt to
	// by scatter (one write stream each) rather than by gather.
	scatterBuckets = 256
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
	// chunkRows is the rows of a chunk after the first (readChunks), and
	// readBlock the most a block of the input read takes: with a copy of
	// a chunk, what the grant holds beside the block buffers.
	chunkRows int
	readBlock int64
	// decided is set once the first rows have been seen; active tells
	// whether they went to buckets (false: to sorted runs).
	decided, active bool
	keys            []sortedKey // the splitters, one row each, by partition key
	ints            []int64     // the splitters of one integer key without NULLs (fast path)
	fast            bool
	// table is the bucket of each integer key from tableLo on, when the
	// fast path's splitters are few keys apart (bucketTable; nil: not).
	table   []uint16
	tableLo int64
	// strs are the splitters of one ascending string key but the NULL
	// ones (nil: not such a key), nullSplitters how many are NULL, and
	// prefixes their first 8 bytes as words (stringPrefix), which decide
	// most comparisons without reading the strings.
	strs          []string
	nullSplitters int
	prefixes      []uint64
	schema        *arrow.Schema // a bucket's columns: the used input columns
	blockRows     int
	// writers are the buckets' containers being written (nil: none), and
	// parts how many each bucket has committed: its rows are its parts'
	// one after another (seal).
	writers []*columnar.Writer
	parts   []int
	// blocks are the block buffers of the buckets' columns (nil: none
	// yet), where the rows of a block wait until it fills; blockBudget is
	// the grant's room for them (seal).
	blocks      [][]*blockBuffer
	blockBudget int64
	written     []int64 // rows dealt to each bucket
	// pending is the chunk being written in the background (nil: none).
	pending *chunkWrite
	// spare are the pieces of a chunk already written, and spareHeld the
	// bytes still reserved for them: the next chunk is scattered into
	// their storage, so that a chunk takes no new memory (which the
	// collector would clear, or the kernel fault in page by page).
	// sparePacks are the string columns of that chunk as they were dealt
	// packed (packedStrings), by bucket column (nil: not a string column),
	// their storage kept as the pieces' is.
	spare      []*vector
	sparePacks []*packedStrings
	spareHeld  int64
	// longest is the longest string dealt to each bucket, by bucket
	// column (string columns only): results that repeat one (first_value,
	// min of strings) can take that many bytes on every row.
	longest [][]int64
}

// chunkWrite is a chunk's pieces written in the background, with the
// bytes reserved for them; done sends the write's error.
type chunkWrite struct {
	pieces []*vector
	packs  []*packedStrings
	held   int64
	done   chan error
}

// bucketStages, nestedBucketStages and bucketsExternal count the stages
// dealt to range buckets, those of them that deal a bucket's rows into
// buckets again, and the buckets evaluated on the external path, for
// tests to see which paths ran.
var bucketStages, nestedBucketStages, bucketsExternal atomic.Int64

// chunksWrittenBehind counts the chunks dealt to buckets in the
// background, for tests to see that they took that path.
var chunksWrittenBehind atomic.Int64

// chunksDealtUncounted counts the chunks dealt into storage the grant does
// not count, for tests to see that none is.
var chunksDealtUncounted atomic.Int64

// newBuckets prepares the range buckets of a stage over cs, falling back
// to r's sorted runs.
func newBuckets(p *plan, r *sortedRuns, cs []*columnar.Container, tmp string, o Options, st *Stats) *buckets {
	b := &buckets{p: p, runs: r, tmp: tmp, o: o, st: st, avail: o.Budget.Available(), readBlock: maxBlockBytes(cs, r.used)}
	for _, c := range cs {
		b.rows += c.Rows()
	}
	b.schema = arrow.NewSchema(r.fields[:len(r.used)], nil)
	return b
}

// threads is how many goroutines the deal uses.
func (b *buckets) threads() int { return min(max(b.o.Threads, 1), maxThreads) }

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
		v, err := k.expr.evalOn(in.cols, in.n, b.threads())
		if err != nil {
			return fmt.Errorf("windower: partition key: %w", err)
		}
		kv[i] = sortedKey{v: v, desc: k.desc, nullsFirst: k.nullsFirst}
	}
	if !b.decided {
		b.decided = true
		b.active = b.chooseRanges(in, kv)
		if !b.active {
			return b.runs.write(in)
		}
		if err := b.makeBlocks(); err != nil {
			return err
		}
		bucketStages.Add(1)
		if b.o.bucketDepth > 0 {
			nestedBucketStages.Add(1)
		}
		b.o.Logger.Debug("window stage deals its input to range buckets", "buckets", len(b.writers), "block_rows", b.blockRows)
	}
	return b.deal(in, kv)
}

// chooseRanges picks the splitters from the partition keys kv of the
// first chunk in, or reports that partitions are too large for buckets.
func (b *buckets) chooseRanges(in *input, kv []sortedKey) bool {
	n := in.n
	// What a row needs in memory, with the strings its results may repeat
	// (as long as the chunk's longest).
	perRow := b.p.memoryPerRow()
	for _, c := range b.p.repeatedStringArgs() {
		if b.p.strBytes != nil {
			perRow += max(0, longestString(in, []int{c}, 0, n)-b.p.strBytes[c])
		}
	}
	need := perRow * max(b.rows, int64(n))
	nb := int(min(max(need/max(b.fit()*bucketFill/100, 1)+1, 2), maxBuckets))
	s := min(n, bucketSample)
	sample := make([]int32, s)
	for i := range sample {
		sample[i] = int32(int64(i) * int64(n) / int64(s))
	}
	slices.SortStableFunc(sample, func(x, y int32) int { return compareRows(kv, int(x), int(y)) })
	// Buckets of about s/nb sampled rows, cut where the key changes: a
	// partition larger than that is a bucket of its own (evaluated on the
	// external path if it does not fit in memory). When one partition
	// holds most rows, buckets buy nothing: the sorted runs stream it.
	target := max(s/nb, 1)
	var at []int32
	count, longest := 0, 0
	for i := 0; i < s; {
		j := i + 1
		for j < s && compareRows(kv, int(sample[i]), int(sample[j])) == 0 {
			j++
		}
		if count > 0 && count+j-i > target {
			at = append(at, sample[i])
			count = 0
		}
		count += j - i
		longest = max(longest, j-i)
		i = j
	}
	if len(at) == 0 || longest > s/2 {
		b.o.Logger.Debug("window stage sorts runs: partitions too large for range buckets")
		return false
	}
	// A block of every column of every bucket waits in its block buffer
	// until it fills. The buffers take what the grant has left beside the
	// chunk's buffer, a copy of a chunk as large, the block being read
	// and an eighth of the grant left. The blocks are sized for half of that
	// at the input's average row: the other half takes the buckets whose
	// strings are longer, before the buffers are sealed (sealIfOver),
	// which sizing them for all of it made happen after every chunk. With
	// many buckets the blocks are small, and a block costs as much to
	// write and read again as thousands of rows. A grant without room for
	// blocks of 64 rows (blocks of long strings read in a small grant)
	// takes the sorted runs, which count the block read.
	rowBytes := b.p.bufferRowBytes() // the used columns, as a bucket's
	blockBytes := b.avail - 2*rowBytes*int64(b.chunkRows) - b.readBlock - b.avail/8
	if blockBytes < 64*int64(len(at)+1)*rowBytes {
		b.o.Logger.Debug("window stage sorts runs: no room for range buckets' blocks beside the blocks read", "block_bytes", blockBytes, "read_block", b.readBlock)
		return false
	}
	b.blockRows = min(spillBlockRows(rowBytes, b.o.Budget.Limit()), int(max(64, blockBytes/2/int64(len(at)+1)/max(rowBytes, 1))))
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
		b.bucketTable()
	}
	b.stringSplitters()
	nb = len(at) + 1
	b.writers = make([]*columnar.Writer, nb)
	b.parts = make([]int, nb)
	b.written = make([]int64, nb)
	b.longest = make([][]int64, len(b.runs.used))
	for j, c := range b.runs.used {
		if b.p.schema.kinds[c] == kindString {
			b.longest[j] = make([]int64, nb)
		}
	}
	b.blockBudget = blockBytes
	return true
}

// bucketTable sets table to the bucket of every key from the first
// integer splitter to the last, when they are at most bucketTableSpan
// apart (g over a thousand groups: a thousand entries), so that a row's
// bucket is one load and not a search of the splitters.
func (b *buckets) bucketTable() {
	lo, hi := b.ints[0], b.ints[len(b.ints)-1]
	span, borrow := bits.Sub64(uint64(hi), uint64(lo), 0)
	if borrow != 0 || span >= bucketTableSpan {
		return
	}
	b.tableLo = lo
	b.table = make([]uint16, span+1)
	for d := range b.table {
		b.table[d] = uint16(countAtMost(b.ints, lo+int64(d)))
	}
}

// bucketTableSpan bounds the keys bucketTable holds (128KiB of them).
const bucketTableSpan = 1 << 16

// stringSplitters sets strs, nullSplitters and prefixes when the
// splitters are of one ascending string key.
func (b *buckets) stringSplitters() {
	k := b.keys[0]
	if len(b.keys) != 1 || k.v.kind != kindString || k.desc {
		return
	}
	b.strs = make([]string, 0, len(k.v.strs))
	for j, x := range k.v.strs {
		if k.v.isNull(j) {
			b.nullSplitters++ // at one end: NULLs sort together
		} else {
			b.strs = append(b.strs, x)
		}
	}
	b.prefixes = stringPrefixes(b.strs, 1)
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
		if b.table != nil {
			// Keys outside the table are below every splitter or at or
			// above the last.
			if d := uint64(x - b.tableLo); d < uint64(len(b.table)) {
				return int(b.table[d])
			}
			if x < b.tableLo {
				return 0
			}
			return len(b.ints)
		}
		return countAtMost(b.ints, x)
	}
	if b.strs != nil {
		// A NULL row is at or above the NULL splitters, and below or
		// above every other as NULLs sort; any other row is above the
		// NULL splitters when they sort first.
		v, nullsFirst := kv[0].v, kv[0].nullsFirst
		if v.isNull(i) {
			if nullsFirst {
				return b.nullSplitters
			}
			return len(b.strs) + b.nullSplitters
		}
		x := v.strs[i]
		p := stringPrefix(x)
		// Splitters with x's prefix word, if any, end at hi: compare
		// x with them.
		hi := countAtMost(b.prefixes, p)
		lo := hi
		if hi > 0 && b.prefixes[hi-1] == p {
			lo = countBelow(b.prefixes, p)
		}
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if b.strs[m] <= x {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if nullsFirst {
			lo += b.nullSplitters
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

// countAtMost returns how many values of the ascending s are at most x,
// and countBelow how many are below it (at most x-1): a binary search
// whose steps add a masked half instead of branching, since rows' keys
// come in no order and a branch would be mispredicted at every other
// step (a third of the time of the branching search over 16 splitters).
func countAtMost[T int64 | uint64](s []T, x T) int {
	n := len(s)
	if n == 0 {
		return 0
	}
	base := 0
	for n > 1 {
		half := n >> 1
		base += half & -b2i(s[base+half] <= x)
		n -= half
	}
	return base + b2i(s[base] <= x)
}

func countBelow[T int64 | uint64](s []T, x T) int {
	if len(s) == 0 {
		return 0
	}
	// None when x <= s[0], where x-1 may wrap; masked, not branched on.
	return countAtMost(s, x-1) & -b2i(x > s[0])
}

// b2i is 1 for true and 0 for false, without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// deal appends the rows of in (keys kv) to their buckets' containers.
func (b *buckets) deal(in *input, kv []sortedKey) error {
	n, nb := in.n, len(b.writers)
	t := b.threads()
	of := hugepage.Make[uint16](n, n)
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
	// Few buckets: each column is scattered, read once in order into a
	// write stream per bucket. Many: gathered through the permutation
	// that groups the rows (a stream per bucket would miss the caches).
	var perm []int32
	if nb > scatterBuckets {
		perm = hugepage.Make[int32](n, n)
		next := slices.Clone(start[:nb])
		for i, x := range of {
			perm[next[x]] = int32(i)
			next[x]++
		}
	}
	// The rows in bucket order, every column, counted until written; the
	// write runs in the background while the caller reads the next chunk.
	// It needs room in the grant for the copy and an eighth of the grant
	// beside it (the Arrow forms of the pieces, the block buffers' strings
	// as they grow);
	// without, the chunk is written before deal returns. The copy goes
	// into the storage of the chunk written before, whose reservation
	// covers as much of it.
	cols := b.runs.used
	need := int64(len(cols)) * int64(n) // NULL flags
	for _, c := range cols {
		need += int64(n) * kindBytes(in.cols[c].kind)
	}
	need += stringBytes(in, 0, n)
	// Without room for the copy behind the chunk being written, that
	// write is waited for first, so that its storage, and the bytes
	// reserved for it, take this chunk: not new memory beside it.
	if b.pending != nil && !b.roomBehind(max(need-b.spareHeld, 0)) {
		if err := b.wait(); err != nil {
			return err
		}
	}
	pieces, packs, held := b.spare, b.sparePacks, b.spareHeld
	b.spare, b.sparePacks, b.spareHeld = nil, nil, 0
	if pieces == nil {
		pieces = make([]*vector, len(cols))
		packs = make([]*packedStrings, len(cols))
		for j, c := range cols {
			pieces[j] = &vector{}
			if packable(in.cols[c]) {
				packs[j] = &packedStrings{}
			}
		}
	}
	more := max(need-held, 0)
	room := func() bool { return b.roomBehind(more) && b.o.Budget.Reserve(more) == nil }
	behind := room()
	if !behind {
		if err := b.wait(); err != nil {
			b.o.Budget.Release(held)
			return err
		}
		behind = room()
	}
	switch {
	case behind:
		held += more
	case b.o.Budget.Reserve(more) == nil: // written before deal returns
		held += more
	default:
		chunksDealtUncounted.Add(1)
	}
	t = min(t, len(cols))
	parallelFor(t, func(k int) {
		for j := k; j < len(cols); j += t {
			if ps := packs[j]; ps != nil {
				if ps.active = ps.deal(in.cols[cols[j]], of, perm, start); ps.active {
					most := b.longest[j]
					for x := range most {
						most[x] = max(most[x], ps.longest(start[x], start[x+1]))
					}
					continue
				}
			}
			var v *vector
			if perm == nil {
				v = in.cols[cols[j]].scatter(of, start, pieces[j])
			} else {
				v = in.cols[cols[j]].gather(perm, pieces[j])
			}
			if most := b.longest[j]; most != nil {
				for x := 0; x < nb; x++ {
					for _, str := range v.strs[start[x]:start[x+1]] {
						most[x] = max(most[x], int64(len(str)))
					}
				}
			}
			pieces[j] = v
		}
	})
	if err := b.wait(); err != nil {
		b.o.Budget.Release(held)
		return err
	}
	// Nothing is being written now: the block buffers may be sealed, and
	// the writers this chunk needs made.
	if err := b.sealIfOver(pieces, packs, start); err != nil {
		b.o.Budget.Release(held)
		return err
	}
	for x := 0; x < nb; x++ {
		if start[x+1] > start[x] && b.writers[x] == nil {
			dir := b.part(x, b.parts[x])
			w, err := columnar.Create(dir, columnar.WriterOptions{Table: "windower", Projection: "bucket", ID: filepath.Base(dir),
				Schema: b.schema, Allocator: b.o.Budget, Compression: columnar.CompressionNone, BlockRows: b.blockRows, NoSync: true})
			if err != nil {
				b.o.Budget.Release(held)
				return fmt.Errorf("windower: spill bucket %d: %w", x, err)
			}
			b.writers[x] = w
		}
	}
	if !behind {
		err := b.writePieces(pieces, packs, start, t)
		b.keepSpare(pieces, packs, held)
		return err
	}
	w := &chunkWrite{pieces: pieces, packs: packs, held: held, done: make(chan error, 1)}
	b.pending = w
	chunksWrittenBehind.Add(1)
	go func() { w.done <- b.writePieces(pieces, packs, start, t) }()
	return nil
}

// roomBehind reports whether the grant has room for more bytes of a
// chunk's copy and an eighth of the grant beside them, which a chunk
// written in the background needs (the Arrow forms of its pieces, the
// block buffers' strings as they grow).
func (b *buckets) roomBehind(more int64) bool {
	return b.o.Budget.Available()-more >= b.o.Budget.Limit()/8
}

// keepSpare keeps pieces and packs, written, with held bytes reserved for
// them, as the storage of the next chunk's; the strings the pieces point
// to are let go.
func (b *buckets) keepSpare(pieces []*vector, packs []*packedStrings, held int64) {
	for _, v := range pieces {
		clear(v.strs)
	}
	b.o.Budget.Release(b.spareHeld)
	b.spare, b.sparePacks, b.spareHeld = pieces, packs, held
}

// writePieces appends pieces (every column's rows in bucket order, bucket x's
// rows from start[x] to start[x+1]; packs's for the string columns dealt
// packed) to the buckets' containers, on up to t goroutines.
func (b *buckets) writePieces(pieces []*vector, packs []*packedStrings, start []int, t int) error {
	nb := len(b.writers)
	errs := make([]error, t)
	parallelFor(t, func(k int) {
		for j := k; j < len(pieces); j += t {
			for x := 0; x < nb; x++ {
				lo, hi := start[x], start[x+1]
				if lo == hi {
					continue
				}
				var arr arrow.Array
				if ps := packs[j]; ps != nil && ps.active {
					arr = ps.array(b.schema.Field(j).Type, lo, hi)
				} else {
					arr = pieces[j].slice(lo, hi).toArrow(b.o.Budget)
				}
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
	// The first: the others are most likely the same failure (a full
	// disk) met by the other workers' columns.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// wait waits for the chunk being written in the background, if any, and
// returns its error.
func (b *buckets) wait() error {
	if b.pending == nil {
		return nil
	}
	w := b.pending
	b.pending = nil
	err := <-w.done
	b.keepSpare(w.pieces, w.packs, w.held)
	return err
}

// writeColumn appends arr to column j of bucket x without the writer
// keeping arr: the rows that complete the bucket's block buffer are copied
// into it and written as a block, the whole blocks after them are written
// from arr, and the rest is copied into the buffer, which waits for the
// next chunk.
func (b *buckets) writeColumn(x, j int, arr arrow.Array) error {
	w, br, n := b.writers[x], b.blockRows, arr.Len()
	bb := b.blocks[x][j]
	off := 0
	if bb.rows > 0 {
		off = min(bb.room(), n)
		bb.append(arr, 0, off)
		if !bb.full() {
			return nil
		}
		err := b.writeBlock(x, j, bb)
		bb.reset()
		if err != nil {
			return err
		}
	}
	if whole := (n - off) / br * br; whole > 0 {
		part := array.NewSlice(arr, int64(off), int64(off+whole))
		err := w.WriteColumn(j, part)
		part.Release()
		if err != nil {
			return err
		}
		off += whole
	}
	bb.append(arr, off, n)
	return nil
}

// flushBlocks hands every bucket's partly filled blocks to its writer,
// which keeps them until Commit.
func (b *buckets) flushBlocks() error {
	for x, bs := range b.blocks {
		for j, bb := range bs {
			if bb.rows == 0 {
				continue
			}
			if err := b.writeBlock(x, j, bb); err != nil {
				return fmt.Errorf("windower: spill bucket %d: %w", x, err)
			}
		}
	}
	return nil
}

// writeBlock hands the rows of block buffer bb to column j of bucket x's
// writer.
func (b *buckets) writeBlock(x, j int, bb *blockBuffer) error {
	blk := bb.array()
	err := b.writers[x].WriteColumn(j, blk)
	blk.Release()
	return err
}

// makeBlocks makes the block buffers of every bucket's columns; their
// memory is made when they are first written.
func (b *buckets) makeBlocks() error {
	b.blocks = make([][]*blockBuffer, len(b.writers))
	for x := range b.blocks {
		b.blocks[x] = make([]*blockBuffer, len(b.runs.used))
		for j, c := range b.runs.used {
			var strBytes int64
			if b.p.strBytes != nil {
				strBytes = b.p.strBytes[c]
			}
			bb, err := newBlockBuffer(b.schema.Field(j).Type, b.blockRows, strBytes, b.o.Budget)
			if err != nil {
				return fmt.Errorf("windower: spill bucket %d: %w", x, err)
			}
			b.blocks[x][j] = bb
		}
	}
	return nil
}

// freeBlocks gives the block buffers' memory back to the grant; they
// make it again if written.
func (b *buckets) freeBlocks() {
	for _, bs := range b.blocks {
		for _, bb := range bs {
			bb.free()
		}
	}
}

// blockBytesAfter is what the block buffers will hold once a chunk is
// written whose rows are pieces (packs for the string columns dealt
// packed), bucket x's from start[x] to start[x+1] (blockBuffer.bytesAfter).
func (b *buckets) blockBytesAfter(pieces []*vector, packs []*packedStrings, start []int) int64 {
	var n int64
	for x, bs := range b.blocks {
		for j, bb := range bs {
			n += bb.bytesAfter(start[x+1]-start[x], func(lo, hi int) int64 {
				lo, hi = start[x]+lo, start[x]+hi
				if ps := packs[j]; ps != nil && ps.active {
					return int64(ps.offsets[hi] - ps.offsets[lo])
				}
				var m int64
				for _, s := range pieces[j].strs[lo:hi] {
					m += int64(len(s))
				}
				return m
			})
		}
	}
	return n
}

// bucketSeals counts the times range buckets' containers were sealed,
// for tests to see that they were.
var bucketSeals atomic.Int64

// sealPercent is the percentage of their room (blockBudget) past which
// the block buffers are sealed. Blocks sized for half their room seal
// only when a few buckets' strings are several times the average; tests
// lower it to seal often.
var sealPercent int64 = 100

// sealIfOver seals the buckets' containers before a chunk is written
// (pieces, packs and start, as blockBytesAfter takes them) if the block
// buffers would hold more than the grant has room for (blockBudget)
// once it is. The buffers are sized for the input's average row, but a
// bucket's strings can be far longer: a range of the partition key whose
// rows carry long strings (an earlier stage's first_value, say) fills
// its blocks with them. Sealing commits every bucket's container, its
// partly filled blocks written as a short last block, and frees the
// buffers; each bucket's later rows go to a container of its own, its
// next part. It is called with nothing being written.
func (b *buckets) sealIfOver(pieces []*vector, packs []*packedStrings, start []int) error {
	if b.blockBytesAfter(pieces, packs, start) <= b.blockBudget*sealPercent/100 {
		return nil
	}
	bucketSeals.Add(1)
	err := b.flushBlocks() // named its bucket already
	errs := append([]error{err}, b.commitParts(err != nil)...)
	b.freeBlocks() // after Commit and Abort, which let go of them
	return errors.Join(errs...)
}

// commitParts commits every bucket's container being written as its next
// part, or aborts them all if abort, and returns the errors of the
// commits that failed (their containers aborted).
func (b *buckets) commitParts(abort bool) []error {
	var errs []error
	for x, w := range b.writers {
		if w == nil {
			continue
		}
		b.writers[x] = nil
		if abort {
			w.Abort()
			continue
		}
		m, err := w.Commit()
		if err != nil {
			w.Abort()
			errs = append(errs, fmt.Errorf("windower: spill bucket %d: %w", x, err))
			continue
		}
		b.st.SpilledBytes += m.CompressedBytes()
		b.parts[x]++
	}
	return errs
}

func (b *buckets) dir(x int) string { return filepath.Join(b.tmp, fmt.Sprintf("bucket-%05d", x)) }

// part is the directory of part k of bucket x's rows.
func (b *buckets) part(x, k int) string {
	if k == 0 {
		return b.dir(x)
	}
	return fmt.Sprintf("%s-%d", b.dir(x), k)
}

// closeAll closes containers.
func closeAll(cs []*columnar.Container) {
	for _, c := range cs {
		c.Close()
	}
}

// removeParts removes bucket x's containers once nothing reads them.
func (b *buckets) removeParts(x int) {
	for k := range b.parts[x] {
		b.o.removals.remove(b.part(x, k))
	}
}

// finish waits for the chunk being written, then commits the buckets'
// containers, or aborts them if err is not nil or the write failed.
func (b *buckets) finish(err error) error {
	werr := b.wait()
	b.keepSpare(nil, nil, 0) // the last pieces' reservation back
	if err == nil {
		err = werr
	}
	if err == nil {
		// The partly filled blocks, kept by the writers until Commit.
		if ferr := b.flushBlocks(); ferr != nil {
			err, werr = ferr, ferr
		}
	}
	defer b.freeBlocks() // after Commit and Abort, which let go of them
	// werr named its bucket already (writePieces, flushBlocks).
	return errors.Join(append([]error{werr}, b.commitParts(err != nil)...)...)
}

// evaluate evaluates every bucket and writes its result as a container;
// it returns their directories, in bucket order. Buckets that fit their
// share of the grant are evaluated in memory, bucketWorkers at a time; the
// others then run the external path one at a time, each with the whole
// grant and every thread. (The query's last stage streams its buckets
// instead: bucketstream.go.)
func (b *buckets) evaluate(ctx context.Context) ([]string, error) {
	q := b.query()
	todo := b.filled()
	if len(todo) == 0 {
		return nil, nil
	}
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
			out, st, err := b.writeBucket(ctx, q, todo[i], share, threads, false)
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
		out, st, err := b.writeBucket(ctx, q, todo[i], b.avail, b.o.Threads, true)
		if err != nil {
			return nil, err
		}
		add(i, out, st)
	}
	b.st.PeakBytes = max(b.st.PeakBytes, b.o.Budget.Peak())
	return outs, nil
}

// query is the stage's query over a bucket: WHERE ran as the rows were
// dealt, and LIMIT applies as the result is read.
func (b *buckets) query() *messages.WindowQuery {
	q := *b.p.source
	q.Where, q.Limit = nil, 0
	return &q
}

// filled returns the buckets that have rows, in order.
func (b *buckets) filled() []int {
	var xs []int
	for x, k := range b.parts {
		if k > 0 {
			xs = append(xs, x)
		}
	}
	return xs
}

// writeBucket evaluates bucket x (evaluateBucket) and writes its result as
// a container; it returns its directory and the bucket's figures
// (SpilledBytes counting the result), or an empty directory when the
// bucket does not fit in memory and external is false.
func (b *buckets) writeBucket(ctx context.Context, q *messages.WindowQuery, x int, share int64, threads int, external bool) (string, Stats, error) {
	res, budget, err := b.evaluateBucket(ctx, q, x, share, threads, external)
	if err != nil || res == nil {
		return "", Stats{}, err
	}
	defer res.Close()
	out := b.dir(x) + ".out"
	m, err := WriteContainer(res, out, columnar.WriterOptions{Table: "windower", Projection: "bucket", ID: filepath.Base(out),
		Allocator: budget, Compression: columnar.CompressionNone, BlockRows: spillBlockRows(b.p.rowBytes(), b.o.Budget.Limit()), NoSync: true})
	if err != nil {
		return "", Stats{}, err
	}
	st := res.Stats()
	st.SpilledBytes += m.CompressedBytes()
	return out, st, nil
}

// need is what evaluating bucket x in memory needs, by the plan's
// estimate.
func (b *buckets) need(q *messages.WindowQuery, x int) (int64, error) {
	cs, p, err := b.open(q, x, nil)
	if err != nil {
		return 0, err
	}
	closeAll(cs)
	return b.needOf(p, x), nil
}

// needOf is what evaluating bucket x with plan p in memory needs: the
// plan's estimate per row, and the strings its results may repeat
// (plan.repeatedStringBytes, from the longest string dealt to the
// bucket).
func (b *buckets) needOf(p *plan, x int) int64 {
	rows := b.written[x]
	n := p.memoryPerRow() * rows
	for _, c := range p.repeatedStringArgs() {
		if most := b.longest[c]; most != nil && p.strBytes != nil {
			n += rows * max(0, most[x]-p.strBytes[c])
		}
	}
	return n
}

// open opens bucket x's containers (its parts), reading through budget,
// and compiles q over them.
func (b *buckets) open(q *messages.WindowQuery, x int, budget *columnar.Budget) ([]*columnar.Container, *plan, error) {
	opts := columnar.OpenOptions{Logger: b.o.Logger}
	if budget != nil {
		opts.Allocator = budget
	}
	cs := make([]*columnar.Container, 0, b.parts[x])
	for k := range b.parts[x] {
		c, err := columnar.Open(b.part(x, k), opts)
		if err != nil {
			closeAll(cs)
			return nil, nil, fmt.Errorf("windower: open bucket %d: %w", x, err)
		}
		cs = append(cs, c)
	}
	p, err := compile(q, cs[0].Schema())
	if err != nil {
		closeAll(cs)
		return nil, nil, fmt.Errorf("windower: plan of bucket %d: %w", x, err)
	}
	p.measureStrings(cs)
	return cs, p, nil
}

// evaluateBucket evaluates query q over bucket x under a sub-budget of
// share bytes on threads goroutines: in memory, or on the external path
// if external. In memory, a bucket that needs more than a bucket may
// (fit), or whose results repeat long strings that do not fit beside it,
// is left as it is and the result is nil. The bucket's container is
// removed once the result no longer reads it. The budget returned is the
// result's, until it is closed.
func (b *buckets) evaluateBucket(ctx context.Context, q *messages.WindowQuery, x int, share int64, threads int, external bool) (*Result, *columnar.Budget, error) {
	budget := b.o.Budget.Sub(share)
	o := b.o
	o.Budget, o.Threads, o.TempDir = budget, threads, b.tmp
	o.bucketDepth++ // on the external path, its rows may go to buckets again
	o.inputRead = nil
	cs, p, err := b.open(q, x, budget)
	if err != nil {
		return nil, nil, err
	}
	var rows int64
	for _, c := range cs {
		rows += c.Rows()
	}
	var res *Result
	switch {
	case external:
		bucketsExternal.Add(1)
		res, err = runExternal(ctx, p, cs, nil, rows, o)
	case b.needOf(p, x) > b.fit():
		return nil, nil, nil
	default:
		var in *input
		if in, err = loadContainers(ctx, p, cs, nil, rows, budget, threads, nil, nil); err != nil {
			break
		}
		if extra := p.repeatedStringBytes(in); extra > b.fit()-budget.InUse() {
			budget.Release(in.reserved)
			return nil, nil, nil
		}
		res, err = evaluate(ctx, p, in, o)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("windower: bucket %d: %w", x, err)
	}
	// In memory or spilled anew, the result no longer reads the bucket.
	b.removeParts(x)
	return res, budget, nil
}
