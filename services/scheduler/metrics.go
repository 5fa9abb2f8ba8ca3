package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// labelled registers the scheduler's own metrics with the label
// service="scheduler", as the workers' metrics carry their service's name.
// (The rejecter and the consumer lag, from internal/service, set it
// themselves.)
func labelled(reg prometheus.Registerer) prometheus.Registerer {
	return prometheus.WrapRegistererWith(prometheus.Labels{"service": "scheduler"}, reg)
}

// lagEvery is how often the durable consumers' lag is read.
const lagEvery = 5 * time.Second

// durableConsumers are the consumers whose lag the scheduler exports: the
// work waiting for each kind of worker, and for itself.
var durableConsumers = []service.DurableConsumer{
	{Stream: messages.StreamJobs, Consumer: messages.ConsumerMerger},
	{Stream: messages.StreamJobs, Consumer: messages.ConsumerWindower},
	{Stream: messages.StreamUpdates, Consumer: messages.ConsumerWalwriter},
	{Stream: messages.StreamEvents, Consumer: messages.ConsumerScheduler},
}

// poolCollector exports the pools system table as gauges.
type poolCollector struct {
	s                                                     *scheduler.Scheduler
	inUse, borrowed, running, queued, memorySize, maxSize *prometheus.Desc
}

func newPoolCollector(s *scheduler.Scheduler) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("strata_pool_"+name, help, []string{"pool"}, nil)
	}
	return &poolCollector{s: s,
		inUse:      d("in_use_bytes", "Memory granted to running jobs."),
		borrowed:   d("borrowed_bytes", "Memory granted above the pool's memorysize."),
		running:    d("running_jobs", "Jobs holding a grant."),
		queued:     d("queued_jobs", "Jobs waiting for memory."),
		memorySize: d("memorysize_bytes", "The pool's memorysize."),
		maxSize:    d("maxmemorysize_bytes", "The pool's maxmemorysize."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inUse, c.borrowed, c.running, c.queued, c.memorySize, c.maxSize} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.s.Pools().Pools {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, p.Config.Name)
		}
		g(c.inUse, float64(p.InUse))
		g(c.borrowed, float64(p.Borrowed))
		g(c.running, float64(p.Running))
		g(c.queued, float64(p.Queued))
		g(c.memorySize, float64(p.Config.MemorySize))
		g(c.maxSize, float64(p.Config.MaxMemorySize))
	}
}
