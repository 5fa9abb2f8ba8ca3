package merger

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// The row-at-a-time gather. Runs in a merge of overlapping inputs are mostly
// a single row, so instead of copying run by run, a gather expands the row
// source into a selection vector (the input of each output row) and moves
// fixed-width values with one tight typed loop per stretch of rows, stopping
// only when an input's block runs out. Validity (and boolean values) are
// read without a branch, from a bitmap of ones for blocks without NULLs, and
// written a byte at a time; utf8 and binary values of up to 32 bytes are
// moved with one or two 16-byte moves instead of a call to memmove.

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
	// valid). It stops at the first row whose input's block is used up,
	// returning the rows done.
	copy(dst []byte, bits []byte, dstRow int, sel []uint16, pos, lens []int, valid *validBits) int
	// scatter moves rows [p, p+len(rows)) of input's block to the rows
	// of dst (values from the output block's first row gathered now).
	scatter(dst []byte, rows []uint16, input, p int)
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

func (c *typedCopier[T]) copy(dst []byte, bits []byte, dstRow int, sel []uint16, pos, lens []int, valid *validBits) int {
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
	if len(d) == 0 {
		return 0
	}
	w := newBitWriter(bits, dstRow)
	for i := range d {
		in := sel[i]
		p := pos[in]
		if p == lens[in] {
			w.flush()
			return i
		}
		d[i] = c.srcs[in][p]
		pos[in] = p + 1
		w.put(valid.bit(in, p))
	}
	w.flush()
	return len(d)
}

// allValid is the validity of a block without NULLs of up to 64Ki rows;
// allValidMax, made on first use, that of any block the columnar reader
// decodes.
var (
	allValid     = onesBitmap(64 << 10)
	allValidMax  []byte
	allValidOnce sync.Once
)

func onesBitmap(rows int) []byte {
	b := make([]byte, (rows+7)/8)
	for i := range b {
		b[i] = 0xff
	}
	return b
}

// validBits is the validity bitmap of each input's current block, with
// blocks without NULLs pointing at allValid, so that reading a row's bit
// needs no branch.
type validBits struct {
	bits [][]byte
	off  []int // the block's offset into its bitmap
}

func newValidBits(inputs int) validBits {
	return validBits{bits: make([][]byte, inputs), off: make([]int, inputs)}
}

func (b *validBits) setBlock(input int, v *blockView) {
	b.off[input] = v.off
	switch {
	case v.len == 0:
		b.bits[input] = nil
	case v.valid != nil:
		b.bits[input] = v.valid
	case v.off+v.len <= 8*len(allValid):
		b.bits[input] = allValid
	default:
		allValidOnce.Do(func() { allValidMax = onesBitmap(columnar.MaxBlockRows) })
		if v.off+v.len <= 8*len(allValidMax) {
			b.bits[input] = allValidMax
		} else {
			b.bits[input] = onesBitmap(v.off + v.len) // a sliced array beyond any block
		}
	}
}

// bit returns the validity of row p of input's block: 1 valid, 0 NULL.
func (b *validBits) bit(input uint16, p int) byte {
	s := b.off[input] + p
	return b.bits[input][s>>3] >> (s & 7) & 1
}

// bitWriter writes consecutive bits of a bitmap from a row on, a byte at a
// time: the bits of the first byte below that row are kept, those of the
// last byte above the last row written are cleared.
type bitWriter struct {
	bits []byte
	r    int  // the next row
	acc  byte // the bits of byte r>>3 below r
}

func newBitWriter(bits []byte, r int) bitWriter {
	return bitWriter{bits: bits, r: r, acc: bits[r>>3] & (1<<(r&7) - 1)}
}

// put appends bit (0 or 1).
func (w *bitWriter) put(bit byte) {
	w.acc |= bit << (w.r & 7)
	w.r++
	if w.r&7 == 0 {
		w.bits[w.r>>3-1] = w.acc
		w.acc = 0
	}
}

// flush writes the bits of the last, partial byte.
func (w *bitWriter) flush() {
	if w.r&7 != 0 {
		w.bits[w.r>>3] = w.acc
	}
}

// selMover is a builder that can gather rows by selection vector: it moves
// rows until an input's block is used up and returns how many it moved.
type selMover interface {
	appendSel(sel []uint16, pos, lens []int, views []blockView, valid *validBits, withBits bool) (int, error)
}

// takeSel gathers the rows sel names (one input per output row). sel must
// not cross an output block boundary.
func (g *columnGather) takeSel(sel []uint16) error { return g.takeSelGrouped(sel, nil) }

// takeSelGrouped is takeSel with sel's rows grouped by input (gr, from
// selGroups.group(sel)), which it scatters if the column can; gr nil
// gathers row by row.
func (g *columnGather) takeSelGrouped(sel []uint16, gr *selGroups) error {
	if gr != nil && len(sel) > 0 {
		ok, err := g.scatter(sel, gr)
		if err != nil {
			return err
		}
		if ok {
			if g.outRows == g.blockRows {
				return g.flush()
			}
			return nil
		}
	}
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
			done = g.copier.copy(b.values.Bytes(), bits, b.n, sel, g.pos, g.lens, &g.valid)
			b.n += done
		case selMover:
			done, err = b.appendSel(sel, g.pos, g.lens, g.cur, &g.valid, g.nullBlocks > 0)
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

func (b *boolBuilder) appendSel(sel []uint16, pos, lens []int, views []blockView, valid *validBits, withBits bool) (int, error) {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
		b.values.Resize(int(bitutil.BytesForBits(int64(b.capRows))))
	}
	sel = sel[:min(len(sel), b.capRows-b.n)]
	if len(sel) == 0 {
		return 0, nil
	}
	vals := newBitWriter(b.values.Bytes(), b.n)
	var bits bitWriter
	withBits = withBits || b.bits != nil
	if withBits {
		bits = newBitWriter(b.ensureBits(), b.n)
	}
	done := len(sel)
	for i, in := range sel {
		p := pos[in]
		if p == lens[in] {
			done = i
			break
		}
		v := &views[in]
		s := v.off + p
		vals.put(v.values[s>>3] >> (s & 7) & 1)
		if withBits {
			bits.put(valid.bit(in, p))
		}
		pos[in] = p + 1
	}
	vals.flush()
	if withBits {
		bits.flush()
	}
	b.n += done
	return done, nil
}

func (b *binaryBuilder) appendSel(sel []uint16, pos, lens []int, views []blockView, valid *validBits, withBits bool) (int, error) {
	b.begin(0)
	sel = sel[:min(len(sel), b.capRows-b.n)]
	if len(sel) == 0 {
		return 0, nil
	}
	var bits bitWriter
	withBits = withBits || b.bits != nil
	if withBits {
		bits = newBitWriter(b.ensureBits(), b.n)
	}
	offs := arrow.Int32Traits.CastFromBytes(b.offsets.Bytes())[b.n+1:]
	offs = offs[:len(sel)]
	data := b.data.Bytes()
	size := b.size
	done := len(sel)
	var err error
	for i, in := range sel {
		p := pos[in]
		if p == lens[in] {
			done = i
			break
		}
		v := &views[in]
		lo, hi := int(v.offsets[p]), int(v.offsets[p+1])
		if need := size + hi - lo; need > len(data) {
			if need > math.MaxInt32 {
				done = i
				err = fmt.Errorf("%w: a block of %s values exceeds 2GiB", ErrUnsupported, b.dtype)
				break
			}
			b.data.ResizeNoShrink(max(need, 2*len(data), 4096))
			data = b.data.Bytes()
		}
		// Most values are short: move them with one or two 16-byte moves
		// rather than a call to memmove.
		switch n := hi - lo; {
		case n <= 16 && lo+16 <= len(v.data) && size+16 <= len(data):
			// Whatever follows the value is overwritten by the next one
			// or lies beyond the block's bytes.
			*(*[16]byte)(data[size:]) = *(*[16]byte)(v.data[lo:])
		case n >= 16 && n <= 32:
			*(*[16]byte)(data[size:]) = *(*[16]byte)(v.data[lo:])
			*(*[16]byte)(data[size+n-16:]) = *(*[16]byte)(v.data[hi-16:])
		default:
			copy(data[size:], v.data[lo:hi])
		}
		size += hi - lo
		offs[i] = int32(size)
		if withBits {
			bits.put(valid.bit(in, p))
		}
		pos[in] = p + 1
	}
	if withBits {
		bits.flush()
	}
	b.size = size
	b.n += done
	return done, err
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
