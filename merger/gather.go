package merger

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// blockSource streams one input column's blocks in order;
// *columnar.ColumnReader is one.
type blockSource interface {
	Next() (arrow.Array, error) // io.EOF after the last block
}

// columnGather builds one output column from the same column of every input,
// following the row source: for a run (input, count) it copies the next
// count rows of that input. Each input block is decoded once, used while
// rows remain in it, and released; the output is cut into arrays of
// blockRows rows handed to emit.
type columnGather struct {
	col        int
	name       string
	srcs       []blockSource
	inputs     []string    // container of each input, for errors
	cur        []blockView // current block of each input; arr nil before the first
	pos        []int
	lens       []int     // rows of each input's current block
	copier     selCopier // fixed-width columns: the row-at-a-time mover
	valid      validBits // the validity of each input's current block
	nullBlocks int       // inputs whose current block has NULLs
	blocks     []int     // blocks read per input, for errors
	out        columnBuilder
	mem        *columnar.Recycler // the allocator of out's buffers
	outRows    int                // rows in out
	blockRows  int
	emit       func(col int, arr arrow.Array) error
}

func newColumnGather(col int, name string, dtype arrow.DataType, srcs []blockSource, inputs []string,
	blockRows int, alloc memory.Allocator, emit func(int, arrow.Array) error) (*columnGather, error) {
	// A block's buffers are freed when the writer is done with it, just
	// before the gather starts the next block of the same shape: keep
	// those of one block (validity, values or offsets, bytes) and one more.
	mem := columnar.NewRecycler(alloc, 4, 16)
	b, err := newColumnBuilder(dtype, mem, blockRows)
	if err != nil {
		return nil, err
	}
	g := &columnGather{
		col: col, name: name, srcs: srcs, inputs: inputs,
		cur: make([]blockView, len(srcs)), pos: make([]int, len(srcs)), lens: make([]int, len(srcs)),
		blocks: make([]int, len(srcs)), out: b, mem: mem, blockRows: blockRows, emit: emit,
		valid: newValidBits(len(srcs)),
	}
	if fb, ok := b.(*fixedBuilder); ok && len(srcs) <= maxSelInputs {
		g.copier = newSelCopier(fb.width, len(srcs))
	}
	return g, nil
}

// take copies the next count rows of input to the output.
func (g *columnGather) take(input int, count int64) error {
	for count > 0 {
		a := &g.cur[input]
		if g.pos[input] == a.len {
			if err := g.advance(input); err != nil {
				return err
			}
		}
		n := min(int(min(count, int64(a.len-g.pos[input]))), g.blockRows-g.outRows)
		if err := g.out.appendRun(a, g.pos[input], n); err != nil {
			return fmt.Errorf("column %q: %w", g.name, err)
		}
		g.pos[input] += n
		g.outRows += n
		count -= int64(n)
		if g.outRows == g.blockRows {
			if err := g.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// advance releases input's current block and decodes its next non-empty one.
func (g *columnGather) advance(input int) error {
	if g.cur[input].arr != nil {
		if g.cur[input].valid != nil {
			g.nullBlocks--
		}
		g.cur[input].arr.Release()
		g.cur[input] = blockView{}
		g.lens[input], g.pos[input] = 0, 0
		g.valid.setBlock(input, &g.cur[input])
		if g.copier != nil {
			g.copier.setBlock(input, &g.cur[input])
		}
	}
	for {
		a, err := g.srcs[input].Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: column %q of input %d (%s) has fewer rows than its key columns after %d blocks",
				ErrMismatch, g.name, input, g.inputs[input], g.blocks[input])
		}
		if err != nil {
			return fmt.Errorf("column %q of input %d (%s), block %d: %w", g.name, input, g.inputs[input], g.blocks[input], err)
		}
		g.blocks[input]++
		if a.Len() == 0 {
			a.Release()
			continue
		}
		g.cur[input], g.pos[input], g.lens[input] = newBlockView(a), 0, a.Len()
		if g.cur[input].valid != nil {
			g.nullBlocks++
		}
		g.valid.setBlock(input, &g.cur[input])
		if g.copier != nil {
			g.copier.setBlock(input, &g.cur[input])
		}
		return nil
	}
}

func (g *columnGather) flush() error {
	if g.outRows == 0 {
		return nil
	}
	arr := g.out.finish()
	g.outRows = 0
	err := g.emit(g.col, arr)
	arr.Release()
	if err != nil {
		return fmt.Errorf("write column %q: %w", g.name, err)
	}
	return nil
}

// finish emits the last rows and checks that every input was used up: a
// column with rows left over disagrees with its container's key columns.
func (g *columnGather) finish() error {
	if err := g.flush(); err != nil {
		return err
	}
	for i := range g.srcs {
		if g.pos[i] < g.cur[i].len {
			return fmt.Errorf("%w: column %q of input %d (%s) has rows left in block %d", ErrMismatch, g.name, i, g.inputs[i], g.blocks[i]-1)
		}
		for {
			a, err := g.srcs[i].Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("column %q of input %d (%s), block %d: %w", g.name, i, g.inputs[i], g.blocks[i], err)
			}
			g.blocks[i]++
			rows := a.Len()
			a.Release()
			if rows > 0 {
				return fmt.Errorf("%w: column %q of input %d (%s) has more rows than its key columns", ErrMismatch, g.name, i, g.inputs[i])
			}
		}
	}
	return nil
}

// release frees the gather's blocks and output buffers.
func (g *columnGather) release() {
	for i := range g.cur {
		if g.cur[i].arr != nil {
			g.cur[i].arr.Release()
			g.cur[i] = blockView{}
		}
	}
	g.out.release()
	g.mem.Close()
}
