package merger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/columnar"
)

// syntheticInput is a planner input of width columns (the first the key)
// cycling through the decoded sizes of int64, utf8, bool and int32 blocks.
func syntheticInput(k, width int, rowsPerInput, blockRows int64) planInput {
	perRow := []int64{8, 20, 1, 4}
	cols := make([]columnCost, width)
	for c := range cols {
		pr := perRow[c%len(perRow)]
		block := pr*blockRows + 1024
		cols[c] = columnCost{
			name:  fmt.Sprintf("c%d", c),
			key:   c == 0,
			read:  2 * pr * blockRows,
			block: block,
			out:   2*block + block/8 + 2*blockRows,
			raw:   pr * rowsPerInput * int64(k),
		}
		if c == 0 {
			cols[c].keyBytes = (pr + 20) * blockRows
		}
	}
	rows := rowsPerInput * int64(k)
	return planInput{inputs: k, columns: cols, workers: 2, rowSource: rowSourceEstimate(rows, k), rows: rows}
}

// TestPlanMoreGrantNeverPredictsSlower sweeps the grant from below the
// minimum to far above what everything needs: a larger grant must never
// pick a plan the cost model predicts slower, nor go back to passes, and
// every plan must fit its grant.
func TestPlanMoreGrantNeverPredictsSlower(t *testing.T) {
	for _, tc := range []struct {
		k, width        int
		rows, blockRows int64
		workers         int
	}{
		{32, 100, 16384, 8192, 2},
		{32, 400, 16384, 8192, 2},
		{4, 10, 1000, 256, 2},
		{200, 50, 4096, 1024, 8},
		{12, 17, 3000, 256, 1},
	} {
		t.Run(fmt.Sprintf("k=%d/width=%d/workers=%d", tc.k, tc.width, tc.workers), func(t *testing.T) {
			in := syntheticInput(tc.k, tc.width, tc.rows, tc.blockRows)
			in.workers = tc.workers
			last := -1.0 // seconds of the last single-level plan
			kinds := map[string]bool{}
			for grant := int64(64 << 10); grant <= 64<<30; grant = grant * 5 / 4 {
				in.grant = grant
				p, err := makePlan(in)
				if err != nil {
					if last >= 0 {
						t.Fatalf("grant %d: %v after a plan fitted a smaller grant", grant, err)
					}
					continue
				}
				kinds[p.kind] = true
				if p.estimate > grant {
					t.Fatalf("grant %d: plan %s estimated at %d", grant, p.kind, p.estimate)
				}
				if p.kind == PlanPasses {
					if last >= 0 {
						t.Fatalf("grant %d: passes after a single-level plan fitted a smaller grant", grant)
					}
					continue
				}
				if last >= 0 && p.seconds > last {
					t.Fatalf("grant %d: plan %s (%d groups, %d workers) predicted %.6fs, a smaller grant's %.6fs",
						grant, p.kind, len(p.groups), p.workers, p.seconds, last)
				}
				last = p.seconds
			}
			if last < 0 {
				t.Fatal("no grant fitted a single-level plan")
			}
			t.Logf("plans: %v", kinds)
		})
	}
}

// TestPlanPrefersVerticalForWideMerges: with everything fitting, a wide
// merge's horizontal plan spills its decoded blocks out of cache, and the
// planner must not pick it; a small one fits in cache and takes it.
func TestPlanPrefersVerticalForWideMerges(t *testing.T) {
	in := syntheticInput(32, 200, 16384, 8192)
	in.grant = 64 << 30
	p, err := makePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.kind != PlanVertical {
		t.Errorf("200 columns of 32 inputs: plan %s, want vertical", p.kind)
	}
	small := syntheticInput(4, 10, 1000, 256)
	small.grant = 64 << 30
	if p, err = makePlan(small); err != nil {
		t.Fatal(err)
	}
	if p.kind != PlanHorizontal {
		t.Errorf("10 columns of 4 small inputs: plan %s, want horizontal", p.kind)
	}
}

// TestEstimateBoundsPeak: the planner's estimate is never below the merge's
// measured peak (the grant is kept by the estimate), and not above it by
// more than 30%, for every plan a grant sweep goes through.
func TestEstimateBoundsPeak(t *testing.T) {
	plans := map[string]bool{}
	for _, tc := range []struct {
		columns, containers, rows, blockRows int
		grants                               []int64
	}{
		{40, 16, 8192, 4096, []int64{64 << 20, 8 << 20, 6 << 20}},
		{12, 4, 16384, 4096, []int64{64 << 20, 4 << 20}},
	} {
		root := t.TempDir()
		mans, err := columnar.Generate(root, columnar.GenOptions{
			Table: "t", Projection: "p", Columns: tc.columns, Containers: tc.containers, RowsPerContainer: tc.rows,
			Seed: 3, BlockRows: tc.blockRows, Compression: columnar.CompressionLZ4,
		})
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, m := range mans {
			dirs = append(dirs, columnar.ContainerDir(root, m.Table, m.Projection, m.ID))
		}
		for _, grant := range tc.grants {
			for _, par := range []int{1, 2} {
				out := filepath.Join(t.TempDir(), "out")
				st, err := Merge(context.Background(), dirs, out, Options{Grant: grant, TempDir: t.TempDir(), Parallelism: par})
				if err != nil {
					t.Fatalf("grant %d: %v", grant, err)
				}
				plans[st.Plan] = true
				ratio := float64(st.EstimatedBytes) / float64(st.PeakBytes)
				t.Logf("%d columns, grant %d, parallelism %d: plan %s workers %d peak %d estimate %d (%.2fx)",
					tc.columns, grant, par, st.Plan, st.Workers, st.PeakBytes, st.EstimatedBytes, ratio)
				// One worker's peak is the same on every run, so the
				// estimate must be within 1.3x of it. With two, the peak
				// depends on how their gathers overlap in time, which the
				// scheduler decides (on a busy machine they may not overlap
				// at all): the estimate must bound it.
				if st.PeakBytes > st.EstimatedBytes || (st.Workers == 1 && ratio > 1.3) {
					t.Errorf("%d columns, grant %d, parallelism %d: plan %s: estimate %d, peak %d (%.2fx)",
						tc.columns, grant, par, st.Plan, st.EstimatedBytes, st.PeakBytes, ratio)
				}
			}
		}
	}
	if !plans[PlanVertical] || !plans[PlanHorizontal] {
		t.Errorf("plans %v: want both horizontal and vertical", plans)
	}
}

// BenchmarkMakePlan measures the planner on a wide merge for many workers.
func BenchmarkMakePlan(b *testing.B) {
	in := syntheticInput(64, 2000, 16384, 8192)
	in.workers = 64
	in.grant = 8 << 30
	for b.Loop() {
		if _, err := makePlan(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBalancedLeavesNoGroupEmpty: columns of no bytes (inputs without
// rows) are dealt one to a group all the same; an empty group would have
// a gather worker index its first column.
func TestBalancedLeavesNoGroupEmpty(t *testing.T) {
	costs := make([]columnCost, 5)
	for n := 1; n <= 5; n++ {
		groups := balanced([]int{0, 1, 2, 3, 4}, n, costs)
		if len(groups) != n {
			t.Fatalf("n %d: %d groups", n, len(groups))
		}
		for i, g := range groups {
			if len(g) == 0 {
				t.Fatalf("n %d: group %d is empty: %v", n, i, groups)
			}
		}
	}
}

// TestBalancedCutsConsecutiveColumns: every cut is the columns in schema
// order, in exactly n non-empty groups, and its largest group is the least
// any cut into n groups of consecutive columns has (found here by trying
// every cut), on costs with zeros, equal costs and one huge column.
func TestBalancedCutsConsecutiveColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 400 {
		width := 1 + rng.IntN(9)
		costs := make([]columnCost, width+2) // two columns not in cols
		for c := range costs {
			switch trial % 4 {
			case 0:
				costs[c].raw = rng.Int64N(100)
			case 1:
				costs[c].raw = rng.Int64N(3) // many zeros and ties
			case 2:
				costs[c].raw = 10
			default:
				costs[c].raw = 1 + rng.Int64N(5)
				if c == rng.IntN(len(costs)) {
					costs[c].raw = 1000
				}
			}
		}
		cols := make([]int, 0, width)
		for c := range width + 2 {
			if c != 0 && c != width/2+1 { // leave gaps, as the key columns do
				cols = append(cols, c)
			}
		}
		for n := 1; n <= len(cols)+1; n++ {
			groups := balanced(cols, n, costs)
			if want := min(n, len(cols)); len(groups) != want {
				t.Fatalf("trial %d, n %d: %d groups, want %d: %v", trial, n, len(groups), want, groups)
			}
			var flat []int
			var largest int64
			for _, g := range groups {
				if len(g) == 0 {
					t.Fatalf("trial %d, n %d: an empty group: %v", trial, n, groups)
				}
				flat = append(flat, g...)
				largest = max(largest, groupBytes(g, costs))
			}
			if !slices.Equal(flat, cols) {
				t.Fatalf("trial %d, n %d: groups %v are not cols %v in order", trial, n, groups, cols)
			}
			if best := leastLargestGroup(cols, min(n, len(cols)), costs); largest != best {
				t.Fatalf("trial %d, n %d: largest group %d bytes, the best cut's %d: %v (costs %v)", trial, n, largest, best, groups, costs)
			}
		}
	}
}

func groupBytes(g []int, costs []columnCost) int64 {
	var b int64
	for _, c := range g {
		b += costs[c].raw
	}
	return b
}

// leastLargestGroup tries every cut of cols into n groups of consecutive
// columns and returns the least bytes of a largest group.
func leastLargestGroup(cols []int, n int, costs []columnCost) int64 {
	if n == 1 {
		return groupBytes(cols, costs)
	}
	best := int64(-1)
	for first := 1; first <= len(cols)-(n-1); first++ {
		largest := max(groupBytes(cols[:first], costs), leastLargestGroup(cols[first:], n-1, costs))
		if best < 0 || largest < best {
			best = largest
		}
	}
	return best
}

// TestPlanGathersInSchemaOrder: every plan's groups, one after another,
// are the non-key columns in schema order, which is the order a depot
// prefetches a container's column files in.
func TestPlanGathersInSchemaOrder(t *testing.T) {
	in := syntheticInput(32, 400, 8192, 8192)
	checked := 0
	for _, grant := range []int64{8 << 20, 32 << 20, 256 << 20, 8 << 30} {
		in.grant = grant
		p, err := makePlan(in)
		if err != nil {
			t.Fatalf("grant %d: %v", grant, err)
		}
		if p.kind == PlanPasses {
			continue // each level plans its own merges
		}
		var flat []int
		for _, g := range p.groups {
			flat = append(flat, g...)
		}
		if len(flat) != 399 || !slices.IsSorted(flat) {
			t.Fatalf("grant %d: the %d groups gather %v", grant, len(p.groups), flat)
		}
		checked++
	}
	if checked < 3 {
		t.Fatalf("%d plans of one level, want 3", checked)
	}
}
