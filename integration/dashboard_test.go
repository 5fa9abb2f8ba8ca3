package integration

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// dashboardMetrics returns every strata_ metric the shipped Grafana
// dashboard's queries use.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../deploy/grafana/strata.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana/strata.json: %v", err)
	}
	name := regexp.MustCompile(`\bstrata_[a-z0-9_]+`)
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				seen[n] = true
			}
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("the dashboard queries no strata_ metric")
	}
	return out
}

// scrapeNames returns the series names a /metrics endpoint exposes: each
// family, and for a histogram its _bucket, _sum and _count.
func scrapeNames(t *testing.T, p *proc, into map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		t.Fatalf("%s /metrics: %v", p.name, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		into[f[2]] = p.name
		if f[3] == "histogram" || f[3] == "summary" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				into[f[2]+s] = p.name
			}
		}
	}
}

// Every metric the Grafana dashboard in deploy/grafana queries is exported
// by some service, from its start (counters at zero, the consumers' lag
// once read).
func TestDashboardMetricsExist(t *testing.T) {
	d := newDeployment(t)
	procs := []*proc{
		d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL()),
		d.start("merger", "merger-1"),
		d.start("windower", "windower-1"),
		d.start("walwriter", "walwriter-1", "--wal", t.TempDir()),
	}
	want := dashboardMetrics(t)
	var missing []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		have := map[string]string{}
		for _, p := range procs {
			scrapeNames(t, p, have)
		}
		missing = missing[:0]
		for _, n := range want {
			if _, ok := have[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics no service exports: %s", strings.Join(missing, ", "))
	}
	t.Logf("%d metrics of the dashboard, all exported", len(want))
}
