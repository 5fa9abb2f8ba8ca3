package merger

import (
	"errors"
	"fmt"
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
	overheadPerReader   = 4 << 10                                       // per open column reader: IPC footers, structs
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
}

// planInput is everything the planner looks at.
type planInput struct {
	inputs    int // K
	columns   []columnCost
	grant     int64
	workers   int   // parallelism asked for
	rowSource int64 // estimated size of the row-source stream
	rows      int64 // rows of the merge
}

// plan is the planner's decision and the figures behind it.
type plan struct {
	kind         string
	workers      int   // columns gathered at once (vertical) or column groups (horizontal)
	finishers    int   // columns finished (last block, footer, fsync) at once
	deferFinish  bool  // finish every column after the last gather rather than beside the gathers
	sharedSel    bool  // expand the row source once into a selection vector every gather shares
	fanIn        int   // passes: inputs merged per intermediate container
	rowSourceMem int64 // bytes the row-source stream may hold in memory before spilling
	keyPhase     int64 // memory of the key merge
	gatherMax    int64 // memory of the costliest single-column gather, and of finishing a column beside it
	horizontal   int64 // memory of a horizontal merge
}

// keyPhaseCost is the memory of merging the key columns of k inputs.
func keyPhaseCost(k int, cols []columnCost) int64 {
	n := int64(rowSourceWriterCost)
	for _, c := range cols {
		if c.key {
			n += int64(k)*(c.read+overheadPerReader+c.keyBytes) + c.out
		}
	}
	return n
}

// gatherCost is the memory of gathering column c from k inputs.
func gatherCost(k int, c columnCost) int64 {
	return int64(k)*(c.read+overheadPerReader) + c.out + rowSourceReaderCost
}

// withHeadroom is what an estimate of need bytes asks of the grant: the
// estimates cover the buffers the merge makes, and the headroom covers what
// they leave out (allocation rounding, IPC metadata, small structures).
func withHeadroom(need int64) int64 { return need + need/12 + 8<<10 }

// makePlan picks the plan for in, or returns a *GrantError.
func makePlan(in planInput) (plan, error) {
	grant := in.grant
	in.grant = (grant - 8<<10) * 12 / 13 // the inverse of withHeadroom
	p, err := makePlanWithin(in)
	var ge *GrantError
	if errors.As(err, &ge) {
		ge.Grant = grant
		ge.Minimum = withHeadroom(ge.Minimum)
	}
	return p, err
}

// maxFinishers bounds the columns finished at once: finishing mostly waits
// on fsync, which overlaps well up to a point.
const maxFinishers = 16

// maxDeferredColumns bounds the output files held open to finish at the end.
const maxDeferredColumns = 4096

// makePlanWithin plans for estimates that must fit in in.grant.
func makePlanWithin(in planInput) (plan, error) {
	p, err := planKind(in)
	if err != nil {
		return p, err
	}
	// Each column finishing beside the gathers holds its last block (and
	// its encoded copy); the gathers' figures include one per worker.
	var outMax int64 = 1
	for _, c := range in.columns {
		outMax = max(outMax, c.out)
	}
	var free int64
	switch p.kind {
	case PlanVertical:
		free = in.grant - p.rowSourceMem - int64(p.workers)*p.gatherMax
	case PlanHorizontal:
		free = in.grant - p.horizontal
	}
	// Expanding the row source once (2 bytes a row) spares every gather
	// decoding it again; worth half of what is left.
	if sel := 2 * in.rows; p.kind != PlanPasses && in.inputs <= maxSelInputs && sel <= free/2 {
		p.sharedSel = true
		free -= sel
	}
	p.finishers = p.workers + int(min(max(0, maxFinishers-int64(p.workers)), max(0, free/outMax)))
	// Finishing a column fsyncs its file; on common file systems an fsync
	// also waits for other files' dirty pages, so fsyncs interleaved with
	// writing the remaining columns cost far more than the same fsyncs
	// after the last write. Defer them when the columns' tails fit.
	var tails int64
	for _, c := range in.columns {
		if !c.key {
			tails += c.tail
		}
	}
	if p.kind != PlanPasses && tails+int64(p.finishers)*outMax <= free && len(in.columns) <= maxDeferredColumns {
		p.deferFinish = true
	}
	return p, nil
}

// planKind picks the plan and its workers.
func planKind(in planInput) (plan, error) {
	workers := max(1, in.workers)
	p := plan{keyPhase: keyPhaseCost(in.inputs, in.columns)}
	var all int64
	for _, c := range in.columns {
		if c.key {
			continue
		}
		g := gatherCost(in.inputs, c)
		// A gathered column's last block waits in the writer while the
		// column is finished beside the next gather.
		p.gatherMax = max(p.gatherMax, g+c.out)
		all += g - rowSourceReaderCost
	}
	// Horizontal: the row-source stream stays in memory, and every column of
	// every input is open at once (one reader per worker).
	p.horizontal = max(p.keyPhase+in.rowSource, in.rowSource+all+int64(workers)*rowSourceReaderCost)
	if p.horizontal <= in.grant {
		p.kind = PlanHorizontal
		p.workers = workers
		p.rowSourceMem = in.rowSource
		return p, nil
	}
	// Vertical: key merge first, then columns one per worker.
	if p.keyPhase <= in.grant && p.gatherMax <= in.grant {
		p.kind = PlanVertical
		// Keep the row-source stream in memory when that costs no worker;
		// spill it otherwise (reading it back costs a buffer, in gatherMax).
		spilled := min(int64(workers), in.grant/max(1, p.gatherMax))
		p.workers = int(spilled)
		if free := in.grant - in.rowSource; free >= p.keyPhase && free >= p.gatherMax {
			if kept := min(int64(workers), free/max(1, p.gatherMax)); kept >= spilled {
				p.rowSourceMem = in.rowSource
			}
		}
		return p, nil
	}
	// Passes: the largest fan-in whose vertical merge fits.
	for f := in.inputs - 1; f >= 2; f-- {
		if keyPhaseCost(f, in.columns) <= in.grant && maxGather(f, in.columns) <= in.grant {
			p.kind = PlanPasses
			p.fanIn = f
			p.workers = 1
			return p, nil
		}
	}
	return p, p.grantError(in)
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

func (p plan) grantError(in planInput) *GrantError {
	minimum := max(keyPhaseCost(2, in.columns), maxGather(2, in.columns))
	if in.inputs < 2 {
		minimum = max(p.keyPhase, p.gatherMax)
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
