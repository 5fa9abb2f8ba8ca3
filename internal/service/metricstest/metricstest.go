// Package metricstest checks a service's Prometheus registry in tests:
// that the metrics an operator relies on exist with their types and the
// service label, that they pass promlint (the Prometheus naming
// conventions: base units in the name, _total on counters), and what
// value a series has.
package metricstest

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// Families gathers g, failing the test on an error, by name.
func Families(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// Check gathers g and fails the test unless every metric of want exists
// with its type, every strata_ metric carries the label service=service,
// and promlint finds nothing wrong with the strata_ metrics. It returns
// the families.
func Check(t testing.TB, g prometheus.Gatherer, service string, want map[string]dto.MetricType) map[string]*dto.MetricFamily {
	t.Helper()
	fams := Families(t, g)
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		mf, ok := fams[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if mf.GetType() != want[name] {
			t.Errorf("metric %s is a %v; want a %v", name, mf.GetType(), want[name])
		}
	}
	var ours []*dto.MetricFamily
	for name, mf := range fams {
		if !strings.HasPrefix(name, "strata_") {
			continue
		}
		ours = append(ours, mf)
		for _, m := range mf.GetMetric() {
			if label(m, "service") != service {
				t.Errorf("metric %s%s: want the label service=%q", name, labels(m), service)
			}
		}
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	return fams
}

// Value is the sum of the values of the series of metric name whose labels
// include every name=value pair of match (given as "name", "value", ...):
// a counter's or gauge's value, a histogram's sample count.
func Value(fams map[string]*dto.MetricFamily, name string, match ...string) float64 {
	mf, ok := fams[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			ok = ok && label(m, match[i]) == match[i+1]
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// Series is how many series metric name has.
func Series(fams map[string]*dto.MetricFamily, name string) int {
	if mf, ok := fams[name]; ok {
		return len(mf.GetMetric())
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// JobWorkerMetrics are the metrics every job worker (merger, windower)
// exports, with their types.
var JobWorkerMetrics = map[string]dto.MetricType{
	"strata_jobs_total":              dto.MetricType_COUNTER,
	"strata_jobs_running":            dto.MetricType_GAUGE,
	"strata_jobs_deferred_total":     dto.MetricType_COUNTER,
	"strata_job_duration_seconds":    dto.MetricType_HISTOGRAM,
	"strata_job_peak_bytes":          dto.MetricType_GAUGE,
	"strata_job_panics_total":        dto.MetricType_COUNTER,
	"strata_job_rows_total":          dto.MetricType_COUNTER,
	"strata_job_bytes_total":         dto.MetricType_COUNTER,
	"strata_job_spilled_bytes_total": dto.MetricType_COUNTER,
	"strata_job_fetched_bytes_total": dto.MetricType_COUNTER,
	"strata_rejected_messages_total": dto.MetricType_COUNTER,
}

// CheckJobWorker checks a job worker's registry after one job of rows rows
// was done: the metrics of JobWorkerMetrics, the done job counted with its
// rows and bytes, and the results and rejection classes that have not
// happened present at zero.
func CheckJobWorker(t testing.TB, g prometheus.Gatherer, service, jobSubject string, rows int64) {
	t.Helper()
	fams := Check(t, g, service, JobWorkerMetrics)
	if v := Value(fams, "strata_jobs_total", "result", "done"); v != 1 {
		t.Errorf("strata_jobs_total{result=done} = %v; want 1", v)
	}
	for _, result := range []string{"failed", "retried", "released", "undelivered", "existing"} {
		if Series(fams, "strata_jobs_total") < 6 || Value(fams, "strata_jobs_total", "result", result) != 0 {
			t.Errorf("strata_jobs_total{result=%s}: want a series at 0 before any such job", result)
		}
	}
	if v := Value(fams, "strata_job_rows_total"); v != float64(rows) {
		t.Errorf("strata_job_rows_total = %v; want %d", v, rows)
	}
	if v := Value(fams, "strata_job_bytes_total"); v <= 0 {
		t.Errorf("strata_job_bytes_total = %v; want the output's bytes", v)
	}
	if v := Value(fams, "strata_job_duration_seconds"); v != 1 {
		t.Errorf("strata_job_duration_seconds has %v samples; want 1", v)
	}
	for _, class := range []string{"malformed", "failed", "rejected"} {
		if Value(fams, "strata_rejected_messages_total", "subject", jobSubject, "class", class) != 0 ||
			Series(fams, "strata_rejected_messages_total") != 3 {
			t.Errorf("strata_rejected_messages_total{subject=%s,class=%s}: want a series at 0", jobSubject, class)
		}
	}
}
