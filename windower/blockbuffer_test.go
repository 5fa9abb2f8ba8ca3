package windower

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// TestBlockBufferGathersPieces: pieces of every size (empty, one row,
// more than a block), cut from arrays that are themselves slices, with and
// without NULLs, go through a block buffer as writeColumn passes them:
// the blocks it makes hold every row in order, NULLs and values alike,
// and its memory goes back to the budget.
func TestBlockBufferGathersPieces(t *testing.T) {
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Int32,
		arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Boolean,
		arrow.BinaryTypes.String, arrow.BinaryTypes.Binary,
	}
	for _, typ := range types {
		for _, blockRows := range []int{1, 7, 64, 1000} {
			t.Run(fmt.Sprintf("%s/%d", typ, blockRows), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(blockRows), 3))
				budget := columnar.NewBudget(0, nil)
				bb, err := newBlockBuffer(typ, blockRows, 3, budget)
				if err != nil {
					t.Fatal(err)
				}
				var want, got []string
				for range 60 {
					n := rng.IntN(3 * blockRows)
					if rng.IntN(8) == 0 {
						n = 0
					}
					arr, rows := randomSlice(t, typ, n, rng)
					want = append(want, rows...)
					// writeColumn's loop: fill the buffer, then whole
					// blocks straight from the piece, then the rest.
					off := 0
					if bb.rows > 0 {
						off = min(bb.room(), n)
						bb.append(arr, 0, off)
						if !bb.full() {
							arr.Release()
							continue
						}
						got = append(got, blockRowsOf(t, bb.array(), blockRows)...)
						bb.reset()
					}
					for ; n-off >= blockRows; off += blockRows {
						got = append(got, render(array.NewSlice(arr, int64(off), int64(off+blockRows)))...)
					}
					bb.append(arr, off, n)
					arr.Release()
				}
				if bb.rows > 0 {
					last := bb.array()
					got = append(got, render(last)...)
				}
				if len(got) != len(want) {
					t.Fatalf("blocks hold %d rows, want %d", len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("row %d of %d: blocks hold %q, want %q", i, len(want), got[i], want[i])
					}
				}
				bb.free()
				if budget.InUse() != 0 {
					t.Errorf("%d bytes still counted after free", budget.InUse())
				}
			})
		}
	}
}

// blockRowsOf renders a full block, checking it has rows rows.
func blockRowsOf(t *testing.T, arr arrow.Array, rows int) []string {
	t.Helper()
	if arr.Len() != rows {
		t.Fatalf("a full block has %d rows, want %d", arr.Len(), rows)
	}
	return render(arr)
}

// render releases arr and returns its rows as text (textOf).
func render(arr arrow.Array) []string {
	defer arr.Release()
	return textOf(arr)
}

// textOf returns arr's rows as text ("null" for NULL), copied: a string
// array's values are views of its buffer.
func textOf(arr arrow.Array) []string {
	out := make([]string, arr.Len())
	for i := range out {
		out[i] = strings.Clone(arr.ValueStr(i))
		if arr.IsNull(i) {
			out[i] = "null"
		}
	}
	return out
}

// randomSlice returns n rows of typ as a slice (at a random offset) of a
// larger array, a third of its arrays with NULLs, strings of 0 to 40
// bytes, and the rows as render gives them.
func randomSlice(t *testing.T, typ arrow.DataType, n int, rng *rand.Rand) (arrow.Array, []string) {
	t.Helper()
	lead, trail := rng.IntN(5), rng.IntN(5)
	nulls := rng.IntN(3) == 0
	b := array.NewBuilder(memory.DefaultAllocator, typ)
	defer b.Release()
	for range lead + n + trail {
		if nulls && rng.IntN(4) == 0 {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.Int64Builder:
			bb.Append(rng.Int64())
		case *array.Int32Builder:
			bb.Append(rng.Int32())
		case *array.Float64Builder:
			bb.Append(rng.NormFloat64())
		case *array.Date32Builder:
			bb.Append(arrow.Date32(rng.IntN(40000)))
		case *array.BooleanBuilder:
			bb.Append(rng.IntN(2) == 0)
		case *array.StringBuilder:
			bb.Append(strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(41)))
		case *array.BinaryBuilder:
			bb.Append([]byte(strings.Repeat("z", rng.IntN(41))))
		default:
			t.Fatalf("no builder for %s", typ)
		}
	}
	whole := b.NewArray()
	defer whole.Release()
	arr := array.NewSlice(whole, int64(lead), int64(lead+n))
	return arr, textOf(arr)
}

// TestBlockBufferRefusesOtherTypes: a type a container does not hold is
// an error, not a panic.
func TestBlockBufferRefusesOtherTypes(t *testing.T) {
	for _, typ := range []arrow.DataType{arrow.ListOf(arrow.PrimitiveTypes.Int64), arrow.BinaryTypes.LargeString} {
		if _, err := newBlockBuffer(typ, 8, 0, memory.DefaultAllocator); err == nil {
			t.Errorf("%s: no error", typ)
		}
	}
}

// TestBlockBufferStringsAsPlanned: a string block's bytes are first made
// as many as its rows are planned to hold, and grow a quarter beyond what
// they need. A first piece of one long string used to size the whole
// block at that string's length on every row: with many buckets, their
// buffers held three times what the grant had planned for them.
func TestBlockBufferStringsAsPlanned(t *testing.T) {
	budget := columnar.NewBudget(0, nil)
	const blockRows, planned = 1000, 20
	bb, err := newBlockBuffer(arrow.BinaryTypes.String, blockRows, planned, budget)
	if err != nil {
		t.Fatal(err)
	}
	defer bb.free()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.Append(strings.Repeat("x", 50000))
	for range 99 {
		b.Append("short")
	}
	arr := b.NewArray()
	defer arr.Release()
	bb.append(arr, 0, 1)
	// Offsets and validity, and the long string's bytes as they grew to
	// take it (past the planned 20000): not 50000 bytes on each of the
	// 1000 rows.
	if held, most := budget.InUse(), int64(4*(blockRows+1)+blockRows/8+50000*5/4+3*64); held > most {
		t.Fatalf("one 50000-byte string in a block of %d rows planned at %d bytes each: %d bytes held, want at most %d", blockRows, planned, held, most)
	}
	bb.append(arr, 1, 100)
	if got := render(bb.array()); len(got) != 100 || got[0] != strings.Repeat("x", 50000) || got[99] != "short" {
		t.Fatalf("the block holds %d rows, want the 100 appended", len(got))
	}
}
