package merger

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The row-at-a-time gather. Runs in a merge of overlapping inputs are mostly
// a single row, so instead of copying run by run, a gather expands the row
// source into a selection vector (the input of each output row) and moves
// fixed-width values with one tight typed loop per stretch of rows, stopping
// only when an input's block runs out.

// maxSelInputs bounds the inputs a selection vector (uint16) can name.
const maxSelInputs = 1 << 16

// fixedWord is the storage of every fixed-width type the merge gathers.
type fixedWord interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// castSlice views b as a slice of T. Arrow buffers are 64-byte aligned.
func castSlice[T fixedWord](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < size {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)
}

// selCopier moves fixed-width values of one column from the inputs' current
// blocks to the output, following a selection vector.
type selCopier interface {
	// setBlock makes v input's current block.
	setBlock(input int, v *blockView)
	// copy moves the values of the rows sel names into dst from row dstRow
	// on, advancing pos; with bits non-nil it also moves validity (from
	// valid, whose entries are nil for blocks without NULLs). It stops at
	// the first row whose input's block is used up, returning the rows done.
	copy(dst []byte, bits []byte, dstRow int, sel []uint16, pos, lens []int, valid []blockView) int
}

type typedCopier[T fixedWord] struct {
	srcs [][]T
}

func newSelCopier(width, inputs int) selCopier {
	switch width {
	case 1:
		return &typedCopier[uint8]{srcs: make([][]uint8, inputs)}
	case 2:
		return &typedCopier[uint16]{srcs: make([][]uint16, inputs)}
	case 4:
		return &typedCopier[uint32]{srcs: make([][]uint32, inputs)}
	case 8:
		return &typedCopier[uint64]{srcs: make([][]uint64, inputs)}
	}
	return nil
}

func (c *typedCopier[T]) setBlock(input int, v *blockView) {
	if v.len == 0 {
		c.srcs[input] = nil
		return
	}
	c.srcs[input] = castSlice[T](v.values)[v.off : v.off+v.len]
}

func (c *typedCopier[T]) copy(dst []byte, bits []byte, dstRow int, sel []uint16, pos, lens []int, views []blockView) int {
	d := castSlice[T](dst)[dstRow:]
	d = d[:min(len(d), len(sel))]
	if bits == nil {
		for i := range d {
			in := sel[i]
			p := pos[in]
			if p == lens[in] {
				return i
			}
			d[i] = c.srcs[in][p]
			pos[in] = p + 1
		}
		return len(d)
	}
	for i := range d {
		in := sel[i]
		p := pos[in]
		if p == lens[in] {
			return i
		}
		d[i] = c.srcs[in][p]
		pos[in] = p + 1
		setValidBit(bits, dstRow+i, &views[in], p)
	}
	return len(d)
}

// selMover is a builder that can gather rows by selection vector: it moves
// rows until an input's block is used up and returns how many it moved.
type selMover interface {
	appendSel(sel []uint16, pos, lens []int, views []blockView, withBits bool) (int, error)
}

// takeSel gathers the rows sel names (one input per output row). sel must
// not cross an output block boundary.
func (g *columnGather) takeSel(sel []uint16) error {
	for len(sel) > 0 {
		var done int
		var err error
		switch b := g.out.(type) {
		case *fixedBuilder:
			if g.copier == nil {
				return g.takeSelRuns(sel)
			}
			b.ensureValues()
			var bits []byte
			if g.nullBlocks > 0 || b.bits != nil {
				bits = b.ensureBits()
			}
			done = g.copier.copy(b.values.Bytes(), bits, b.n, sel, g.pos, g.lens, g.cur)
			b.n += done
		case selMover:
			done, err = b.appendSel(sel, g.pos, g.lens, g.cur, g.nullBlocks > 0)
			if err != nil {
				return fmt.Errorf("column %q: %w", g.name, err)
			}
		default:
			return g.takeSelRuns(sel)
		}
		g.outRows += done
		sel = sel[done:]
		if len(sel) > 0 {
			if err := g.advance(int(sel[0])); err != nil {
				return err
			}
		}
	}
	if g.outRows == g.blockRows {
		return g.flush()
	}
	return nil
}

// takeSelRuns coalesces sel back into runs for builders without a
// row-at-a-time path.
func (g *columnGather) takeSelRuns(sel []uint16) error {
	for i := 0; i < len(sel); {
		j := i + 1
		for j < len(sel) && sel[j] == sel[i] {
			j++
		}
		if err := g.take(int(sel[i]), int64(j-i)); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// setValidBit copies the validity of row p of v to bit r of bits.
func setValidBit(bits []byte, r int, v *blockView, p int) {
	if v.valid == nil || v.valid[(v.off+p)>>3]&(1<<((v.off+p)&7)) != 0 {
		bits[r>>3] |= 1 << (r & 7)
	} else {
		bits[r>>3] &^= 1 << (r & 7)
	}
}

func (b *boolBuilder) appendSel(sel []uint16, pos, lens []int, views []blockView, withBits bool) (int, error) {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
		b.values.Resize(int(bitutil.BytesForBits(int64(b.capRows))))
	}
	var bits []byte
	if withBits || b.bits != nil {
		bits = b.ensureBits()
	}
	vals := b.values.Bytes()
	sel = sel[:min(len(sel), b.capRows-b.n)]
	for i, in := range sel {
		p := pos[in]
		if p == lens[in] {
			return i, nil
		}
		v := &views[in]
		r := b.n
		s := v.off + p
		if v.values[s>>3]&(1<<(s&7)) != 0 {
			vals[r>>3] |= 1 << (r & 7)
		} else {
			vals[r>>3] &^= 1 << (r & 7)
		}
		if bits != nil {
			setValidBit(bits, r, v, p)
		}
		pos[in] = p + 1
		b.n++
	}
	return len(sel), nil
}

func (b *binaryBuilder) appendSel(sel []uint16, pos, lens []int, views []blockView, withBits bool) (int, error) {
	if b.offsets == nil {
		b.offsets = memory.NewResizableBuffer(b.mem)
		b.offsets.Resize((b.capRows + 1) * 4)
		arrow.Int32Traits.CastFromBytes(b.offsets.Bytes())[0] = 0
		b.newData()
	}
	var bits []byte
	if withBits || b.bits != nil {
		bits = b.ensureBits()
	}
	offs := arrow.Int32Traits.CastFromBytes(b.offsets.Bytes())
	data := b.data.Bytes()
	sel = sel[:min(len(sel), b.capRows-b.n)]
	for i, in := range sel {
		p := pos[in]
		if p == lens[in] {
			return i, nil
		}
		v := &views[in]
		lo, hi := int(v.offsets[p]), int(v.offsets[p+1])
		if need := b.size + hi - lo; need > len(data) {
			if need > math.MaxInt32 {
				return i, fmt.Errorf("%w: a block of %s values exceeds 2GiB", ErrUnsupported, b.dtype)
			}
			b.data.ResizeNoShrink(max(need, 2*len(data), 4096))
			data = b.data.Bytes()
		}
		b.size += copy(data[b.size:], v.data[lo:hi])
		offs[b.n+1] = int32(b.size)
		if bits != nil {
			setValidBit(bits, b.n, v, p)
		}
		pos[in] = p + 1
		b.n++
	}
	return len(sel), nil
}

// selFiller expands a row-source stream into selection vectors.
type selFiller struct {
	rr      *rowSourceReader
	input   int
	pending int64 // rows of input not yet handed out
	eof     bool
}

// done reports whether the stream has no rows left.
func (f *selFiller) done() bool {
	if f.pending > 0 {
		return false
	}
	if !f.eof {
		if _, _, err := f.rr.next(); isEOF(err) {
			f.eof = true
		}
	}
	return f.eof
}

// fill writes up to len(sel) inputs into sel and returns how many.
func (f *selFiller) fill(sel []uint16) (int, error) {
	n := 0
	for n < len(sel) {
		if f.pending == 0 {
			if f.eof {
				break
			}
			in, count, err := f.rr.next()
			if err != nil {
				if isEOF(err) {
					f.eof = true
					break
				}
				return n, err
			}
			f.input, f.pending = in, count
		}
		k := int(min(f.pending, int64(len(sel)-n)))
		v := uint16(f.input)
		for i := n; i < n+k; i++ {
			sel[i] = v
		}
		n += k
		f.pending -= int64(k)
	}
	return n, nil
}
