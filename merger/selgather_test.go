package merger

import (
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// arraySource replays arrays (the blocks of one input column).
type arraySource struct {
	blocks []arrow.Array
	i      int
}

func (s *arraySource) Next() (arrow.Array, error) {
	if s.i == len(s.blocks) {
		return nil, io.EOF
	}
	a := s.blocks[s.i]
	s.i++
	a.Retain()
	return a, nil
}

// TestGatherDriversAgree gathers every column type from random blocks with
// every driver (selection vectors row by row, selection vectors grouped by
// input and scattered, a shared selection vector scattered, and run
// batches) and compares the output with the rows picked one by one.
func TestGatherDriversAgree(t *testing.T) {
	defer func(v int) { scatterMinRowsPerInput = v }(scatterMinRowsPerInput)
	rng := rand.New(rand.NewPCG(51, 52))
	schema := testSchema()
	const k, blockRows, outRows = 6, 37, 50
	// Input i has blocks of random sizes (empty ones included).
	rows := make([]int, k)
	recs := make([][]arrow.RecordBatch, k)
	for i := range k {
		for range rng.IntN(5) {
			n := rng.IntN(blockRows)
			recs[i] = append(recs[i], randomRecord(rng, schema, n, 100, 0))
			rows[i] += n
		}
	}
	// A random row source using every row of every input.
	var runs []run
	left := append([]int(nil), rows...)
	for total := sum(rows); total > 0; {
		in := rng.IntN(k)
		if left[in] == 0 {
			continue
		}
		c := min(left[in], 1+rng.IntN(3))
		runs = append(runs, run{in, int64(c)})
		left[in] -= c
		total -= c
	}
	s := writeRuns(t, k, 1<<20, t.TempDir(), runs)
	defer s.Close()

	for c := range schema.NumFields() {
		field := schema.Field(c)
		// The expected column: rows in row-source order.
		var want []string
		next := make([]int, k) // row of input
		for _, r := range runs {
			for range r.count {
				want = append(want, cellAt(recs[r.input], c, next[r.input]))
				next[r.input]++
			}
		}
		var shared []uint16
		for _, r := range runs {
			for range r.count {
				shared = append(shared, uint16(r.input))
			}
		}
		for _, driver := range []string{"sel", "scatter-sel", "scatter-shared", "scatter-pieces", "runs"} {
			// Row by row: more rows per input than any block holds.
			scatterMinRowsPerInput = 1 << 20
			if strings.HasPrefix(driver, "scatter") {
				scatterMinRowsPerInput = 1
			}
			var got []string
			emit := func(_ int, a arrow.Array) error {
				for i := range a.Len() {
					got = append(got, cellStr(a, i))
				}
				return nil
			}
			srcs := make([]blockSource, k)
			for i := range k {
				var blocks []arrow.Array
				for _, r := range recs[i] {
					blocks = append(blocks, r.Column(c))
				}
				srcs[i] = &arraySource{blocks: blocks}
			}
			names := make([]string, k)
			g, err := newColumnGather(c, field.Name, field.Type, srcs, names, outRows, memory.DefaultAllocator, emit)
			if err != nil {
				t.Fatal(err)
			}
			rr, err := s.newReader(nil)
			if err != nil {
				t.Fatal(err)
			}
			switch driver {
			case "sel", "scatter-sel":
				err = gatherSel(t.Context(), []*columnGather{g}, rr, outRows, nopReserver{})
			case "scatter-shared":
				err = gatherShared(t.Context(), []*columnGather{g}, shared, outRows, nopReserver{})
			case "scatter-pieces":
				// Output blocks made of several pieces, some scattered,
				// some gathered row by row.
				groups, _ := newSelGroups(k, outRows, nopReserver{})
				for off := 0; off < len(shared) && err == nil; {
					n := min(outRows-g.outRows, 1+rng.IntN(outRows), len(shared)-off)
					var gr *selGroups
					if rng.IntN(3) > 0 {
						gr = groups.group(shared[off : off+n])
					}
					err = g.takeSelGrouped(shared[off:off+n], gr)
					off += n
				}
			default:
				err = gatherRuns(t.Context(), []*columnGather{g}, rr, nopReserver{})
			}
			if err == nil {
				err = g.finish()
			}
			if err != nil {
				t.Fatalf("%s %s: %v", field.Name, driver, err)
			}
			g.release()
			rr.close()
			if len(got) != len(want) {
				t.Fatalf("%s %s: %d rows, want %d", field.Name, driver, len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s %s row %d = %s, want %s", field.Name, driver, i, got[i], want[i])
				}
			}
		}
	}
}

func sum(v []int) (n int) {
	for _, x := range v {
		n += x
	}
	return n
}

func cellAt(recs []arrow.RecordBatch, col, row int) string {
	for _, r := range recs {
		if row < int(r.NumRows()) {
			return cellStr(r.Column(col), row)
		}
		row -= int(r.NumRows())
	}
	panic("row out of range")
}

func cellStr(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "∅"
	}
	// A copy: the array's buffers go back to the gather's recycler, and
	// are reused for its next block, once emit returns.
	return strings.Clone(a.ValueStr(i))
}

// TestMoveBytes moves values of every length up to past the word moves and
// checks that no byte beside the destination changes.
func TestMoveBytes(t *testing.T) {
	src := make([]byte, 80)
	for i := range src {
		src[i] = byte(i + 1)
	}
	for n := range 70 {
		buf := make([]byte, 100)
		for i := range buf {
			buf[i] = 0xee
		}
		moveBytes(buf[10:10+n], src[3:3+n])
		for i, b := range buf {
			want := byte(0xee)
			if i >= 10 && i < 10+n {
				want = src[3+i-10]
			}
			if b != want {
				t.Fatalf("n=%d: byte %d = %#x, want %#x", n, i, b, want)
			}
		}
	}
}
