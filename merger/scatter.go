package merger

import (
	"fmt"
	"math"
	mathbits "math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The scatter. Gathering row by row from K inputs at once reads K streams
// interleaved, one value each, and carries each input's position from row
// to row through memory: on wide merges, whose decoded input blocks do not
// stay in the core's cache, every value read waits on memory. A scatter
// turns it around: the rows of a selection vector are grouped by input once
// (a counting sort, shared by every column of the pass), and each column
// then copies each input's rows in one sequential stretch, writing them to
// their places in the output block, which stays in cache. Fixed-width and
// boolean columns scatter values and validity as they go, moving to an
// input's next block within a stretch; utf8 and binary columns first
// scatter the lengths into the output offsets, sum them, then copy the
// bytes, so they scatter only an output block in which no input moves to
// its next block (otherwise they gather row by row).

// scatterMinRowsPerInput is the fewest rows per input, on average, of a
// selection vector worth grouping: below it the per-input loop overheads
// outweigh the row-by-row gather's. A variable so tests can force scatters.
var scatterMinRowsPerInput = 8

// maxScatterRows bounds the rows of a grouped selection vector: positions
// in an output block are uint16.
const maxScatterRows = 1 << 16

// selGroups is a selection vector's rows grouped by input: rows
// [start[in], start[in+1]) of rows are the positions (in the selection
// vector) of the rows of input in, in order.
type selGroups struct {
	rows  []uint16
	start []int32
	fill  []int32
}

// groupsBytes is the memory of the selGroups of a merge of k inputs into
// blocks of blockRows, 0 when its gathers do not scatter.
func groupsBytes(k, blockRows int) int64 {
	if !scatters(k, blockRows) {
		return 0
	}
	return 2*int64(blockRows) + 8*int64(k+1)
}

// groupsBytesUpTo is the most groupsBytes of a merge of at most k inputs:
// with passes, a level merges fewer inputs than the merge, which may
// scatter where the merge's K would not.
func groupsBytesUpTo(k, blockRows int) int64 {
	if scatters(k, blockRows) {
		return groupsBytes(k, blockRows)
	}
	if most := min(k, blockRows/scatterMinRowsPerInput); most >= 1 {
		return groupsBytes(most, blockRows)
	}
	return 0
}

// scatters reports whether gathers from k inputs into blocks of blockRows
// rows group their selection vectors (full blocks, at least).
func scatters(k, blockRows int) bool {
	return k >= 1 && blockRows <= maxScatterRows && blockRows >= scatterMinRowsPerInput*k
}

// newSelGroups makes the groups of k inputs' selection vectors of up to
// blockRows rows, reserving their memory from res, or returns nil (and
// reserves nothing) when gathers of that shape do not scatter. The caller
// releases groupsBytes(k, blockRows) when done.
func newSelGroups(k, blockRows int, res reserver) (*selGroups, error) {
	n := groupsBytes(k, blockRows)
	if n == 0 {
		return nil, nil
	}
	if err := res.Reserve(n); err != nil {
		return nil, fmt.Errorf("merger: grouped selection vector: %w", err)
	}
	return &selGroups{rows: make([]uint16, blockRows), start: make([]int32, k+1), fill: make([]int32, k)}, nil
}

// group groups sel and returns s, or returns nil when sel is too short to be
// worth it (the gathers then go row by row).
func (s *selGroups) group(sel []uint16) *selGroups {
	if s == nil || len(sel) < scatterMinRowsPerInput*len(s.fill) || len(sel) > len(s.rows) {
		return nil
	}
	k := len(s.fill)
	start := s.start
	clear(start)
	for _, in := range sel {
		start[int(in)+1]++
	}
	for i := range k {
		start[i+1] += start[i]
	}
	fill := s.fill
	copy(fill, start[:k])
	rows := s.rows
	for r, in := range sel {
		rows[fill[in]] = uint16(r)
		fill[in]++
	}
	return s
}

// of returns the positions of input in's rows.
func (s *selGroups) of(in int) []uint16 { return s.rows[s.start[in]:s.start[in+1]] }

// scatter moves the rows of sel, grouped in gr, into the output block. It
// returns false, having moved nothing, when the column cannot scatter them
// (the caller then gathers them row by row).
func (g *columnGather) scatter(sel []uint16, gr *selGroups) (bool, error) {
	switch b := g.out.(type) {
	case *fixedBuilder:
		if g.copier == nil {
			return false, nil
		}
		return true, g.scatterFixed(b, len(sel), gr)
	case *boolBuilder:
		return true, g.scatterBool(b, len(sel), gr)
	case *binaryBuilder:
		return g.scatterBinary(b, len(sel), gr)
	}
	return false, nil
}

// outBits is the validity of the n rows a scatter writes from row base:
// created on the first block with NULLs, and all valid until the scatter
// clears the bits of NULL rows.
type outBits struct {
	v    *validity
	base int
	n    int
	bits []byte
}

func newOutBits(v *validity, n int) outBits {
	o := outBits{v: v, base: v.n, n: n}
	if v.bits != nil {
		o.bits = v.bits.Bytes()
		bitutil.SetBitsTo(o.bits, int64(o.base), int64(n), true)
	}
	return o
}

// clearNulls clears the bits of the rows (positions from base) whose
// source rows, from bit off of valid on, are NULL.
func (o *outBits) clearNulls(valid []byte, off int, rows []uint16) {
	if o.bits == nil {
		o.bits = o.v.ensureBits()
		bitutil.SetBitsTo(o.bits, int64(o.base), int64(o.n), true)
	}
	bits, base := o.bits, o.base
	clear := func(r uint16) {
		d := base + int(r)
		bits[d>>3] &^= 1 << (d & 7)
	}
	// A bit at a time up to a byte of the source bitmap, then a byte at a
	// time, visiting only the NULLs (mostly none or one in eight rows).
	j := 0
	for ; j < len(rows) && (off+j)&7 != 0; j++ {
		if s := off + j; valid[s>>3]>>(s&7)&1 == 0 {
			clear(rows[j])
		}
	}
	for ; j+8 <= len(rows); j += 8 {
		for nulls := ^valid[(off+j)>>3]; nulls != 0; nulls &= nulls - 1 {
			clear(rows[j+mathbits.TrailingZeros8(nulls)])
		}
	}
	for ; j < len(rows); j++ {
		if s := off + j; valid[s>>3]>>(s&7)&1 == 0 {
			clear(rows[j])
		}
	}
}

// next returns the rows of input in left in its current block, moving to
// its next block when the current one is used up.
func (g *columnGather) next(in int) (int, error) {
	if g.pos[in] == g.lens[in] {
		if err := g.advance(in); err != nil {
			return 0, err
		}
	}
	return g.lens[in] - g.pos[in], nil
}

func (g *columnGather) scatterFixed(b *fixedBuilder, n int, gr *selGroups) error {
	b.ensureValues()
	if b.n+n > b.capRows {
		return fmt.Errorf("column %q: %w: builder overflow: %d+%d rows > %d", g.name, ErrInternal, b.n, n, b.capRows)
	}
	dst := b.values.Bytes()[b.n*b.width:]
	bits := newOutBits(&b.validity, n)
	for in := range len(gr.fill) {
		rows := gr.of(in)
		for len(rows) > 0 {
			avail, err := g.next(in)
			if err != nil {
				return err
			}
			m := min(len(rows), avail)
			p := g.pos[in]
			g.copier.scatter(dst, rows[:m], in, p)
			if v := &g.cur[in]; v.valid != nil {
				bits.clearNulls(v.valid, v.off+p, rows[:m])
			}
			g.pos[in] = p + m
			rows = rows[m:]
		}
	}
	b.n += n
	g.outRows += n
	return nil
}

func (c *typedCopier[T]) scatter(dst []byte, rows []uint16, in, p int) {
	d := castSlice[T](dst)
	src := c.srcs[in][p : p+len(rows)]
	for j, r := range rows {
		d[r] = src[j]
	}
}

func (g *columnGather) scatterBool(b *boolBuilder, n int, gr *selGroups) error {
	if b.values == nil {
		b.values = memory.NewResizableBuffer(b.mem)
		b.values.Resize(int(bitutil.BytesForBits(int64(b.capRows))))
	}
	if b.n+n > b.capRows {
		return fmt.Errorf("column %q: %w: builder overflow: %d+%d rows > %d", g.name, ErrInternal, b.n, n, b.capRows)
	}
	vals := b.values.Bytes()
	base := b.n
	bitutil.SetBitsTo(vals, int64(base), int64(n), false)
	bits := newOutBits(&b.validity, n)
	for in := range len(gr.fill) {
		rows := gr.of(in)
		for len(rows) > 0 {
			avail, err := g.next(in)
			if err != nil {
				return err
			}
			m := min(len(rows), avail)
			p := g.pos[in]
			v := &g.cur[in]
			off := v.off + p
			for j, r := range rows[:m] {
				s := off + j
				d := base + int(r)
				vals[d>>3] |= (v.values[s>>3] >> (s & 7) & 1) << (d & 7)
			}
			if v.valid != nil {
				bits.clearNulls(v.valid, off, rows[:m])
			}
			g.pos[in] = p + m
			rows = rows[m:]
		}
	}
	b.n += n
	g.outRows += n
	return nil
}

// scatterBinary scatters utf8 or binary rows when every input's rows lie in
// its current block (or, for an input whose block is used up, its next).
func (g *columnGather) scatterBinary(b *binaryBuilder, n int, gr *selGroups) (bool, error) {
	k := len(gr.fill)
	for in := range k {
		if c := int(gr.start[in+1] - gr.start[in]); c > 0 {
			avail, err := g.next(in)
			if err != nil {
				return false, err
			}
			if c > avail {
				return false, nil
			}
		}
	}
	b.begin(0)
	if b.n+n > b.capRows {
		return false, fmt.Errorf("column %q: %w: builder overflow: %d+%d rows > %d", g.name, ErrInternal, b.n, n, b.capRows)
	}
	// The lengths, scattered into the output offsets, then summed.
	offs := arrow.Int32Traits.CastFromBytes(b.offsets.Bytes())[b.n+1 : b.n+1+n]
	for in := range k {
		rows := gr.of(in)
		if len(rows) == 0 {
			continue
		}
		src := g.cur[in].offsets[g.pos[in] : g.pos[in]+len(rows)+1]
		for j, r := range rows {
			offs[r] = src[j+1] - src[j]
		}
	}
	size := b.size
	for i, l := range offs {
		size += int(l)
		offs[i] = int32(min(size, math.MaxInt32))
	}
	if size > math.MaxInt32 {
		return false, fmt.Errorf("column %q: %w: a block of %s values exceeds 2GiB", g.name, ErrUnsupported, b.dtype)
	}
	if size > b.data.Len() {
		b.data.ResizeNoShrink(max(size, 2*b.data.Len(), 4096))
	}
	data := b.data.Bytes()
	bits := newOutBits(&b.validity, n)
	// The bytes: each input's values in one stretch, to their places.
	for in := range k {
		rows := gr.of(in)
		if len(rows) == 0 {
			continue
		}
		p := g.pos[in]
		v := &g.cur[in]
		src := v.offsets[p : p+len(rows)+1]
		for j, r := range rows {
			at := b.size
			if r > 0 {
				at = int(offs[r-1])
			}
			moveBytes(data[at:int(offs[r])], v.data[src[j]:src[j+1]])
		}
		if v.valid != nil {
			bits.clearNulls(v.valid, v.off+p, rows)
		}
		g.pos[in] = p + len(rows)
	}
	b.size = size
	b.n += n
	g.outRows += n
	return true, nil
}

// moveBytes copies src to dst (of the same length) without writing beyond
// dst: values of up to 32 bytes with two overlapping word moves rather
// than a call to memmove.
func moveBytes(dst, src []byte) {
	switch n := len(src); {
	case n > 32:
		copy(dst, src)
	case n >= 16:
		*(*[16]byte)(dst) = *(*[16]byte)(src)
		*(*[16]byte)(dst[n-16:]) = *(*[16]byte)(src[n-16:])
	case n >= 8:
		*(*[8]byte)(dst) = *(*[8]byte)(src)
		*(*[8]byte)(dst[n-8:]) = *(*[8]byte)(src[n-8:])
	case n >= 4:
		*(*[4]byte)(dst) = *(*[4]byte)(src)
		*(*[4]byte)(dst[n-4:]) = *(*[4]byte)(src[n-4:])
	default:
		for i := range n {
			dst[i] = src[i]
		}
	}
}
