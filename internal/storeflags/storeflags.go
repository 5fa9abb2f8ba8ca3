// Package storeflags holds the flags that put a service's containers in a
// store shared between hosts (--store URL, and for workers --depot DIR
// --depot-size SIZE), opens what they name, and exports a depot's counters
// as metrics. With no --store a service uses its data directory alone, as
// it always has. The walwriter's --store names where its WAL is archived
// instead (RegisterWALArchive).
package storeflags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/bytesize"
	svc "github.com/strata-db/strata/internal/service"
)

// DefaultDepotSize is --depot-size's default.
const DefaultDepotSize = "20GiB"

// Flags are the store flags of one binary.
type Flags struct {
	Store     string
	Depot     string
	DepotSize string
	worker    bool
}

// Register adds --store to fs and, for a job worker, --depot and
// --depot-size.
func (f *Flags) Register(fs *flag.FlagSet, worker bool) {
	f.worker = worker
	fs.StringVar(&f.Store, "store", "", "where containers live, shared between hosts: s3://BUCKET/PREFIX?endpoint=URL&region=REGION or file:///DIR (default: the data directory alone)")
	if worker {
		fs.StringVar(&f.Depot, "depot", "", "with --store: local cache of containers (default: DATA/depot)")
		fs.StringVar(&f.DepotSize, "depot-size", DefaultDepotSize, "with --store: bytes the depot keeps once no job reads them")
	}
}

// RegisterWALArchive adds --store to fs for the walwriter, where it names
// the store that the WAL's sealed segments and checkpoint are copied to
// (package walarchive).
func (f *Flags) RegisterWALArchive(fs *flag.FlagSet) {
	fs.StringVar(&f.Store, "store", "", "copy the WAL's sealed segments and checkpoint to this store, its disaster copy: s3://BUCKET/PREFIX?endpoint=URL&region=REGION or file:///DIR (default: no copy)")
}

// OpenStore opens --store; nil without one.
func (f *Flags) OpenStore(ctx context.Context) (store.Store, error) {
	if f.Store == "" {
		return nil, nil
	}
	st, err := store.Open(ctx, f.Store)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	return st, nil
}

// OpenDepot opens --store and the depot over it (--depot, default
// DATA/depot, bounded by --depot-size); nil without --store.
func (f *Flags) OpenDepot(ctx context.Context, dataDir string, log *slog.Logger) (*depot.Depot, error) {
	if f.Store == "" {
		return nil, nil
	}
	limit, err := bytesize.Parse(f.DepotSize)
	if err != nil || limit < 0 {
		return nil, fmt.Errorf("--depot-size %q: want a size such as 20GiB", f.DepotSize)
	}
	st, err := f.OpenStore(ctx)
	if err != nil {
		return nil, err
	}
	dir := f.Depot
	if dir == "" {
		dir = filepath.Join(dataDir, "depot")
	}
	d, err := depot.Open(dir, st, depot.Options{Limit: limit, Logger: log})
	if err != nil {
		st.Close()
		if errors.Is(err, depot.ErrLocked) {
			// Two workers on one host with one data directory and the
			// default --depot.
			return nil, fmt.Errorf("--depot: %w: each worker needs a depot directory of its own", err)
		}
		return nil, fmt.Errorf("--depot: %w", err)
	}
	log.Info("containers in a store", "store", st.String(), "depot", dir, "depot_size", bytesize.Format(limit))
	return d, nil
}

// OpenWorkerDepot is OpenDepot for a job worker: it also exports the
// depot's counters on reg, labelled with service, and returns what closes
// the depot and its store (a no-op without --store).
func (f *Flags) OpenWorkerDepot(ctx context.Context, dataDir string, log *slog.Logger, reg prometheus.Registerer, service string) (*depot.Depot, func(), error) {
	d, err := f.OpenDepot(ctx, dataDir, log)
	if err != nil || d == nil {
		return nil, func() {}, err
	}
	RegisterDepotMetrics(reg, service, d)
	return d, func() { d.Close(); d.Store().Close() }, nil
}

// RegisterDepotMetrics exports d's counters on reg, labelled with service.
func RegisterDepotMetrics(reg prometheus.Registerer, service string, d *depot.Depot) {
	type stat = svc.Stat[depot.Stats]
	svc.RegisterStats(reg, service, d.Stats,
		stat{Name: "strata_depot_hits_total", Help: "Job inputs the depot knew (their manifest was there).", Of: func(s depot.Stats) int64 { return s.Hits }},
		stat{Name: "strata_depot_misses_total", Help: "Job inputs whose manifest was fetched from the store.", Of: func(s depot.Stats) int64 { return s.Misses }},
		stat{Name: "strata_depot_files_fetched_total", Help: "Column files read from the store and kept in the depot.", Of: func(s depot.Stats) int64 { return s.FilesFetched }},
		stat{Name: "strata_depot_evictions_total", Help: "Containers evicted from the depot.", Of: func(s depot.Stats) int64 { return s.Evictions }},
		stat{Name: "strata_depot_fetched_bytes_total", Help: "Bytes read from the store into the depot.", Of: func(s depot.Stats) int64 { return s.BytesFetched }},
		stat{Name: "strata_depot_bytes", Help: "Bytes of containers in the depot.", Gauge: true, Of: func(s depot.Stats) int64 { return s.Bytes }},
		stat{Name: "strata_depot_containers", Help: "Containers in the depot.", Gauge: true, Of: func(s depot.Stats) int64 { return s.Containers }},
	)
}
