package scheduler

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/strata-db/strata/messages"
)

// FuzzCatalogEntry feeds arbitrary bytes to the catalog and pool decoders
// as if a bucket held them: they must fail cleanly, and a state that
// decodes must drive selection and re-encode without panicking.
func FuzzCatalogEntry(f *testing.F) {
	st := ProjectionState{Table: "t", Projection: "p", NextSeq: 3, Live: refs("c", 3, 10),
		Pending: []PendingJob{{JobID: "mergeout.t.p.3", Seq: 3, Operation: "mergeout"}}, Readers: map[string]int{"c0000": 1}}
	good, _ := encodeEntry(&st)
	pool, _ := json.Marshal(DefaultPools()[0])
	f.Add(good)
	if v0, err := os.ReadFile("testdata/catalog_v0.json"); err == nil {
		var bucket map[string]json.RawMessage
		if json.Unmarshal(v0, &bucket) == nil {
			f.Add([]byte(bucket["t/p"]))
		}
	}
	f.Add(pool)
	f.Add([]byte(`{"table":"t","projection":"p","live":null}`))
	f.Add([]byte(`{"name":"x","memorysize":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		kv := NewMemKV()
		kv.Create(ctx, "t/p", data)
		kv.Create(ctx, "tm", data)
		if st, _, err := NewCatalog(kv).Get(ctx, "t", "p"); err == nil {
			SelectStrata(st.Live, st.readers(), StrataOptions{Capacity: 2})
			SelectAll(st.Live, st.readers(), StrataOptions{})
			st.named(nil)
			if _, err := encodeEntry(st); err != nil {
				t.Fatalf("decoded state does not encode: %v", err)
			}
		}
		if cfg, _, err := (poolStore{kv: kv}).get(ctx, "tm"); err == nil {
			if cfg.Validate() != nil || cfg.Target() <= 0 && cfg.MemorySize >= int64(cfg.PlannedConcurrency) {
				t.Fatalf("invalid pool accepted: %+v", cfg)
			}
			if _, err := NewAdmission([]messages.PoolConfig{cfg}, 10); err != nil {
				t.Fatalf("valid pool refused: %v", err)
			}
		}
	})
}

func BenchmarkAdmission(b *testing.B) {
	a, err := NewAdmission([]messages.PoolConfig{{Name: "p", MemorySize: 1 << 30, MaxMemorySize: 2 << 30, PlannedConcurrency: 8}}, 1000)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = "job" + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		id := ids[n%len(ids)]
		a.Acquire(Request{JobID: id, Pool: "p", Want: 200 << 20}, t0)
		if n%len(ids) == len(ids)-1 {
			for _, id := range ids {
				a.Release(id, 0, t0)
			}
		}
		n++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acquires/s")
}
