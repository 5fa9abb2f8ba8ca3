package walbench

import (
	"context"
	"testing"

	"github.com/strata-db/strata/walwriter"
)

func TestRunSmall(t *testing.T) {
	for _, wl := range Workloads {
		t.Run(wl, func(t *testing.T) {
			res, err := Run(context.Background(), Config{Dir: t.TempDir(), Workload: wl, Updates: 3000, Keys: 500, Producers: 8, InFlight: 16, SyncUpdates: 50})
			if err != nil {
				t.Fatal(err)
			}
			if res.BytesPerUpdate <= 0 || res.BytesPerUpdate > res.FullImageBytesPerUpdate*1.02 {
				t.Errorf("%s: %.1f bytes per update against a %.1f-byte full image", wl, res.BytesPerUpdate, res.FullImageBytesPerUpdate)
			}
			if wl == "one_int" && res.BytesPerUpdate > 40 {
				t.Errorf("one int column: %.1f bytes per update, want <= 40", res.BytesPerUpdate)
			}
		})
	}
}

func BenchmarkWAL(b *testing.B) {
	for _, wl := range Workloads {
		b.Run(wl, func(b *testing.B) {
			res, err := Run(context.Background(), Config{Dir: b.TempDir(), Workload: wl, Updates: max(b.N, 1000), Keys: 10000, Producers: 64, InFlight: 64, Options: walwriter.Options{}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.BytesPerUpdate, "bytes/update")
			b.ReportMetric(res.FullImageBytesPerUpdate, "fullimage-bytes/update")
			b.ReportMetric(res.UpdatesPerS, "updates/s")
			b.ReportMetric(res.RecordsPerFsync, "records/fsync")
		})
	}
}
