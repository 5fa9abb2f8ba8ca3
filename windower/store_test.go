package windower

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/messages"
)

// A query over containers read from an S3 bucket by ranges gives the
// result it gives over the same containers on disk, in memory and
// spilling, fetches each block of the columns it reads once, and keeps
// within its grant.
func TestRunFromStore(t *testing.T) {
	st := s3test.Start(t, "strata").Store(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var dirs []string
	for i := range 3 {
		_, rec := randomTable(rng, 30000)
		dirs = append(dirs, writeContainer(t, filepath.Join(t.TempDir(), "c"+string(rune('0'+i))), rec, nil))
		rec.Release()
	}
	var blocksPerColumn int64
	for _, d := range dirs {
		m, err := store.Upload(t.Context(), st, d, "t", "p", filepath.Base(d))
		if err != nil {
			t.Fatal(err)
		}
		blocksPerColumn += int64(len(m.Blocks))
	}
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "fv", Window: &messages.WindowCall{Func: "first_value", Args: []*messages.Expr{col("s")},
			PartitionBy: []messages.Expr{{Op: "%", Args: []*messages.Expr{col("id"), cint(50)}}},
			OrderBy:     []messages.SortItem{{Expr: messages.Expr{Column: "f"}, NullsFirst: true}}}},
		{Alias: "lag", Window: &messages.WindowCall{Func: "lag", Args: []*messages.Expr{col("s"), cint(3)}, OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}, Desc: true}}}},
	}}
	const columnsRead = 3 // id, s, f
	for _, grant := range []int64{MinGrant, 256 << 20} {
		want := func() []string {
			res, err := Run(context.Background(), q, dirs, Options{Grant: grant, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			return drain(t, res)
		}()
		srcs := make([]columnar.Source, len(dirs))
		for i, d := range dirs {
			var err error
			if srcs[i], _, err = store.OpenSource(t.Context(), st, "t", "p", filepath.Base(d)); err != nil {
				t.Fatal(err)
			}
		}
		res, err := RunSources(context.Background(), q, srcs, Options{Grant: grant, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, res)
		stats := res.Stats()
		res.Close()
		if !slices.Equal(got, want) {
			t.Errorf("grant %d: %d rows from the store differ from the %d on disk", grant, len(got), len(want))
		}
		if stats.BlocksFetched != columnsRead*blocksPerColumn {
			t.Errorf("grant %d: fetched %d blocks, want %d (each block of the %d columns read once)", grant, stats.BlocksFetched, columnsRead*blocksPerColumn, columnsRead)
		}
		if stats.PeakBytes > grant {
			t.Errorf("grant %d: peak %d", grant, stats.PeakBytes)
		}
		t.Logf("grant %d: spilled %d, peak %d, fetched %d blocks %d bytes", grant, stats.SpilledBytes, stats.PeakBytes, stats.BlocksFetched, stats.BytesFetched)
	}
}
