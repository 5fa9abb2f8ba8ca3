// Command windower is a window-query worker: it takes window jobs from the
// shared durable consumer on strata.jobs.window, one at a time and only when
// its --memory can hold the job's grant, evaluates the query over the job's
// input containers with package windower (sorting and spilling within the
// grant), writes the result as container Output of table ResultTable, and
// reports accepted, progress, done and failed events on strata.events.*.
//
// Usage:
//
//	windower [--nats URLS] [--data DIR] [--memory 512MiB] [--threads N] [--http :9103]
//	         [--block-cache 256MiB] [--vector-pool 128MiB]
//	         [--store s3://BUCKET/PREFIX?endpoint=URL --depot DIR --depot-size 20GiB]
//
// --threads is how many cores one job is evaluated on (default: all the
// process may use, GOMAXPROCS); the threads share the job's grant. With
// --store the inputs are fetched into the depot and the result uploaded to
// the store.
//
// --block-cache keeps up to that many bytes of decoded input blocks in
// memory, beside --memory, for the jobs that read the same tables again (a
// dashboard's queries): a job that runs in memory and reads at most half
// the cache takes the blocks the cache holds instead of reading and
// decompressing them (columnar.BlockCache). The default, 0, keeps none.
// Its counters are strata_block_cache_* on --http's /metrics.
//
// --vector-pool keeps up to that many bytes of the integer and float
// columns of finished jobs, beside --memory, and lends them to the next
// jobs that run in memory over as many rows (package bufpool): a worker
// that answers query after query over the same tables reuses that memory
// instead of clearing new buffers and collecting the old. The default,
// auto, is a quarter of --memory; 0 keeps none. Its counters are
// strata_vector_pool_*.
//
// Every flag has an environment variable: --memory is STRATA_MEMORY.
// --memory also sets the Go collector: it runs only as the process nears
// --memory, the block cache and the vector pool and half as much again,
// and after a job once the jobs since the last cycle allocated 16MiB
// (package heaplimit), unless GOGC or GOMEMLIMIT is set.
package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/engineerr"
	"github.com/strata-db/strata/internal/storeflags"
	"github.com/strata-db/strata/messages"
)

func main() { service.Main("windower", run) }

func run(args []string) error {
	w := service.NewWorker("windower", "127.0.0.1:9103", "512MiB")
	threads := w.Flags.Int("threads", 0, "cores one job is evaluated on, sharing its grant (default: GOMAXPROCS)")
	blockCache := w.Flags.String("block-cache", "0", "decoded input blocks kept in memory beside --memory, for jobs that read the same tables again (e.g. 256MiB; 0: none)")
	vectorPool := w.Flags.String("vector-pool", "auto", "column buffers of finished jobs kept in memory beside --memory, lent to the next jobs (e.g. 128MiB; auto: a quarter of --memory; 0: none)")
	sizes := func() (cache, pool int64, err error) {
		if cache, err = bytesize.Parse(*blockCache); err != nil || cache < 0 {
			return 0, 0, fmt.Errorf("--block-cache %q: want a size such as 256MiB, or 0 for none", *blockCache)
		}
		if *vectorPool == "auto" {
			return cache, w.Memory / 4, nil
		}
		if pool, err = bytesize.Parse(*vectorPool); err != nil || pool < 0 {
			return 0, 0, fmt.Errorf("--vector-pool %q: want a size such as 128MiB, auto for a quarter of --memory, or 0 for none", *vectorPool)
		}
		return cache, pool, nil
	}
	w.Beside = func() (int64, error) {
		cache, pool, err := sizes()
		return cache + pool, err
	}
	var sf storeflags.Flags
	sf.Register(w.Flags, true)
	if err := w.Start(args); err != nil {
		return err
	}
	if *threads < 0 {
		return fmt.Errorf("--threads %d: want a positive number of threads, or 0 for GOMAXPROCS", *threads)
	}
	dep, closeDepot, err := sf.OpenWorkerDepot(context.Background(), w.DataDir, w.Log, w.Runner.Registry(), w.Name)
	if err != nil {
		return err
	}
	defer closeDepot()
	superseded := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name:        "strata_table_superseded_fraction",
		Help:        "By table, the share of the rows the last window query over it read that newer changes replaced or deleted (folded away by the next mergeout; 0 for an append-only table).",
		ConstLabels: prometheus.Labels{"service": "windower"},
	}, []string{"table"})
	w.Runner.Registry().MustRegister(superseded)
	cacheBytes, poolBytes, _ := sizes() // checked by Start, through Beside
	cache := columnar.NewBlockCache(cacheBytes)
	if cache != nil {
		registerBlockCacheMetrics(w.Runner.Registry(), cache)
	}
	pool := bufpool.New(poolBytes)
	if pool != nil {
		registerVectorPoolMetrics(w.Runner.Registry(), pool)
	}
	wj := &windowJob{dataDir: w.DataDir, tempDir: w.TempDir, threads: *threads, log: w.Log, depot: dep, superseded: superseded, cache: cache, pool: pool}
	return service.RunJobs(w, service.JobSpec[*messages.WindowJob]{
		Operation: messages.OperationWindow,
		Consumer:  messages.ConsumerWindower,
		New:       func() *messages.WindowJob { return new(messages.WindowJob) },
		Run:       wj.run,
		Permanent: engineerr.Permanent,
	})
}

// registerBlockCacheMetrics exports the block cache's counters on reg.
func registerBlockCacheMetrics(reg prometheus.Registerer, c *columnar.BlockCache) {
	type stat = service.Stat[columnar.BlockCacheStats]
	service.RegisterStats(reg, "windower", c.Stats,
		stat{Name: "strata_block_cache_hits_total", Help: "Input blocks taken decoded from the block cache.", Of: func(s columnar.BlockCacheStats) int64 { return s.Hits }},
		stat{Name: "strata_block_cache_misses_total", Help: "Input blocks looked up in the block cache and read from their files.", Of: func(s columnar.BlockCacheStats) int64 { return s.Misses }},
		stat{Name: "strata_block_cache_evictions_total", Help: "Blocks (and string-key dictionaries) dropped from the block cache to make room.", Of: func(s columnar.BlockCacheStats) int64 { return s.Evictions }},
		stat{Name: "strata_block_cache_bytes", Help: "Decoded bytes (and string-key dictionaries) held in the block cache.", Gauge: true, Of: func(s columnar.BlockCacheStats) int64 { return s.Bytes }},
		stat{Name: "strata_block_cache_capacity_bytes", Help: "The block cache's capacity (--block-cache).", Gauge: true, Of: func(s columnar.BlockCacheStats) int64 { return s.Capacity }},
	)
}

// registerVectorPoolMetrics exports the vector pool's counters on reg.
func registerVectorPoolMetrics(reg prometheus.Registerer, p *bufpool.Pool) {
	type stat = service.Stat[bufpool.Stats]
	service.RegisterStats(reg, "windower", p.Stats,
		stat{Name: "strata_vector_pool_lent_total", Help: "Column buffers lent to jobs again from the vector pool.", Of: func(s bufpool.Stats) int64 { return s.Lent }},
		stat{Name: "strata_vector_pool_made_total", Help: "Column buffers made because the vector pool held none of the size.", Of: func(s bufpool.Stats) int64 { return s.Made }},
		stat{Name: "strata_vector_pool_dropped_total", Help: "Column buffers let go to keep the vector pool within its capacity.", Of: func(s bufpool.Stats) int64 { return s.Dropped }},
		stat{Name: "strata_vector_pool_bytes", Help: "Bytes of idle column buffers in the vector pool.", Gauge: true, Of: func(s bufpool.Stats) int64 { return s.Bytes }},
		stat{Name: "strata_vector_pool_capacity_bytes", Help: "The vector pool's capacity (--vector-pool).", Gauge: true, Of: func(s bufpool.Stats) int64 { return s.Capacity }},
	)
}
