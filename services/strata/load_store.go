package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
)

// storeLoad is a load into a store (--store): the containers are written
// into a staging directory, uploaded (column files first, manifest last)
// and then registered; the staging copies go once uploaded.
type storeLoad struct {
	st      store.Store
	staging string
}

// openStoreLoad opens the store and a staging directory, and sets
// f.firstID past the numbers of the containers the store already holds.
func openStoreLoad(ctx context.Context, f *loadFlags) (*storeLoad, error) {
	st, err := store.Open(ctx, f.storeURL)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	prefix := store.Join(f.table, f.projection) + "/"
	objs, err := st.List(ctx, prefix)
	if err != nil {
		st.Close()
		return nil, err
	}
	for _, e := range store.Prefixes(objs, prefix) {
		if n, ok := strings.CutPrefix(e.Name, "c"); ok {
			if v, err := strconv.Atoi(n); err == nil && v >= 0 {
				f.firstID = max(f.firstID, v+1)
				continue
			}
		}
		f.firstID = max(f.firstID, 1) // a merged container: the projection is in use
	}
	staging, err := os.MkdirTemp("", "strata-load-")
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("staging directory: %w", err)
	}
	return &storeLoad{st: st, staging: staging}, nil
}

// upload puts every container into the store; on an error it removes
// what it uploaded.
func (l *storeLoad) upload(ctx context.Context, ms []*columnar.Manifest) error {
	start := time.Now()
	var bytes int64
	for i, m := range ms {
		dir := columnar.ContainerDir(l.staging, m.Table, m.Projection, m.ID)
		if _, err := store.Upload(ctx, l.st, dir, m.Table, m.Projection, m.ID); err != nil {
			l.remove(ms[:i+1])
			return fmt.Errorf("upload to %s (nothing registered): %w", l.st, err)
		}
		bytes += m.CompressedBytes()
		os.RemoveAll(dir)
	}
	fmt.Fprintf(os.Stderr, "uploaded %d containers (%s) to %s in %s\n", len(ms), fmtBytes(bytes), l.st, time.Since(start).Round(time.Millisecond))
	return nil
}

// remove deletes uploaded containers the scheduler did not take.
func (l *storeLoad) remove(ms []*columnar.Manifest) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, m := range ms {
		if err := store.Remove(ctx, l.st, m.Table, m.Projection, m.ID); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s/%s/%s from %s: %v\n", m.Table, m.Projection, m.ID, l.st, err)
		}
	}
}

func (l *storeLoad) close() {
	os.RemoveAll(l.staging)
	l.st.Close()
}

// fetchResult brings the result container at dir (under staging, as
// resultDir named it) from the store at storeURL.
func fetchResult(ctx context.Context, storeURL, staging, dir string) error {
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	defer st.Close()
	rel, err := filepath.Rel(staging, dir)
	if err != nil {
		return err
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 3 {
		return fmt.Errorf("result container %s: not table/projection/id", rel)
	}
	if _, _, err := store.Fetch(ctx, st, parts[0], parts[1], parts[2], dir); err != nil {
		return fmt.Errorf("read the result: %w", err)
	}
	return nil
}
