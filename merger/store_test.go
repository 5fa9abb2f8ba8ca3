package merger

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/internal/bytesize"
)

// Merging containers read from an S3 bucket by ranges gives the rows a
// merge of the same containers on disk gives, fetches every block once,
// and stays within the grant, in every plan (the grants below give
// passes, vertical and horizontal); through a depot, a second
// merge fetches nothing.
func TestMergeFromStore(t *testing.T) {
	st := s3test.Start(t, "strata").Store(t)
	rng := rand.New(rand.NewPCG(11, 12))
	dirs := makeInputs(t, t.TempDir(), rng, 6, 3000, 500, 256)
	var blocks int64
	var ids []string
	for _, d := range dirs {
		id := filepath.Base(d)
		m, err := store.Upload(t.Context(), st, d, "t", "p", id)
		if err != nil {
			t.Fatal(err)
		}
		blocks += int64(len(m.Files) * len(m.Blocks))
		ids = append(ids, id)
	}
	want := referenceMerge(t, dirs)
	merge := func(t *testing.T, srcs []columnar.Source, grant int64) *Stats {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		stats, err := MergeSources(context.Background(), srcs, out, Options{Grant: grant, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if got := readContainerRows(t, out); !slices.Equal(got, want) {
			t.Fatalf("%d rows differ from the reference's %d", len(got), len(want))
		}
		if stats.PeakBytes > grant {
			t.Errorf("peak %d over the grant %d", stats.PeakBytes, grant)
		}
		return stats
	}
	for _, grant := range []int64{260 << 10, 320 << 10, 256 << 20} {
		t.Run(bytesize.Format(grant), func(t *testing.T) {
			srcs := make([]columnar.Source, len(ids))
			for i, id := range ids {
				src, _, err := store.OpenSource(t.Context(), st, "t", "p", id)
				if err != nil {
					t.Fatal(err)
				}
				srcs[i] = src
			}
			stats := merge(t, srcs, grant)
			t.Logf("plan %s, %d passes, %d of %d blocks fetched, %d bytes, peak %d", stats.Plan, stats.Passes, stats.BlocksFetched, blocks, stats.BytesFetched, stats.PeakBytes)
			if stats.BlocksFetched != blocks {
				t.Errorf("plan %s fetched %d blocks of %d", stats.Plan, stats.BlocksFetched, blocks)
			}
		})
	}
	t.Run("depot", func(t *testing.T) {
		d, err := depot.Open(t.TempDir(), st, depot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		acquire := func() ([]columnar.Source, func()) {
			srcs := make([]columnar.Source, len(ids))
			var releases []func()
			for i, id := range ids {
				src, release, err := d.Acquire(t.Context(), "t", "p", id)
				if err != nil {
					t.Fatal(err)
				}
				srcs[i] = src
				releases = append(releases, release)
			}
			return srcs, func() {
				for _, r := range releases {
					r()
				}
			}
		}
		srcs, release := acquire()
		cold := merge(t, srcs, 4<<20)
		release()
		srcs, release = acquire()
		warm := merge(t, srcs, 4<<20)
		release()
		if cold.BlocksFetched != blocks || warm.BlocksFetched != 0 || warm.BytesFetched != 0 {
			t.Errorf("cold depot fetched %d blocks of %d, warm %d blocks %d bytes", cold.BlocksFetched, blocks, warm.BlocksFetched, warm.BytesFetched)
		}
	})
}
