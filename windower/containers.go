package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
)

// Reading the input containers: opening them, measuring their strings,
// sizing memory per row, and loading them into memory when they fit.

// openInputs opens the containers of srcs and checks they share a schema.
func openInputs(srcs []columnar.Source, o *Options, mem memory.Allocator, stats *columnar.IOStats) ([]*columnar.Container, *arrow.Schema, error) {
	if len(srcs) == 0 {
		return nil, nil, fmt.Errorf("%w: no input containers", ErrInvalidQuery)
	}
	cs := make([]*columnar.Container, 0, len(srcs))
	var schema *arrow.Schema
	for _, src := range srcs {
		d := src.String()
		c, err := columnar.OpenSource(src, columnar.OpenOptions{Allocator: mem, Logger: o.Logger, Stats: stats})
		if err != nil {
			return nil, nil, fmt.Errorf("windower: open input: %w", err)
		}
		if schema == nil {
			schema = c.Schema()
		} else if !schema.Equal(c.Schema()) {
			return nil, nil, fmt.Errorf("windower: input %s: %w: schema %s, first input has %s", d, columnar.ErrSchemaMismatch, c.Schema(), schema)
		}
		cs = append(cs, c)
	}
	return cs, schema, nil
}

// measureStrings sets p.strBytes from the containers' manifests: the
// uncompressed bytes of each string column's blocks less their offsets,
// per row (rounded up). A vector holds a copy of those bytes.
func (p *plan) measureStrings(cs []*columnar.Container) {
	var rows int64
	raw := make([]int64, len(p.usedCols))
	for _, c := range cs {
		m := c.Manifest()
		rows += m.Rows
		for i, f := range m.Files {
			if i >= len(raw) || p.schema.kinds[i] != kindString {
				continue
			}
			for _, b := range f.Blocks {
				raw[i] += b.RawBytes
			}
			raw[i] -= 4 * (m.Rows + int64(len(f.Blocks)))
		}
	}
	p.strBytes = make([]int64, len(p.usedCols))
	if rows == 0 {
		return
	}
	for i, n := range raw {
		if n > 0 {
			p.strBytes[i] = (n + rows - 1) / rows
		}
	}
}

// colBytes is the memory per row of input column c in evaluation form.
func (p *plan) colBytes(c int) int64 {
	n := kindBytes(p.schema.kinds[c])
	if p.strBytes != nil {
		n += p.strBytes[c]
	}
	return n
}

// maxBlockBytes is the most memory reading one block of the columns cols
// of any of the containers takes (columnar.FileBlock.ReadBytes): its
// compressed and decoded buffers. The windower's readers reuse their
// buffers.
func maxBlockBytes(cs []*columnar.Container, cols []int) int64 {
	var most int64
	for _, c := range cs {
		m := c.Manifest()
		for b := range m.Blocks {
			var n int64
			for _, col := range cols {
				if col < len(m.Files) && b < len(m.Files[col].Blocks) {
					n += m.Files[col].Blocks[b].ReadBytes(true)
				}
			}
			most = max(most, n)
		}
	}
	return most
}

// stringCap is the string bytes a buffer of bufRows rows may hold: what
// memoryPerRow counts for bufRows rows' strings (the input's and the
// results' copies), shared by the buffer and each string result.
func (p *plan) stringCap(bufRows int) int64 {
	if p.strBytes == nil {
		return math.MaxInt64
	}
	var perRow int64
	copies := int64(1)
	for c, used := range p.usedCols {
		if used {
			perRow += p.strBytes[c]
		}
	}
	for _, o := range p.outputs {
		if b := p.outputStrBytes(o); b > 0 {
			perRow += b
			copies++
		}
	}
	if perRow == 0 {
		return math.MaxInt64
	}
	return int64(bufRows) * perRow / copies
}

// repeatedStringArgs returns the input columns whose strings a result of
// p may repeat on many rows (first_value, last_value, nth_value, min and
// max of strings: a frame's one value on every row of it), all string
// columns when such an argument is an expression. A result's strings are
// otherwise at most its input's; these are at most the rows times the
// argument's longest string.
func (p *plan) repeatedStringArgs() []int {
	var cols []int
	for _, o := range p.outputs {
		c := o.call
		if c == nil || c.outKind != kindString || len(c.args) == 0 {
			continue
		}
		switch c.fn {
		case fnFirstValue, fnLastValue, fnNthValue, fnMin, fnMax:
		default:
			continue
		}
		if e := c.args[0]; e.col >= 0 {
			cols = append(cols, e.col)
			continue
		}
		for col, used := range p.usedCols {
			if used && p.schema.kinds[col] == kindString {
				cols = append(cols, col)
			}
		}
	}
	return cols
}

// longestString is the length of the longest string of rows [from, to)
// in the columns cols of in.
func longestString(in *input, cols []int, from, to int) int64 {
	var most int
	for _, c := range cols {
		for _, s := range in.cols[c].strs[from:to] {
			most = max(most, len(s))
		}
	}
	return int64(most)
}

// repeatedStringBytes is how many more bytes than memoryPerRow counts the
// results of p that repeat strings (repeatedStringArgs) may take over the
// n rows of in: each such result's rows times its argument's longest
// string, less the input's average the plan counted.
func (p *plan) repeatedStringBytes(in *input) int64 {
	var extra int64
	for _, c := range p.repeatedStringArgs() {
		counted := int64(0)
		if p.strBytes != nil {
			counted = p.strBytes[c]
		}
		extra += max(0, int64(in.n)*(longestString(in, []int{c}, 0, in.n)-counted))
	}
	return extra
}

// stringBytes is the bytes of the string values of rows [from, to) of in.
func stringBytes(in *input, from, to int) int64 {
	var n int64
	for _, v := range in.cols {
		if v == nil || v.kind != kindString {
			continue
		}
		for _, s := range v.strs[from:to] {
			n += int64(len(s))
		}
	}
	return n
}

// memoryPerRow estimates the bytes per input row the in-memory evaluation
// holds at its peak: input columns, sort buffers, sorted keys and
// arguments, outputs, and the result's Arrow columns.
func (p *plan) memoryPerRow() int64 {
	var n int64
	for c, used := range p.usedCols {
		if used {
			n += p.colBytes(c)
		}
	}
	n += 4 + 8 + 8 + 4 + 2 // permutation, radix keys and scratch, boundary flags
	for _, g := range p.groups {
		n += int64(len(g.partition)+len(g.order)) * 9
		for _, c := range g.calls {
			n += 2 * (kindBytes(c.outKind) + 1) // output and its scatter/gather copy
			n += int64(len(c.args)) * 9
			if c.frame.exclude != excludeNoOthers {
				n += 64 // segment tree
			}
		}
	}
	for _, o := range p.outputs {
		if o.expr != nil {
			n += 2 * (kindBytes(o.expr.kind) + 1)
		}
		n += 9 + p.outputStrBytes(o) // Arrow result column
	}
	return n
}

// outputStrBytes is the string bytes per row of output o's Arrow column:
// those of the input column it passes on (as it is or through a window
// function such as first_value or lag); 0 for other outputs.
func (p *plan) outputStrBytes(o outputCol) int64 {
	if p.strBytes == nil {
		return 0
	}
	e := o.expr
	if o.call != nil {
		if o.call.outKind != kindString || len(o.call.args) == 0 {
			return 0
		}
		e = o.call.args[0]
	}
	if e == nil || e.kind != kindString {
		return 0
	}
	if e.col >= 0 {
		return p.strBytes[e.col]
	}
	var most int64 // an expression over strings: as long as the longest
	for _, b := range p.strBytes {
		most = max(most, b)
	}
	return most
}

func kindBytes(k kind) int64 {
	if k == kindString {
		return 32
	}
	return 9
}

// sortedFor reports whether a container sorted on key yields the group's
// (partition, order) order: the partition columns, in any order and
// direction, then exactly the ORDER BY columns.
func sortedFor(key columnar.SortKey, g *windowGroup) bool {
	np := len(g.partition)
	if len(key) < np+len(g.order) {
		return false
	}
	for _, k := range g.partition {
		if k.expr.col < 0 {
			return false
		}
	}
	for _, o := range g.order {
		if o.expr.col < 0 {
			return false
		}
	}
	for i := 0; i < np; i++ {
		found := false
		for _, k := range g.partition {
			if k.expr.colName == key[i].Name {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	for i, o := range g.order {
		kc := key[np+i]
		if kc.Name != o.expr.colName || kc.Desc != o.desc || kc.NullsFirst != o.nullsFirst {
			return false
		}
	}
	return true
}

// rawBytes is the decoded bytes of columns cols of every container.
func rawBytes(cs []*columnar.Container, cols []int) int64 {
	var n int64
	for _, c := range cs {
		files := c.Manifest().Files
		for _, col := range cols {
			for _, b := range files[col].Blocks {
				n += b.RawBytes
			}
		}
	}
	return n
}

// loadContainers reads the used columns of every container into memory,
// a column per goroutine on up to threads goroutines, without the rows
// drop names; rows is how many rows that leaves. Blocks are taken from
// cache, and kept there, if it is not nil. The integer and float columns
// are lent by lease (nil: made fresh), which the input keeps.
func loadContainers(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, rows int64, budget *columnar.Budget, threads int, cache *columnar.BlockCache, lease *bufpool.Lease) (*input, error) {
	in := &input{cols: make([]*vector, len(p.usedCols)), n: int(rows), lease: lease}
	used := p.usedColumns()
	parallel := threads > 1 && rows >= int64(parallelMinRows)
	makers := 1
	if parallel {
		makers = threads
	}
	makeConcurrently(len(used), makers, func(i int) {
		c := used[i]
		in.cols[c] = newColumn(lease, p, c, int(rows))
		if p.strBytes != nil {
			in.cols[c].strExpect = p.strBytes[c] * rows
		}
		if p.strBytes != nil && drop == nil && p.returnsAsRead(c) {
			// The column's bytes in one buffer, so that the result uses
			// them as they are. Not otherwise: a buffer of the whole
			// column is cleared at once, out of the caches, where one of a
			// few blocks is written while it is in them.
			in.cols[c].strHint = int(p.strBytes[c] * rows)
		}
	})
	if err := in.reserve(budget); err != nil {
		return nil, err
	}
	// The reservation counted only what is allocated so far; count full size.
	budget.Release(in.reserved)
	in.reserved = 0
	for c, v := range in.cols {
		if v != nil {
			in.reserved += p.colBytes(c) * rows
		}
	}
	if err := budget.Reserve(in.reserved); err != nil {
		in.reserved = 0
		return nil, fmt.Errorf("windower: load %d input rows: %w", rows, err)
	}
	var err error
	switch {
	case len(used) == 0: // count(*) OVER () over no columns
	case parallel && len(used) < threads && budget.Available() >= int64(threads)*maxBlockBytes(cs, used):
		err = loadBlockRanges(ctx, p, cs, drop, in, used, threads, cache)
	case parallel && len(used) > 1:
		err = loadColumnsParallel(ctx, p, cs, drop, in, used, threads, cache)
	default:
		for i, c := range cs {
			if err = loadBlocks(ctx, p, c, drop.of(i), in, used, cache); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = in.reserve(budget)
	}
	if err == nil {
		in.noteOrigins(cs, drop, cache)
	}
	if err != nil {
		budget.Release(in.reserved) // a load cut short (a cancel, a bad block) holds nothing
		return nil, err
	}
	return in, nil
}

// loadBlocks appends the columns used of container c to in, without the
// rows of c in drop (nil: none).
func loadBlocks(ctx context.Context, p *plan, c *columnar.Container, drop *roaring.Bitmap, in *input, used []int, cache *columnar.BlockCache) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	br, err := c.OpenColumns(used)
	if err != nil {
		return fmt.Errorf("windower: read %s: %w", c.Dir(), err)
	}
	br.ReuseBuffers() // each block is copied into in and released before the next
	br.UseCache(cache)
	var first int64 // the container's row of the block's first
	var scratch vector
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			br.Close()
			return fmt.Errorf("windower: read %s: %w", c.Dir(), err)
		}
		keep := liveMask(drop, first, int(rec.NumRows()))
		first += rec.NumRows()
		for j, col := range used {
			if err := appendLive(in.cols[col], rec.Column(j), keep, &scratch); err != nil {
				rec.Release()
				br.Close()
				return fmt.Errorf("windower: read %s column %q: %w", c.Dir(), p.schema.schema.Field(col).Name, err)
			}
		}
		rec.Release()
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("windower: read %s: %w", c.Dir(), err)
	}
	return nil
}

// loadBlockRanges decodes the columns used on threads goroutines when
// there are fewer columns than threads: each column of each container is
// cut into ranges of about equal blocks, threads pieces in all at least,
// and each piece is decoded by one goroutine straight into its rows of the
// column (the column's storage is sized for every row first). It holds a
// block per goroutine, which the caller checked the budget has room for.
// The error is that of the first piece that failed, in row order. A
// piece's rows are its blocks' rows less those drop names: its place
// follows from the dropped rows before it, a rank in the bitmap.
func loadBlockRanges(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, in *input, used []int, threads int, cache *columnar.BlockCache) error {
	type piece struct {
		col, c     int
		b0, b1, at int // blocks [b0, b1) of container c hold rows [at, at+rows)
		rows       int
		nulls      []bool
		payload    int64
		err        error
	}
	per := (threads + len(used) - 1) / len(used) // ranges per column of a container
	var pieces []piece
	for _, col := range used {
		base := 0
		for ci, c := range cs {
			m := c.Manifest()
			nb := len(m.Blocks)
			for k := 0; k < per && nb > 0; k++ {
				b0, b1 := k*nb/per, (k+1)*nb/per
				if b0 == b1 {
					continue
				}
				rows := 0
				for _, b := range m.Blocks[b0:b1] {
					rows += b.Rows
				}
				first := m.Blocks[b0].FirstRow
				at := base + liveRows(drop.of(ci), 0, int(first))
				if rows = liveRows(drop.of(ci), first, rows); rows == 0 {
					continue
				}
				pieces = append(pieces, piece{col: col, c: ci, b0: b0, b1: b1, at: at, rows: rows})
			}
			base += liveRows(drop.of(ci), 0, int(m.Rows))
		}
	}
	for _, col := range used {
		v := in.cols[col]
		switch v.kind {
		case kindFloat:
			v.floats = v.floats[:in.n]
		case kindString:
			v.strs = v.strs[:in.n]
		default:
			v.ints = v.ints[:in.n]
		}
	}
	var next atomic.Int32
	parallelFor(min(threads, len(pieces)), func(int) {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(pieces) {
				return
			}
			pc := &pieces[k]
			pc.nulls, pc.payload, pc.err = loadPiece(ctx, p, cs[pc.c], drop.of(pc.c), in.cols[pc.col], pc.col, pc.b0, pc.b1, pc.at, pc.rows, cache)
		}
	})
	for i := range pieces {
		if pieces[i].err != nil {
			return pieces[i].err
		}
	}
	for i := range pieces {
		pc := &pieces[i]
		v := in.cols[pc.col]
		v.payload += pc.payload
		if pc.nulls != nil {
			if v.nulls == nil {
				v.nulls = make([]bool, in.n)
			}
			copy(v.nulls[pc.at:], pc.nulls)
		}
	}
	return nil
}

// loadPiece decodes blocks [b0, b1) of column col of container c,
// without the rows in drop (nil: none), into rows [at, at+rows) of v,
// whose storage already holds every row, and returns the piece's NULLs
// (nil: none) and string payload bytes.
func loadPiece(ctx context.Context, p *plan, c *columnar.Container, drop *roaring.Bitmap, v *vector, col, b0, b1, at, rows int, cache *columnar.BlockCache) ([]bool, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	name := p.schema.schema.Field(col).Name
	r, err := c.OpenColumn(col)
	if err != nil {
		return nil, 0, fmt.Errorf("windower: read %s column %q: %w", c.Dir(), name, err)
	}
	defer r.Close()
	r.ReuseBuffers() // each block is copied into v and released before the next
	r.UseCache(cache)
	// Appends to a window of v's storage, exactly as long as the piece,
	// write the rows in place.
	sub := &vector{kind: v.kind, typ: v.typ}
	switch v.kind {
	case kindFloat:
		sub.floats = v.floats[at : at : at+rows]
	case kindString:
		sub.strs = v.strs[at : at : at+rows]
		if p.strBytes != nil {
			sub.strExpect = p.strBytes[col] * int64(rows)
		}
	default:
		sub.ints = v.ints[at : at : at+rows]
	}
	blocks := c.Manifest().Blocks
	var scratch vector
	for b := b0; b < b1; b++ {
		arr, err := r.ReadBlock(b)
		if err != nil {
			return nil, 0, fmt.Errorf("windower: read %s column %q: %w", c.Dir(), name, err)
		}
		keep := liveMask(drop, blocks[b].FirstRow, arr.Len())
		if sub.len()+liveRows(drop, blocks[b].FirstRow, arr.Len()) > rows {
			arr.Release()
			return nil, 0, fmt.Errorf("windower: read %s column %q: block %d has more rows than the manifest gives", c.Dir(), name, b)
		}
		err = appendLive(sub, arr, keep, &scratch)
		arr.Release()
		if err != nil {
			return nil, 0, fmt.Errorf("windower: read %s column %q: %w", c.Dir(), name, err)
		}
	}
	if sub.len() != rows {
		return nil, 0, fmt.Errorf("windower: read %s column %q: blocks %d-%d hold %d rows, the manifest gives %d", c.Dir(), name, b0, b1-1, sub.len(), rows)
	}
	return sub.nulls, sub.payload, nil
}

// loadColumnsParallel decodes the columns used on up to threads
// goroutines, each column from every container in order by one of them.
// A column's reader holds one block at a time, as a reader of all the
// columns does: the memory in flight is the same. The error is that of
// the first column that failed.
func loadColumnsParallel(ctx context.Context, p *plan, cs []*columnar.Container, drop superseded, in *input, used []int, threads int, cache *columnar.BlockCache) error {
	errs := make([]error, len(used))
	var next atomic.Int32
	parallelFor(min(threads, len(used)), func(int) {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(used) {
				return
			}
			for i, c := range cs {
				if errs[k] = loadBlocks(ctx, p, c, drop.of(i), in, used[k:k+1], cache); errs[k] != nil {
					break
				}
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
