package service

import "github.com/prometheus/client_golang/prometheus"

// Stat is one figure of a component's stats (a depot's, a block cache's)
// exported as a counter, or as a gauge when Gauge is set.
type Stat[S any] struct {
	Name, Help string
	Gauge      bool
	Of         func(S) int64
}

// RegisterStats registers each of stats on reg, labelled with service;
// each reads snapshot() when scraped.
func RegisterStats[S any](reg prometheus.Registerer, service string, snapshot func() S, stats ...Stat[S]) {
	labels := prometheus.Labels{"service": service}
	for _, st := range stats {
		value := func() float64 { return float64(st.Of(snapshot())) }
		if st.Gauge {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: st.Name, Help: st.Help, ConstLabels: labels}, value))
		} else {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: st.Name, Help: st.Help, ConstLabels: labels}, value))
		}
	}
}
