package merger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// A merge in passes decides its fan-in once, over every input, and then
// plans each group of fan-in inputs (and the last level's intermediate
// containers) again as a single-level merge. These tests are the
// reproduction of "a group of 3 inputs planned as passes": the fan-in
// assumed a plan (one column a pass, one worker, the row source spilled)
// that the planner did not list when there were no more columns to gather
// than workers, and input costs that intermediate containers, written in
// the output's block size, exceed.

// TestPassesGroupsPlanOnce: whenever the planner picks passes, a group of
// its fan-in inputs, of the costs it assumed for a level, fits a
// single-level plan at the same grant, for every width and number of
// workers, narrow merges (fewer columns to gather than workers) included.
func TestPassesGroupsPlanOnce(t *testing.T) {
	passes := 0
	for _, width := range []int{1, 2, 3, 4, 5, 9, 17} {
		for _, workers := range []int{1, 2, 4, 8} {
			for _, k := range []int{3, 4, 8, 30} {
				in := syntheticInput(k, width, 20000, 1024)
				in.workers = workers
				for grant := int64(64 << 10); grant <= 1<<30; grant = grant * 21 / 20 {
					in.grant = grant
					p, err := makePlan(in)
					if err != nil || p.kind != PlanPasses {
						continue
					}
					passes++
					g := in
					g.inputs = p.fanIn
					g.columns = levelCosts(in.columns)
					g.rowSource = rowSourceEstimate(in.rows, p.fanIn)
					q, err := makePlan(g)
					if err != nil || q.kind == PlanPasses {
						t.Fatalf("width %d, workers %d, %d inputs, grant %d: passes of fan-in %d, but a group of %d inputs plans %s (%v)",
							width, workers, k, grant, p.fanIn, p.fanIn, q.kind, err)
					}
					if q.estimate > grant {
						t.Fatalf("width %d, workers %d, %d inputs, grant %d: a group's plan is estimated at %d", width, workers, k, grant, q.estimate)
					}
				}
			}
		}
	}
	if passes == 0 {
		t.Fatal("no grant planned passes")
	}
	t.Logf("%d passes plans checked", passes)
}

// narrowSchema is a key, a string column and a row number: fewer columns
// to gather than a merge of 4 workers has workers.
var narrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// narrowInput writes a sorted container of n rows of narrowSchema whose
// strings are up to width bytes, in blocks of blockRows rows.
func narrowInput(t *testing.T, dir string, rng *rand.Rand, n, width, blockRows int, seqBase int64) string {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, narrowSchema)
	defer b.Release()
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = rng.Int64N(int64(n/4 + 1))
	}
	for i := range keys {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	for i, k := range keys {
		b.Field(0).(*array.Int64Builder).Append(k)
		if rng.IntN(10) == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(width+1)))
		}
		b.Field(2).(*array.Int64Builder).Append(seqBase + int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	writeContainer(t, dir, rec, columnar.SortKey{{Name: "k"}}, blockRows)
	return dir
}

// clusteredInput writes a sorted container of n rows of narrowSchema
// sorted on (k, s), about perKey rows a key, whose strings are runs of one
// letter up to width bytes long: in the sort order their lengths grow
// with their values, so the long strings of a key lie together. Merged,
// a key's rows from many inputs fill blocks of long strings, larger than
// any block of the inputs (an input block spans keys, short strings and
// long).
func clusteredInput(t *testing.T, dir string, rng *rand.Rand, n, width, blockRows, perKey int, seqBase int64) string {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, narrowSchema)
	defer b.Release()
	type row struct {
		k int64
		s string
	}
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{rng.Int64N(int64(n/perKey + 1)), strings.Repeat("a", rng.IntN(width+1))}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.k != b.k {
			return cmp.Compare(a.k, b.k)
		}
		return strings.Compare(a.s, b.s)
	})
	for i, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.k)
		b.Field(1).(*array.StringBuilder).Append(r.s)
		b.Field(2).(*array.Int64Builder).Append(seqBase + int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	writeContainer(t, dir, rec, columnar.SortKey{{Name: "k"}, {Name: "s"}}, blockRows)
	return dir
}

// TestMergePassesNarrowAndUneven merges inputs in passes over a sweep of
// grants down to the first the planner refuses: every merge gives the
// stable sort of its inputs or a *GrantError before writing anything,
// never an internal error mid-merge. The inputs are narrow (on 4 workers,
// fewer columns to gather than workers) and uneven: the first input, whose
// block size the intermediate containers take, has big blocks of short
// strings, the others small blocks of long strings. In the clustered
// case (clusteredInput) the intermediate containers' blocks are larger
// than the inputs' (a windower's sorted runs on (g, s) met it: "a group
// of 6 inputs planned as passes"), so a later level must plan its fan-in
// over them.
func TestMergePassesNarrowAndUneven(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		name        string
		k           int
		rows        []int // rows, string width and block rows of the first input, then of the others
		parallelism int
		from        int64 // the first grant: above what a single-level plan needs
		perKey      int   // clusteredInput's rows a key; 0: narrowInput
	}{
		{"narrow", 9, []int{15000, 8, 256, 15000, 8, 256}, 4, 1 << 20, 0},
		{"uneven-blocks", 120, []int{4000, 4, 512, 300, 600, 32}, 4, 4 << 20, 0},
		{"clustered", 36, []int{1500, 600, 128, 1500, 600, 128}, 1, 3 << 20, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var dirs []string
			for i := range tc.k {
				r := tc.rows[3:]
				if i == 0 {
					r = tc.rows[:3]
				}
				dir := filepath.Join(root, fmt.Sprintf("in%02d", i))
				if tc.perKey > 0 {
					dirs = append(dirs, clusteredInput(t, dir, rng, r[0], r[1], r[2], tc.perKey, int64(i)*1e9))
				} else {
					dirs = append(dirs, narrowInput(t, dir, rng, r[0], r[1], r[2], int64(i)*1e9))
				}
			}
			var want []string
			passes := 0
			for grant := tc.from; ; grant = grant * 24 / 25 {
				out := filepath.Join(t.TempDir(), "out")
				tmp := t.TempDir()
				st, err := Merge(context.Background(), dirs, out, Options{Grant: grant, Parallelism: tc.parallelism, TempDir: tmp})
				var ge *GrantError
				if errors.As(err, &ge) {
					if _, serr := os.Stat(out); !os.IsNotExist(serr) {
						t.Errorf("grant %d: output left after grant error", grant)
					}
					t.Logf("grant %d: %v", grant, err)
					break
				}
				if err != nil {
					t.Fatalf("grant %d: %v", grant, err)
				}
				if st.PeakBytes > grant {
					t.Errorf("grant %d: plan %s: peak %d over the grant", grant, st.Plan, st.PeakBytes)
				}
				if st.Plan != PlanPasses {
					continue
				}
				passes++
				if want == nil {
					want = referenceMerge(t, dirs)
				}
				if got := readContainerRows(t, out); !slices.Equal(got, want) {
					t.Fatalf("grant %d: passes of %d levels: the output is not the stable sort of the inputs", grant, st.Passes)
				}
				if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
					t.Errorf("grant %d: temporary files left: %v", grant, ents)
				}
			}
			if passes == 0 {
				t.Error("no grant merged in passes")
			}
			t.Logf("%d grants merged in passes", passes)
		})
	}
}
