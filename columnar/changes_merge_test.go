package columnar

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// The merge path of Superseded (containers sorted on a key led by the
// primary key) against the brute-force rule, for every key shape, with
// markers kept or dropped, and the choice of path by the budget.
func TestSupersededByMergeMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	for iter := range 36 {
		shape := keyShapes[iter%len(keyShapes)]
		n := 2 + rng.IntN(5)
		keys := 1 + rng.IntN(800)
		blockRows := []int{7, 64, 1000}[rng.IntN(3)]
		conts := randomKeyedContainers(rng, n, keys, iter%2 == 0)
		// Sorted on the key's columns (then v, a column of no key).
		sk := SortKey{}
		for _, c := range shape.pk {
			sk = append(sk, SortColumn{Name: c})
		}
		sk = append(sk, SortColumn{Name: "v"})
		for _, rows := range conts {
			slices.SortStableFunc(rows, func(a, b keyedRow) int {
				for _, c := range shape.pk {
					var d int
					if c == "id" {
						d = cmp.Compare(a.id, b.id)
					} else {
						d = cmp.Compare(a.name, b.name)
					}
					if d != 0 {
						return d
					}
				}
				return 0
			})
		}
		opts := ResolveOptions{}
		if rng.IntN(2) == 0 {
			opts.KeepMarkers, opts.DropMarkersThrough = true, rng.Int64N(int64(4*n))
		}
		t.Run(fmt.Sprintf("%d-%s-%dconts-%dkeys-block%d", iter, shape.label, n, keys, blockRows), func(t *testing.T) {
			dir := t.TempDir()
			cs := make([]*Container, n)
			var total int64
			for i, rows := range conts {
				cs[i] = writeKeyedSorted(t, filepath.Join(dir, fmt.Sprint(i)), shape.pk, sk, rows, blockRows)
				total += int64(len(rows))
			}
			want := bruteSuperseded(shape.pk, conts, opts)
			res := &Resolution{Dropped: make([]*roaring.Bitmap, n)}
			r := newResolver(cs, opts, res)
			if err := r.mergeRun(context.Background()); err != nil {
				t.Fatal(err)
			}
			var dropped int64
			for i := range cs {
				var got []uint32
				if b := res.Dropped[i]; b != nil {
					got = b.ToArray()
				}
				if !slices.Equal(got, want[i]) {
					t.Fatalf("container %d: dropped %v, want %v", i, got, want[i])
				}
				dropped += int64(len(want[i]))
			}
			if res.Live != total-dropped {
				t.Fatalf("live %d, want %d", res.Live, total-dropped)
			}
			// A budget too small for the hash path's key table takes
			// this path, with the same result.
			var outside int64
			for _, c := range cs {
				outside += c.Rows()
			}
			if outside > 100 {
				small := NewBudget(1<<10+outside, nil)
				if !mergeable(cs, ResolveOptions{Budget: small}) {
					t.Fatal("a small budget does not choose the merge path")
				}
			}
		})
	}
}
