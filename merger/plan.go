package merger

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/strata-db/strata/internal/bytesize"
)

// Plan names, as reported in Stats.Plan.
const (
	PlanHorizontal = "horizontal"
	PlanVertical   = "vertical"
	PlanPasses     = "passes"
)

// Fixed costs of the plan's Go-side buffers, in bytes.
const (
	rowSourceWriterCost = 2 * rowSourceMaxChunk                         // writer payload + first buffer
	rowSourceReaderCost = rowSourceMaxChunk + 64<<10 + gatherBatchBytes // chunk, file read buffer, decoded runs
	overheadPerReader   = 1 << 10                                       // per open column reader: its structs, file and decoder
)

// columnCost is what one column of the projection costs the merge.
type columnCost struct {
	name string
	key  bool
	// read is the most one input's reader of this column holds at once: the
	// largest decoded block plus its compressed bytes.
	read int64
	// out is the output side: one output block being gathered, plus the
	// writer's encoded copy of it.
	out int64
	// tail is the column's last, partial output block, which waits in the
	// writer until the column is finished (0 when rows fill whole blocks).
	tail int64
	// keyBytes is, for key columns, the normalized-key bytes one input block
	// needs (keys plus offsets).
	keyBytes int64
	// block is the output block being gathered, part of out; the rest of
	// out (the encoded copy, the selection vector) is needed once per pass
	// however many columns the pass gathers.
	block int64
	// raw is the column's decoded bytes over every input: what its gather
	// moves.
	raw int64
	// filter is, for keyed inputs, the copy of a block without its folded
	// rows that a reader of an input with rows to drop makes (fold.go):
	// the largest decoded block of those inputs. filtered is how many
	// inputs have rows to drop.
	filter   int64
	filtered int
	// interRead and interKeyBytes are read and keyBytes for a block of an
	// intermediate container of a merge in passes, written in the output's
	// block size (levelCosts).
	interRead, interKeyBytes int64
}

// levelCosts is the columns' costs for a level of a merge in passes: the
// most a reader holds of an input or of an intermediate container, whose
// blocks have the output's rows (more than the inputs' may have) at the
// inputs' largest bytes per row.
func levelCosts(cols []columnCost) []columnCost {
	out := slices.Clone(cols)
	for i := range out {
		out[i].read = max(out[i].read, out[i].interRead)
		out[i].keyBytes = max(out[i].keyBytes, out[i].interKeyBytes)
	}
	return out
}

// filters is the block copies of k of the column's readers at most.
func (c columnCost) filters(k int) int64 { return int64(min(k, c.filtered)) * c.filter }

// gatherState is the memory of gathering column c from k inputs in a pass
// with other columns: its readers and its output block.
func (c columnCost) gatherState(k int) int64 {
	return int64(k)*(c.read+overheadPerReader) + c.block + c.filters(k)
}

// perPass is what a pass gathering column c needs once, beside the
// columns' gatherState: the writer's encoded copy of an output block and
// the selection vector.
func (c columnCost) perPass() int64 { return c.out - c.block }

// planInput is everything the planner looks at.
type planInput struct {
	inputs    int // K
	columns   []columnCost
	grant     int64
	workers   int   // parallelism asked for
	rowSource int64 // estimated size of the row-source stream
	rows      int64 // rows of the merge
	// held is memory the merge holds throughout, besides the plan's own:
	// the bitmaps of the rows keyed inputs fold away (fold.go).
	held int64

	// Set by candidates: the largest output side and the sum of the tails
	// of the non-key columns.
	outMax, tails int64
}

// plan is the planner's decision and the figures behind it.
type plan struct {
	kind string
	// workers is the passes over the row source run at once.
	workers int
	// groups are the non-key columns (positions in the schema), one pass
	// over the row source each: every column of a group is gathered in the
	// same pass. A horizontal plan has one group per worker.
	groups      [][]int
	finishers   int  // columns finished (last block, footer, fsync) at once
	deferFinish bool // finish every column after the last gather rather than beside the gathers
	sharedSel   bool // expand the row source once into a selection vector every gather shares
	// overlap runs the key merge beside the gathers: it fills the shared
	// selection vector while all workers but one gather from it.
	overlap      bool
	fanIn        int   // passes: inputs merged per intermediate container
	rowSourceMem int64 // bytes the row-source stream may hold in memory before spilling
	keyPhase     int64 // memory of the key merge
	gatherPhase  int64 // memory of the gathers running at once, row source included
	// need is the plan's predicted peak, before headroom; estimate is what
	// it asks of the grant (need with headroom), reported as
	// Stats.EstimatedBytes.
	need, estimate int64
	// seconds is the cost model's prediction of the merge's duration.
	seconds float64
}

// keyPhaseCost is the memory of merging the key columns of k inputs.
func keyPhaseCost(k int, cols []columnCost) int64 {
	n := int64(rowSourceWriterCost)
	for _, c := range cols {
		if c.key {
			n += int64(k)*(c.read+overheadPerReader+c.keyBytes) + c.out + c.filters(k)
		}
	}
	return n
}

// readerCost is what one reader of the row-source stream reserves: its
// chunk, the spill file's read buffer, and for merges of more inputs than a
// selection vector names, the batch of decoded runs (rowSourceReaderCost is
// the most of it).
func readerCost(inMemory bool, inputs int) int64 {
	n := int64(rowSourceMaxChunk)
	if !inMemory {
		n += 64 << 10
	}
	if inputs > maxSelInputs {
		n += gatherBatchBytes
	}
	return n
}

// gatherCost is the memory of gathering column c alone from k inputs.
func gatherCost(k int, c columnCost) int64 {
	return c.gatherState(k) + c.perPass() + rowSourceReaderCost
}

// withHeadroom is what an estimate of need bytes asks of the grant: the
// estimates cover the buffers the merge makes, and the headroom covers what
// they leave out (allocation rounding, IPC metadata, small structures).
func withHeadroom(need int64) int64 { return need + need/12 + 8<<10 }

// makePlan picks the plan for in, or returns a *GrantError.
func makePlan(in planInput) (plan, error) {
	grant := in.grant
	in.grant = (grant - in.held - 8<<10) * 12 / 13 // the inverse of withHeadroom
	p, err := makePlanWithin(in)
	var ge *GrantError
	if errors.As(err, &ge) {
		ge.Grant = grant
		ge.Minimum = withHeadroom(ge.Minimum) + in.held
		if in.held > 0 {
			ge.Need += fmt.Sprintf("; the bitmaps of the rows folded away hold %s", bytesize.Format(in.held))
		}
	}
	p.estimate = withHeadroom(p.need) + in.held
	return p, err
}

// maxFinishers bounds the columns finished at once: finishing mostly waits
// on fsync, which overlaps well up to a point.
const maxFinishers = 16

// maxDeferredColumns bounds the output files held open to finish at the end.
const maxDeferredColumns = 4096

// The cost model. A merge decodes and encodes every byte of every column
// whatever the plan; what the plans change is how often the row source is
// replayed (once per group of columns), whether it is read back from a
// spill file, how many gathers run at once, and how much of what the
// gathers touch stays in cache. A gather holds one decoded block of each
// input and consumes them at 1/K of the output's pace: a block decoded now
// is still being read K output blocks later. When the blocks of the
// columns gathered at once outgrow the last-level cache, every decoded
// byte goes out to memory and is read back, which costs more than
// replaying the row source once per column. The figures are seconds per
// unit, measured on a 2-core AMD EPYC with LZ4; only their ratios decide
// the plan.
const (
	costCodecPerByte    = 4.0e-9 // decode and encode, per decoded byte
	costMovePerByte     = 0.5e-9 // the gather's moves, per decoded byte
	costKeyPerRow       = 60e-9  // the key merge (normalized keys, loser tree), per row and key column
	costExpandPerRow    = 1.5e-9 // expanding the row source into selection vectors, per row and pass
	costSharedPerRow    = 0.1e-9 // reading a shared selection vector, per row and pass
	costSpillPerByte    = 1.0e-9 // row-source spill write or read back, per byte
	costMissPerByte     = 4.0e-9 // a decoded byte evicted from cache before it is gathered
	costResidentPerByte = 0.2e-9 // memory held beyond the cache (fresh pages, zeroing, GC), per byte
	costPassFixed       = 20e-6  // setting up a pass: buffers, its gathers, handing it to a worker
)

// minOverlapSeconds is the shortest key merge the model lets gathers
// overlap: a pass beside the key merge saves at most part of the key
// merge's time, and below a few scheduler time slices that is lost to the
// waits of a gather one block behind the key merge and the goroutines
// started for it. (A shorter one is predicted as if run before the gathers,
// so the plan without overlap, which needs less memory, wins.)
var minOverlapSeconds = 10e-3

// cacheBytes is the last-level cache the gathers running at once share.
var cacheBytes int64 = 16 << 20

// makePlanWithin plans for estimates that must fit in in.grant.
func makePlanWithin(in planInput) (plan, error) {
	var best plan
	found := false
	for _, p := range candidates(in) {
		if p.need > in.grant {
			continue
		}
		if !found || p.seconds < best.seconds || (p.seconds == best.seconds && p.need < best.need) {
			best, found = p, true
		}
	}
	if found {
		return best, nil
	}
	// Passes: the largest fan-in whose smallest single-level plan fits
	// (minimalNeed), for the inputs and the intermediate containers alike,
	// so that every level plans each group of fan-in inputs as one merge.
	p := plan{keyPhase: keyPhaseCost(in.inputs, in.columns)}
	level := levelCosts(in.columns)
	for f := in.inputs - 1; f >= 2; f-- {
		if need := minimalNeed(f, level); need <= in.grant {
			p.kind = PlanPasses
			p.fanIn = f
			p.workers = 1
			p.need = need
			return p, nil
		}
	}
	return p, grantError(in)
}

// candidates lists the single-level plans for in: every group size (from
// one column per pass to every column in one pass per worker), number of
// workers, row source in memory or spilled, and shared selection vector or
// not (and, for a vertical plan with a shared one, filled by the key merge
// beside the gathers or before them), each with its memory and predicted
// seconds.
func candidates(in planInput) []plan {
	var rest []int
	for c, col := range in.columns {
		if !col.key {
			rest = append(rest, c)
		}
	}
	workers := max(1, in.workers)
	keyPhase := keyPhaseCost(in.inputs, in.columns)
	in.outMax, in.tails = 1, 0
	for _, c := range in.columns {
		if !c.key {
			in.outMax = max(in.outMax, c.out)
			in.tails += c.tail
		}
	}
	var out []plan
	sizes := groupSizes(len(rest), workers)
	for _, size := range sizes {
		horizontal := size == 0
		// Groups of consecutive columns of about equal bytes: the
		// gathers running at once then hold about the same whichever
		// groups they are, and read the inputs in schema order.
		n := workers
		if !horizontal {
			n = (len(rest) + size - 1) / size
		}
		groups := balanced(rest, n, in.columns)
		// Memory of each group's gathers, largest first: the gathers
		// running at once are at most the largest ones. outs is the
		// group's largest output block, which waits in the writer while
		// the column is finished beside the next pass.
		mem := make([]int64, len(groups))
		outs := make([]int64, len(groups))
		for i, g := range groups {
			var pass int64
			for _, c := range g {
				mem[i] += in.columns[c].gatherState(in.inputs)
				pass = max(pass, in.columns[c].perPass())
				outs[i] = max(outs[i], in.columns[c].out)
			}
			mem[i] += pass
		}
		order := make([]int, len(groups))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmpInt64(mem[b]+outs[b], mem[a]+outs[a]) })
		for w := 1; w <= workers; w++ {
			if horizontal && w != max(1, len(groups)) {
				continue // a horizontal plan is one group per worker
			}
			if !horizontal && w > len(groups) {
				break
			}
			var running, runningOut int64
			for _, i := range order[:min(w, len(order))] {
				running += mem[i]
				runningOut += outs[i]
			}
			for _, inMemory := range []bool{true, false} {
				if horizontal && !inMemory && len(groups) > 0 {
					continue // the same as a vertical plan of one column a pass
				}
				for _, sel := range []struct{ shared, overlap bool }{{false, false}, {true, false}, {true, true}} {
					shared := sel.shared
					if shared && (in.inputs > maxSelInputs || in.rows == 0) {
						continue
					}
					// Overlapping needs a worker beside the key merge and
					// more groups than workers (a horizontal plan's worker
					// would wait for the whole key merge), and the row
					// source in memory.
					if sel.overlap && (horizontal || w < 2 || len(groups) <= w || !inMemory) {
						continue
					}
					p := plan{kind: PlanVertical, workers: w, groups: groups, sharedSel: shared, overlap: sel.overlap, keyPhase: keyPhase}
					if horizontal {
						p.kind = PlanHorizontal
					}
					if inMemory {
						p.rowSourceMem = in.rowSource
					}
					// kept is what the row source holds while the
					// columns are gathered and finished.
					kept := p.rowSourceMem
					var expand, readers int64
					if shared {
						// The encoded stream is dropped once expanded.
						kept = 2 * in.rows
						expand = p.rowSourceMem + kept + readerCost(inMemory, in.inputs)
					} else {
						readers = int64(min(w, len(groups))) * readerCost(inMemory, in.inputs)
					}
					p.gatherPhase = kept + running + readers
					before := max(keyPhase+p.rowSourceMem, expand)
					if sel.overlap {
						// The key merge, its stream, the selection vector
						// and the gathers of all workers but one, with the
						// output blocks they leave waiting (or, when
						// finishing is deferred, the tails).
						var early, earlyOut int64
						for _, i := range order[:min(w-1, len(order))] {
							early += mem[i]
							earlyOut += outs[i]
						}
						before = keyPhase + p.rowSourceMem + kept + early + max(earlyOut, in.tails)
					}
					if !finishing(&p, in, kept, runningOut, before) {
						continue
					}
					p.seconds = predictSeconds(in, p)
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// groupSizes are the columns per pass the planner tries: powers of two
// below an even share of the columns per worker (and 1 however few the
// columns), and 0 for the horizontal plan (one group per worker).
func groupSizes(cols, workers int) []int {
	sizes := []int{0}
	share := (cols + workers - 1) / workers
	for s := 1; s < share; s *= 2 {
		sizes = append(sizes, s)
	}
	if cols > 0 && share <= 1 {
		// One column a pass all the same, with fewer columns than workers:
		// the smallest plan (minimalNeed), which passes and the grant's
		// minimum count on, gathers one column at a time with the row
		// source spilled, and a horizontal plan gathers them all at once
		// from a row source in memory.
		sizes = append(sizes, 1)
	}
	return sizes
}

// balanced cuts cols (in schema order) into at most n groups of
// consecutive columns, of about equal decoded bytes: the cut of the least
// capacity that needs n groups or fewer, each group filled until its next
// column would pass the capacity; then, while there are fewer than n, the
// group of most bytes (of those, most columns) is halved at the column
// that best halves its bytes. The largest group is then the least any cut
// into n groups of consecutive columns can have.
//
// Consecutive, so that the passes read the inputs' columns in schema
// order, each pass a few columns side by side: a container fetched from a
// store (depot.Prefetch, which fetches in that order, in ranged reads of
// several adjacent column files) is fetched ahead of the gathers rather
// than behind them, as it was while the groups were dealt the largest
// column first, each group's columns spread over the whole schema.
func balanced(cols []int, n int, costs []columnCost) [][]int {
	n = min(n, len(cols))
	if n <= 0 {
		return nil
	}
	// pre[i] is the bytes of cols[:i].
	pre := make([]int64, len(cols)+1)
	var largest int64
	for i, c := range cols {
		pre[i+1] = pre[i] + costs[c].raw
		largest = max(largest, costs[c].raw)
	}
	// cut fills each group until its next column would take it past
	// capacity, and returns where each group starts.
	cut := func(capacity int64) []int {
		starts := []int{0}
		for i := range cols {
			if from := starts[len(starts)-1]; i > from && pre[i+1]-pre[from] > capacity {
				starts = append(starts, i)
			}
		}
		return starts
	}
	lo, hi := largest, pre[len(cols)] // a capacity of every byte is one group
	for lo < hi {
		mid := lo + (hi-lo)/2
		if len(cut(mid)) <= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	starts := cut(lo)
	end := func(g int) int {
		if g+1 < len(starts) {
			return starts[g+1]
		}
		return len(cols)
	}
	bytes := func(g int) int64 { return pre[end(g)] - pre[starts[g]] }
	width := func(g int) int { return end(g) - starts[g] }
	for len(starts) < n {
		// n <= len(cols): some group has two columns or more.
		g := -1
		for i := range starts {
			if width(i) >= 2 && (g < 0 || bytes(i) > bytes(g) || bytes(i) == bytes(g) && width(i) > width(g)) {
				g = i
			}
		}
		from, to := starts[g], end(g)
		at, atDiff := from+1, int64(-1)
		for k := from + 1; k < to; k++ {
			// |before - after|, and among equal, the split nearest the middle.
			diff := abs(2*pre[k] - pre[from] - pre[to])
			if atDiff < 0 || diff < atDiff || diff == atDiff && abs(2*(k-from)-(to-from)) < abs(2*(at-from)-(to-from)) {
				at, atDiff = k, diff
			}
		}
		starts = slices.Insert(starts, g+1, at)
	}
	groups := make([][]int, len(starts))
	for g := range starts {
		groups[g] = slices.Clone(cols[starts[g]:end(g)])
	}
	return groups
}

func abs[T int | int64](v T) T {
	if v < 0 {
		return -v
	}
	return v
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// finishing sets how p finishes its columns, and p.need, from the memory
// the gathers leave free: kept is what the row source holds meanwhile,
// runningOut the output blocks of the gathers running at once that wait
// while their columns are finished beside the next pass, and before the
// memory of the phases before the gathers. It reports whether p fits.
func finishing(p *plan, in planInput, kept, runningOut, before int64) bool {
	outMax, tails := in.outMax, in.tails
	// Finishing a column fsyncs its file; on common file systems an fsync
	// also waits for other files' dirty pages, so fsyncs interleaved with
	// writing the remaining columns cost far more than the same fsyncs
	// after the last write. Defer them when the columns' tails fit: then
	// the tails wait while the columns are gathered, and the columns are
	// finished once the gathers are done.
	if len(in.columns) <= maxDeferredColumns {
		during := max(before, p.gatherPhase+tails)
		if free := in.grant - kept - tails; during <= in.grant && free >= outMax {
			p.deferFinish = true
			p.finishers = int(min(maxFinishers, free/outMax))
			// Each finisher encodes a tail: at most the tails again.
			p.need = max(during, kept+tails+min(int64(p.finishers)*outMax, 2*tails))
			return true
		}
	}
	// Otherwise each finished column's last block waits while the column
	// is finished beside the gathers, and finishers beyond the workers take
	// what is left.
	need := max(before, p.gatherPhase+runningOut)
	if need > in.grant {
		return false
	}
	extra := min(max(0, maxFinishers-int64(p.workers)), (in.grant-need)/outMax)
	p.finishers = p.workers + int(extra)
	p.need = need + extra*outMax
	return true
}

// predictSeconds is the cost model's duration of p.
func predictSeconds(in planInput, p plan) float64 {
	rows := float64(in.rows)
	var keyRaw, keyCols float64
	for _, c := range in.columns {
		if c.key {
			keyRaw += float64(c.raw)
			keyCols++
		}
	}
	// The key merge runs before the gathers (or beside them: overlap).
	serial := keyRaw*(costCodecPerByte+costMovePerByte) + rows*keyCols*costKeyPerRow
	rs := float64(in.rowSource)
	if p.rowSourceMem == 0 {
		serial += rs * costSpillPerByte // written once
	}
	if p.sharedSel {
		serial += rows * costExpandPerRow
		if p.rowSourceMem == 0 {
			serial += rs * costSpillPerByte
		}
	}
	// The gathers: work spread over the workers, each pass replaying the
	// row source.
	var work float64
	running := float64(min(p.workers, len(p.groups)))
	var ws float64 // bytes the gathers running at once touch, per pass on average
	for _, g := range p.groups {
		var raw, state float64
		for _, c := range g {
			raw += float64(in.columns[c].raw)
			state += float64(in.columns[c].gatherState(in.inputs))
		}
		work += raw*(costCodecPerByte+costMovePerByte) + costPassFixed
		if p.sharedSel {
			work += rows * costSharedPerRow
		} else {
			work += rows * costExpandPerRow
			if p.rowSourceMem == 0 {
				work += rs * costSpillPerByte
			}
		}
		ws += state
	}
	if len(p.groups) > 0 {
		ws = ws / float64(len(p.groups)) * running
		if ws > float64(cacheBytes) {
			var raw float64
			for _, g := range p.groups {
				for _, c := range g {
					raw += float64(in.columns[c].raw)
				}
			}
			work += raw * costMissPerByte * (1 - float64(cacheBytes)/ws)
		}
	}
	// (The memory finishing takes depends on the grant: leaving it out
	// keeps a plan's prediction the same whatever the grant.)
	resident := max(p.keyPhase+p.rowSourceMem, p.gatherPhase)
	work += float64(max(0, resident-cacheBytes)) * costResidentPerByte
	if p.overlap && serial >= minOverlapSeconds {
		// All workers but one gather while the key merge runs; the work
		// left after it is spread over every worker. The gathers cannot
		// finish before the key merge has given them every row.
		return math.Max(serial, (serial+work)/math.Max(1, running))
	}
	return serial + work/math.Max(1, running)
}

// minimalNeed bounds the memory of the smallest single-level plan of k
// inputs, which candidates always lists: one worker gathering one column a
// pass from a spilled row source (or, with no columns to gather, the key
// merge alone).
func minimalNeed(k int, cols []columnCost) int64 {
	return max(keyPhaseCost(k, cols), maxGather(k, cols))
}

func maxGather(k int, cols []columnCost) int64 {
	var m int64
	for _, c := range cols {
		if !c.key {
			m = max(m, gatherCost(k, c)+c.out)
		}
	}
	return m
}

func grantError(in planInput) *GrantError {
	// A single-level merge, or passes of fan-in 2 (levelCosts).
	minimum := minimalNeed(in.inputs, in.columns)
	if in.inputs > 2 {
		minimum = min(minimum, minimalNeed(2, levelCosts(in.columns)))
	}
	var worst columnCost
	for _, c := range in.columns {
		if !c.key && gatherCost(2, c) > gatherCost(2, worst) {
			worst = c
		}
	}
	var keys []string
	for _, c := range in.columns {
		if c.key {
			keys = append(keys, c.name)
		}
	}
	need := fmt.Sprintf("merging key columns %s of 2 inputs needs %s; gathering column %q of 2 inputs needs %s",
		strings.Join(keys, ","), bytesize.Format(keyPhaseCost(2, in.columns)), worst.name, bytesize.Format(gatherCost(2, worst)))
	return &GrantError{Grant: in.grant, Minimum: minimum, Inputs: in.inputs, Columns: len(in.columns), Need: need}
}
