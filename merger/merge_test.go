package merger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func checkMerge(t *testing.T, dirs []string, opts Options) *Stats {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	st, err := Merge(context.Background(), dirs, out, opts)
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	got := readContainerRows(t, out)
	want := referenceMerge(t, dirs)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	if st.Rows != int64(len(want)) {
		t.Errorf("Stats.Rows = %d, want %d", st.Rows, len(want))
	}
	if st.PeakBytes > st.GrantBytes {
		t.Errorf("peak %d > grant %d (plan %s)", st.PeakBytes, st.GrantBytes, st.Plan)
	}
	if st.Plan != PlanPasses && st.BlocksDecompressed != st.BlocksTotal {
		t.Errorf("blocks decompressed %d, total %d", st.BlocksDecompressed, st.BlocksTotal)
	}
	if ents, _ := os.ReadDir(opts.TempDir); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
	return st
}

func TestMergeMatchesStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		k, maxRows, keyRange, blockRows int
		grant                           int64
		plan                            string
	}{
		{1, 100, 10, 16, 1 << 30, PlanHorizontal},
		{2, 300, 5, 7, 1 << 30, PlanHorizontal},
		{5, 500, 1000, 64, 1 << 30, PlanHorizontal},
		{16, 400, 3, 50, 1 << 30, PlanHorizontal},
		{64, 100, 50, 32, 1 << 30, PlanHorizontal},
	} {
		name := fmt.Sprintf("k=%d/rows=%d/keys=%d/block=%d/grant=%d", tc.k, tc.maxRows, tc.keyRange, tc.blockRows, tc.grant)
		t.Run(name, func(t *testing.T) {
			dirs := makeInputs(t, t.TempDir(), rng, tc.k, tc.maxRows, tc.keyRange, tc.blockRows)
			st := checkMerge(t, dirs, Options{Grant: tc.grant})
			if st.Plan != tc.plan {
				t.Errorf("plan %s, want %s", st.Plan, tc.plan)
			}
			t.Logf("%+v", *st)
		})
	}
}

// TestMergeWithinGrant is the memory-bound test: one set of inputs merged
// under ever smaller grants, down to the first the planner refuses, must give
// the reference output with the budget's peak never over the grant, going
// through every plan on the way.
func TestMergeWithinGrant(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct{ k, rows, blockRows int }{
		{12, 3000, 256},
		{33, 600, 64},
	} {
		t.Run(fmt.Sprintf("k=%d", tc.k), func(t *testing.T) {
			dirs := makeInputs(t, t.TempDir(), rng, tc.k, tc.rows, 200, tc.blockRows)
			plans := map[string]bool{}
			for grant := int64(4 << 20); ; grant = grant * 2 / 3 {
				out := filepath.Join(t.TempDir(), "out")
				_, err := Merge(context.Background(), dirs, out, Options{Grant: grant, TempDir: t.TempDir()})
				var ge *GrantError
				if errors.As(err, &ge) {
					if ge.Minimum <= grant || ge.Grant != grant {
						t.Errorf("grant error with minimum %d for grant %d", ge.Minimum, grant)
					}
					if _, serr := os.Stat(out); !os.IsNotExist(serr) {
						t.Errorf("output left after grant error")
					}
					t.Logf("grant %d: %v", grant, err)
					break
				}
				st := checkMerge(t, dirs, Options{Grant: grant})
				plans[st.Plan] = true
				t.Logf("grant %d: plan %s workers %d passes %d peak %d spilled %d", grant, st.Plan, st.Workers, st.Passes, st.PeakBytes, st.SpilledBytes)
			}
			for _, p := range []string{PlanHorizontal, PlanVertical, PlanPasses} {
				if !plans[p] {
					t.Errorf("no grant used plan %s", p)
				}
			}
		})
	}
}
