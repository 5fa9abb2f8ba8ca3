package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
)

// The benchmarks' --store: the generated containers are uploaded to a
// store and read back from it, beside the local run of the same case.

// How a benchmark case read its inputs.
const (
	readLocal  = "local"  // from the data directory
	readDirect = "direct" // from the store by ranges, with no depot
	readCold   = "cold"   // from the store through an empty depot
	readWarm   = "warm"   // through the depot the cold run filled
)

// benchStore is a store a benchmark uploads its inputs to, under a key
// prefix of its own that it removes at the end.
type benchStore struct {
	st  store.Store
	tmp string // parent of the depots
	// depot is the one a cold run filled, for the warm run after it.
	depot       *depot.Depot
	removeDepot func()
}

// openBenchStore opens rawURL with a fresh prefix below the one it names
// (strata-bench-<random>/), so runs do not see each other's containers.
func openBenchStore(ctx context.Context, rawURL, tmp string) (*benchStore, error) {
	var b [6]byte
	rand.Read(b[:])
	run := "strata-bench-" + hex.EncodeToString(b[:])
	u := rawURL
	if strings.Contains(rawURL, "://") {
		parsed, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: --store: %v", errUsage, err)
		}
		parsed.Path = path.Join("/", parsed.Path, run)
		u = parsed.String()
	} else {
		u = filepath.Join(rawURL, run)
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	return &benchStore{st: st, tmp: tmp}, nil
}

// upload puts the committed containers of mans, under data, into the
// store.
func (b *benchStore) upload(ctx context.Context, data string, mans []*columnar.Manifest) error {
	for _, m := range mans {
		if _, err := store.Upload(ctx, b.st, columnar.ContainerDir(data, m.Table, m.Projection, m.ID), m.Table, m.Projection, m.ID); err != nil {
			return fmt.Errorf("upload to %s: %w", b.st, err)
		}
	}
	return nil
}

// newDepot returns an empty depot over the store, and what removes it.
func (b *benchStore) newDepot() (*depot.Depot, func(), error) {
	dir, err := os.MkdirTemp(b.tmp, "depot-")
	if err != nil {
		return nil, nil, err
	}
	d, err := depot.Open(dir, b.st, depot.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return d, func() { d.Close(); os.RemoveAll(dir) }, nil
}

// acquireAll returns the depot's sources of the containers of mans
// (acquired together, as the merger acquires its inputs) and what releases
// them; with prefetch, the depot fetches each one's files in the
// background (as the merger does for its inputs).
func acquireAll(ctx context.Context, d *depot.Depot, mans []*columnar.Manifest, prefetch bool) ([]columnar.Source, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	refs := make([]depot.Ref, len(mans))
	for i, m := range mans {
		refs[i] = depot.Ref{Table: m.Table, Projection: m.Projection, ID: m.ID}
	}
	srcs, release, err := d.AcquireAll(ctx, refs)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if prefetch {
		for _, src := range srcs {
			d.Prefetch(ctx, src)
		}
	}
	return srcs, func() { cancel(); release() }, nil
}

// close removes everything the benchmark put in the store, and its depot.
func (b *benchStore) close(ctx context.Context) error {
	if b.removeDepot != nil {
		b.removeDepot()
		b.depot, b.removeDepot = nil, nil
	}
	// The store is opened at the run's own prefix: every table under it
	// is the benchmark's.
	objs, err := b.st.List(ctx, "")
	done := map[string]bool{}
	for _, o := range objs {
		table, _, ok := strings.Cut(o.Key, "/")
		if !ok || done[table] || err != nil {
			continue
		}
		done[table] = true
		err = b.st.DeletePrefix(ctx, table+"/")
	}
	if cerr := b.st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("remove the benchmark's containers from the store: %w", err)
	}
	return nil
}

// compressedBytes is the bytes of the column files of mans.
func compressedBytes(mans []*columnar.Manifest) int64 {
	var n int64
	for _, m := range mans {
		n += m.CompressedBytes()
	}
	return n
}

// directSources returns the store's sources of the containers of mans,
// read by ranges with no depot.
func (b *benchStore) directSources(ctx context.Context, mans []*columnar.Manifest) ([]columnar.Source, error) {
	srcs := make([]columnar.Source, len(mans))
	for i, m := range mans {
		src, _, err := store.OpenSource(ctx, b.st, m.Table, m.Projection, m.ID)
		if err != nil {
			return nil, err
		}
		srcs[i] = src
	}
	return srcs, nil
}
