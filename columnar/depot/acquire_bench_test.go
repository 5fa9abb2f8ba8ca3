package depot_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// roundTrip makes every request of a store wait latency first, as a
// bucket across a network does.
type roundTrip struct {
	store.Store
	latency time.Duration
}

func (r roundTrip) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	time.Sleep(r.latency)
	return r.Store.NewRangeReader(ctx, key, off, n)
}

func (r roundTrip) Stat(ctx context.Context, key string) (store.Object, error) {
	time.Sleep(r.latency)
	return r.Store.Stat(ctx, key)
}

// BenchmarkAcquireAllCold acquires a mergeout's 32 inputs into an empty
// depot (AcquireAll, 8 at a time), over an in-process S3 server with 10ms
// added to each request, as a bucket across a network: what a cold job
// waits before its first read.
func BenchmarkAcquireAllCold(b *testing.B) {
	const inputs, latency = 32, 10 * time.Millisecond
	for _, columns := range []int{100, 400} {
		b.Run(fmt.Sprintf("columns=%d", columns), func(b *testing.B) {
			st := s3test.Start(b, "strata").Store(b)
			local := b.TempDir()
			ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: columns, Containers: inputs, RowsPerContainer: 2048, BlockRows: 1024, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			refs := make([]depot.Ref, len(ms))
			for i, m := range ms {
				if _, err := store.Upload(b.Context(), st, columnar.ContainerDir(local, "t", "p", m.ID), "t", "p", m.ID); err != nil {
					b.Fatal(err)
				}
				refs[i] = depot.Ref{Table: "t", Projection: "p", ID: m.ID}
			}
			slow := roundTrip{Store: st, latency: latency}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				d, err := depot.Open(b.TempDir(), slow, depot.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				_, release, err := d.AcquireAll(b.Context(), refs)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				release()
				d.Close()
				b.StartTimer()
			}
		})
	}
}
