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

// BenchmarkPrefetchColumnsCold prefetches one column of a container of
// 2M rows (a file of several 4MiB segments, as a windower's column is)
// into an empty depot, over an in-process S3 server with 10ms added to
// each request: what a cold window query waits for its column.
func BenchmarkPrefetchColumnsCold(b *testing.B) {
	const latency = 10 * time.Millisecond
	st := s3test.Start(b, "strata").Store(b)
	local := b.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 3, Containers: 1, RowsPerContainer: 2 << 20, BlockRows: 64 << 10, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	m := ms[0]
	if _, err := store.Upload(b.Context(), st, columnar.ContainerDir(local, "t", "p", m.ID), "t", "p", m.ID); err != nil {
		b.Fatal(err)
	}
	fm := m.Files[len(m.Files)-1]
	b.SetBytes(fm.Size)
	slow := roundTrip{Store: st, latency: latency}
	for b.Loop() {
		b.StopTimer()
		d, err := depot.Open(b.TempDir(), slow, depot.Options{})
		if err != nil {
			b.Fatal(err)
		}
		src, release, err := d.Acquire(b.Context(), "t", "p", m.ID)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		d.PrefetchColumns(b.Context(), src, []string{fm.Column})
		for d.Stats().FilesFetched < 1 {
			time.Sleep(100 * time.Microsecond)
		}
		b.StopTimer()
		release()
		d.Close()
		b.StartTimer()
	}
}
