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
// both drivers (selection vectors and run batches) and compares the output
// with the rows picked one by one.
func TestGatherDriversAgree(t *testing.T) {
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
		for _, driver := range []string{"sel", "runs"} {
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
			if driver == "sel" {
				err = gatherSel(t.Context(), []*columnGather{g}, rr, outRows, nopReserver{})
			} else {
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
