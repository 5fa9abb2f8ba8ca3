package windower

// Spilled containers: their block sizes. The
// package documentation describes the spill directory's layout.

// runBlockRows is the largest block size of the containers the windower
// spills (sorted runs, stage results): small blocks keep the merge's
// memory (a block per input and column) low.
const runBlockRows = 8192

// spillBlockRows is the block size of a spilled container whose rows are
// about rowBytes each, under grant: runBlockRows, fewer for wide rows
// (long strings), so that a block of every column takes at most 1/64 of
// the grant and the merge of the runs holds a block per run and column
// within it. Never below 64 rows.
func spillBlockRows(rowBytes, grant int64) int {
	rows := grant / 64 / max(1, rowBytes)
	return int(min(max(rows, 64), runBlockRows))
}

// rowBytes estimates the bytes of one row of the query's input columns
// and outputs, for sizing spilled blocks.
func (p *plan) rowBytes() int64 {
	n := 9 * int64(len(p.outputs))
	for c, u := range p.usedCols {
		if u {
			n += p.colBytes(c)
		}
	}
	return n
}
