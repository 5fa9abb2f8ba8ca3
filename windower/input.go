package windower

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/hugepage"
)

// The input buffer: the query's input columns in evaluation form, loaded
// from batches or filled block by block from containers.

// input is the query's input columns in evaluation form.
type input struct {
	cols     []*vector // by schema index; nil for unused columns
	n        int
	reserved int64
	// lease, if set, lent the columns' integer and float values, and lends
	// the evaluation's outputs; the Result of the evaluation ends it.
	lease *bufpool.Lease
	// origins says which string columns were loaded whole from containers
	// through a block cache (keydict.go).
	origins []columnOrigin
}

func loadRecords(p *plan, recs []arrow.RecordBatch, budget *columnar.Budget) (*input, error) {
	in := &input{cols: make([]*vector, len(p.usedCols))}
	for _, r := range recs {
		in.n += int(r.NumRows())
	}
	for c, used := range p.usedCols {
		if !used {
			continue
		}
		f := p.schema.schema.Field(c)
		v := newColumn(nil, p, c, in.n)
		for _, r := range recs {
			if !r.Schema().Field(c).Equal(f) && !arrow.TypeEqual(r.Schema().Field(c).Type, f.Type) {
				return nil, fmt.Errorf("windower: %w: input batch column %d is %s, schema says %s", columnar.ErrSchemaMismatch, c, r.Schema().Field(c).Type, f.Type)
			}
			if err := v.appendArrow(r.Column(c)); err != nil {
				return nil, fmt.Errorf("windower: column %q: %w", f.Name, err)
			}
		}
		in.cols[c] = v
	}
	return in, in.reserve(budget)
}

// bytes is the memory in's columns hold.
func (in *input) bytes() int64 {
	var n int64
	for _, v := range in.cols {
		if v != nil {
			n += v.bytes()
		}
	}
	return n
}

// reserve reserves what in's columns hold beyond in.reserved, what was
// reserved for them before they were loaded (none for records; for
// containers an estimate from the manifests, which strings longer than
// the average and the unused tails of string buffers pass).
func (in *input) reserve(b *columnar.Budget) error {
	n := in.bytes()
	if n <= in.reserved {
		return nil
	}
	if err := b.Reserve(n - in.reserved); err != nil {
		if in.reserved == 0 {
			return fmt.Errorf("windower: load %d input rows: %w", in.n, err)
		}
		return fmt.Errorf("windower: load %d input rows: they hold %d bytes, %d more than estimated: %w", in.n, n, n-in.reserved, err)
	}
	in.reserved = n
	return nil
}

// bufferRowBytes is what reserveBuffer reserves a row: the used columns'
// bytes in evaluation form.
func (p *plan) bufferRowBytes() int64 {
	var perRow int64
	for c, u := range p.usedCols {
		if u {
			perRow += p.colBytes(c)
		}
	}
	return perRow
}

// reserveBuffer reserves and makes a buffer of capacity rows.
func reserveBuffer(p *plan, capacity int, budget *columnar.Budget) (*input, int64, error) {
	n := p.bufferRowBytes() * int64(capacity)
	if err := budget.Reserve(n); err != nil {
		return nil, 0, fmt.Errorf("windower: buffer of %d rows: %w", capacity, err)
	}
	return newBuffer(p, p.usedColumns(), capacity), n, nil
}

// newBuffer makes a buffer of the given input columns with room for
// capacity rows.
func newBuffer(p *plan, cols []int, capacity int) *input {
	in := &input{cols: make([]*vector, len(p.usedCols))}
	for _, c := range cols {
		in.cols[c] = newColumn(nil, p, c, capacity)
	}
	return in
}

// newColumn makes an empty vector for input column c with room for
// capacity rows, its integer or float values lent by l (nil: fresh).
func newColumn(l *bufpool.Lease, p *plan, c, capacity int) *vector {
	v := &vector{kind: p.schema.kinds[c], typ: p.schema.schema.Field(c).Type}
	switch v.kind {
	case kindFloat:
		v.floats = bufpool.Make[float64](l, capacity)[:0]
	case kindString:
		v.strs = hugepage.Make[string](0, capacity)
	default:
		v.ints = bufpool.Make[int64](l, capacity)[:0]
	}
	return v
}

// usedColumns returns the input columns p uses.
func (p *plan) usedColumns() []int {
	var used []int
	for c, u := range p.usedCols {
		if u {
			used = append(used, c)
		}
	}
	return used
}

// appendRecord appends a batch whose columns are the used columns, in order.
func (in *input) appendRecord(rec arrow.RecordBatch, used []int) error {
	for j, c := range used {
		if err := in.cols[c].appendArrow(rec.Column(j)); err != nil {
			return err
		}
	}
	in.n += int(rec.NumRows())
	return nil
}

// reset empties the buffer, keeping its storage.
func (in *input) reset() { in.shift(in.n) }

// shift drops the first k rows, moving the rest to the front.
func (in *input) shift(k int) {
	for _, v := range in.cols {
		if v == nil {
			continue
		}
		switch v.kind {
		case kindFloat:
			v.floats = v.floats[:copy(v.floats, v.floats[k:])]
		case kindString:
			m := copy(v.strs, v.strs[k:])
			clear(v.strs[m:])
			v.strs = v.strs[:m]
		default:
			v.ints = v.ints[:copy(v.ints, v.ints[k:])]
		}
		if v.nulls != nil {
			v.nulls = v.nulls[:copy(v.nulls, v.nulls[k:])]
		}
	}
	in.n -= k
}

// compact keeps the rows where keep is true.
func (in *input) compact(keep []bool) {
	j := 0
	for i, k := range keep {
		if !k {
			continue
		}
		for _, v := range in.cols {
			if v == nil {
				continue
			}
			switch v.kind {
			case kindFloat:
				v.floats[j] = v.floats[i]
			case kindString:
				v.strs[j] = v.strs[i]
			default:
				v.ints[j] = v.ints[i]
			}
			if v.nulls != nil {
				v.nulls[j] = v.nulls[i]
			}
		}
		j++
	}
	for _, v := range in.cols {
		if v != nil {
			v.truncate(j)
		}
	}
	in.n = j
}

// compactTail keeps, of the rows from start on, those where keep is true.
func (in *input) compactTail(start int, keep []bool) {
	tail := in.view(start, in.n)
	tail.compact(keep)
	for _, v := range in.cols {
		if v != nil {
			v.truncate(start + tail.n)
		}
	}
	in.n = start + tail.n
}

// view returns rows [from, to) of the buffer without copying.
func (in *input) view(from, to int) *input {
	out := &input{cols: make([]*vector, len(in.cols)), n: to - from}
	for c, v := range in.cols {
		if v == nil {
			continue
		}
		out.cols[c] = v.slice(from, to)
	}
	return out
}
