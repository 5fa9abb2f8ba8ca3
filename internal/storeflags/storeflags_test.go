package storeflags

import (
	"flag"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/service/metricstest"
)

func TestNoStoreNoDepot(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("merger", flag.ContinueOnError)
	f.Register(fs, true)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	d, err := f.OpenDepot(t.Context(), t.TempDir(), slog.New(slog.DiscardHandler))
	if d != nil || err != nil {
		t.Fatalf("without --store: depot %v, %v", d, err)
	}
}

func TestDepotFlagsAndMetrics(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("merger", flag.ContinueOnError)
	f.Register(fs, true)
	data := t.TempDir()
	if err := fs.Parse([]string{"--store", "file://" + t.TempDir(), "--depot-size", "1GiB"}); err != nil {
		t.Fatal(err)
	}
	d, err := f.OpenDepot(t.Context(), data, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer d.Store().Close()
	if got := d.Dir().Path(); got != filepath.Join(data, "depot") {
		t.Errorf("depot at %s, want DATA/depot", got)
	}
	reg := prometheus.NewRegistry()
	RegisterDepotMetrics(reg, "merger", d)
	metricstest.Check(t, reg, "merger", map[string]dto.MetricType{
		"strata_depot_hits_total":          dto.MetricType_COUNTER,
		"strata_depot_misses_total":        dto.MetricType_COUNTER,
		"strata_depot_evictions_total":     dto.MetricType_COUNTER,
		"strata_depot_fetched_bytes_total": dto.MetricType_COUNTER,
		"strata_depot_bytes":               dto.MetricType_GAUGE,
		"strata_depot_containers":          dto.MetricType_GAUGE,
	})
	f.DepotSize = "lots"
	if _, err := f.OpenDepot(t.Context(), data, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("--depot-size lots: no error")
	}
}

func TestWALArchiveStore(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("walwriter", flag.ContinueOnError)
	f.RegisterWALArchive(fs)
	if fs.Lookup("depot") != nil {
		t.Error("the walwriter has a --depot flag")
	}
	if st, err := f.OpenStore(t.Context()); st != nil || err != nil {
		t.Fatalf("without --store: %v, %v", st, err)
	}
	if err := fs.Parse([]string{"--store", "file://" + t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	st, err := f.OpenStore(t.Context())
	if err != nil || st == nil {
		t.Fatalf("--store file://DIR: %v, %v", st, err)
	}
	st.Close()
	f.Store = "ftp://x"
	if _, err := f.OpenStore(t.Context()); err == nil {
		t.Error("--store ftp://x: no error")
	}
}
