package merger

import (
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// Folding: a merge of a keyed table's containers (columnar/changes.go)
// writes only the rows that are still current among its inputs. Before
// anything else, columnar.Superseded resolves the versions over all inputs
// and gives, per input, a bitmap of the rows to skip: rows superseded by a
// higher version, the second copy of a change applied twice, and the
// current delete markers of version at most Options.DropMarkersThrough.
// The other markers stay: a row they delete may be in a container outside
// the merge.
//
// Every plan then reads the inputs through filters that drop those rows as
// blocks are decoded (filteredBatches for the key merge, filteredBlocks for
// the gathers): the key merge, the row-source stream, the selection vectors
// and the gathers see the kept rows only, as if the inputs held nothing
// else, so nothing downstream of the readers knows about folding. A block
// with no dropped row passes through untouched; one with dropped rows is
// copied without them (keepRows), and the copy is what the planner counts
// as columnCost.filter. The bitmaps stay in the budget until every input
// is read (planInput.held).

// resolution is a keyed merge's resolved versions.
type resolution struct {
	res  *columnar.Resolution
	held int64 // bytes of the bitmaps in the budget
}

// release gives the bitmaps' memory back to the budget.
func (r *resolution) release() {
	if r != nil && r.res != nil {
		r.res.Release()
		r.held = 0
	}
}

// bytes is what the bitmaps hold in the budget now: 0 once released, and
// for unkeyed inputs.
func (r *resolution) bytes() int64 {
	if r == nil {
		return 0
	}
	return r.held
}

// keyedInputs reports whether the inputs (whose primary keys open found
// equal) are a keyed table's.
func keyedInputs(ins []input) bool { return len(ins[0].c.Manifest().PrimaryKey) > 0 }

// resolve runs columnar.Superseded over the inputs, within the grant, and
// gives each input its rows to drop. Its key table holds a key of every
// row outside the largest input; a grant it outgrows is an error wrapping
// ErrGrantTooSmall, before anything is written.
func (m *merge) resolve(ins []input) (*resolution, error) {
	cs := make([]*columnar.Container, len(ins))
	for i, in := range ins {
		cs[i] = in.c
	}
	// Superseded reads the key, version and deleted columns (those it
	// needs) once more: those blocks count among the blocks read.
	before := m.io.BlocksDecompressed.Load()
	res, err := columnar.Superseded(m.ctx, cs, columnar.ResolveOptions{
		KeepMarkers:        true,
		DropMarkersThrough: m.opts.DropMarkersThrough,
		Budget:             m.budget,
	})
	m.stats.BlocksTotal += m.io.BlocksDecompressed.Load() - before
	if errors.Is(err, columnar.ErrBudgetExceeded) {
		// Superseded is deterministic: the same grant fails the same way.
		return nil, fmt.Errorf("merger: %w: resolving the versions of %d inputs: %w", ErrGrantTooSmall, len(ins), err)
	}
	if err != nil {
		return nil, fmt.Errorf("merger: resolve versions: %w", err)
	}
	if len(res.Dropped) != len(ins) {
		res.Release()
		return nil, fmt.Errorf("%w: resolution of %d inputs has %d bitmaps", ErrInternal, len(ins), len(res.Dropped))
	}
	r := &resolution{res: res}
	for i, b := range res.Dropped {
		if b == nil || b.IsEmpty() {
			continue
		}
		ins[i].drop = b
		// What Superseded charged for it (columnar/changes.go).
		r.held += int64(b.GetSizeInBytes())
	}
	m.stats.SupersededRows = res.DroppedRows()
	return r, nil
}

// dropCursor walks an input's dropped rows as its blocks are read in order.
type dropCursor struct {
	it   roaring.IntPeekable
	base int // input row of the next block's first row
	rows []int
}

func newDropCursor(b *roaring.Bitmap) *dropCursor {
	return &dropCursor{it: b.Iterator()}
}

// next returns the rows to drop among the next n rows of the input, as
// positions in the block, ascending.
func (d *dropCursor) next(n int) []int {
	d.rows = d.rows[:0]
	end := uint32(d.base + n)
	for d.it.HasNext() && d.it.PeekNext() < end {
		d.rows = append(d.rows, int(d.it.Next())-d.base)
	}
	d.base += n
	return d.rows
}

// filteredBatches reads an input's key columns without its dropped rows.
type filteredBatches struct {
	src  recordSource
	drop *dropCursor
	mem  memory.Allocator
}

func (f *filteredBatches) Next() (arrow.RecordBatch, error) {
	rec, err := f.src.Next()
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	drop := f.drop.next(n)
	if len(drop) == 0 {
		return rec, nil
	}
	defer rec.Release()
	if drop[0] < 0 || drop[len(drop)-1] >= n {
		return nil, fmt.Errorf("%w: dropped row outside its block", ErrInternal)
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for j := range cols {
		if cols[j], err = keepRows(f.mem, rec.Column(j), drop); err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.ColumnName(j), err)
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(n-len(drop))), nil
}

// filteredBlocks reads an input's column without its dropped rows.
type filteredBlocks struct {
	src  blockSource
	drop *dropCursor
	mem  memory.Allocator
}

func (f *filteredBlocks) Next() (arrow.Array, error) {
	a, err := f.src.Next()
	if err != nil {
		return nil, err
	}
	drop := f.drop.next(a.Len())
	if len(drop) == 0 {
		return a, nil
	}
	defer a.Release()
	if drop[0] < 0 || drop[len(drop)-1] >= a.Len() {
		return nil, fmt.Errorf("%w: dropped row outside its block", ErrInternal)
	}
	return keepRows(f.mem, a, drop)
}

// keepRows copies arr without the rows drop names (ascending positions),
// into buffers from mem sized to the rows kept.
func keepRows(mem memory.Allocator, arr arrow.Array, drop []int) (arrow.Array, error) {
	n := arr.Len()
	b, err := newColumnBuilder(arr.DataType(), mem, n-len(drop))
	if err != nil {
		return nil, err
	}
	defer b.release()
	v := newBlockView(arr)
	if bb, ok := b.(*binaryBuilder); ok && n > 0 {
		size := int(v.offsets[n] - v.offsets[0])
		for _, r := range drop {
			size -= int(v.offsets[r+1] - v.offsets[r])
		}
		bb.begin(size)
	}
	from := 0
	for i := 0; i <= len(drop); i++ {
		to := n // after the last dropped row: the rest of the block
		if i < len(drop) {
			to = drop[i]
		}
		if to > from {
			if err := b.appendRun(&v, from, to-from); err != nil {
				return nil, err
			}
		}
		from = to + 1
	}
	return b.finish(), nil
}

// freezeColumn is the column whose versions the merge freezes
// (Options.FreezeThrough): the version column of keyed inputs, or -1 when
// nothing is frozen. A version column in the sort key is not frozen, as
// writing it as 0 could unsort the output.
func (m *merge) freezeColumn(ins []input, keyIdx []int) int {
	if m.opts.FreezeThrough <= 0 || !keyedInputs(ins) {
		return -1
	}
	_, v, _, ok := ins[0].c.PrimaryKeyIndices()
	if !ok || slices.Contains(keyIdx, v) {
		return -1
	}
	return v
}

// freezeCost counts, in the frozen column's cost, the copy of an output
// block freezeVersions makes.
func freezeCost(costs []columnCost, col int) {
	if col >= 0 && col < len(costs) {
		costs[col].out += costs[col].block
	}
}

// freezeVersions returns arr, a block of the version column, with the
// versions at most through written as 0, as a copy from mem; arr itself
// (not retained) when it holds none.
func freezeVersions(mem memory.Allocator, arr arrow.Array, through int64) (arrow.Array, bool, error) {
	vers, ok := arr.(*array.Int64)
	if !ok || vers.NullN() > 0 {
		return nil, false, fmt.Errorf("%w: version column is %s with %d NULLs, want int64 without NULLs", ErrInternal, arr.DataType(), arr.NullN())
	}
	vals := vers.Int64Values()
	if !slices.ContainsFunc(vals, func(v int64) bool { return v > 0 && v <= through }) {
		return arr, false, nil
	}
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.Reserve(len(vals))
	for _, v := range vals {
		if v <= through {
			v = 0
		}
		b.UnsafeAppend(v)
	}
	return b.NewArray(), true, nil
}
