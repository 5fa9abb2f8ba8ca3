package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/scheduler"
)

// dataStorage is the scheduler's view of the data directory: every name it
// is given is resolved through columnar.DataDir's confined root.
type dataStorage struct{ *columnar.DataDir }

// CheckContainer checks a worker's output or a load's container cheaply
// (manifest, file sizes and header checksums) and returns what its
// manifest says of it; a missing or corrupt one wraps
// scheduler.ErrBadOutput. It is safe to call from several goroutines at
// once.
func (d dataStorage) CheckContainer(table, projection, id string) (scheduler.ContainerInfo, error) {
	m, err := d.Check(table, projection, id)
	if err != nil {
		if errors.Is(err, columnar.ErrNotFound) || errors.Is(err, columnar.ErrCorrupt) || errors.Is(err, columnar.ErrOutsideRoot) {
			return scheduler.ContainerInfo{}, fmt.Errorf("%w: %v", scheduler.ErrBadOutput, err)
		}
		return scheduler.ContainerInfo{}, err
	}
	return containerInfo(m), nil
}

// containerInfo is what the scheduler takes from a checked manifest.
func containerInfo(m *columnar.Manifest) scheduler.ContainerInfo {
	info := scheduler.ContainerInfo{Rows: m.Rows, Bytes: m.CompressedBytes(), PrimaryKey: m.PrimaryKey}
	if c := m.Changes; c != nil {
		info.Changes = &scheduler.ChangeInfo{MinVersion: c.MinVersion, MaxVersion: c.MaxVersion, Markers: c.Markers}
	}
	return info
}

// RemoveUncommitted removes nothing: a data directory's containers are
// committed by renaming a complete directory into place, and what a
// writer left beside one is a directory of its own, swept as an orphan.
func (d dataStorage) RemoveUncommitted(table, projection, id string, cutoff time.Time) ([]string, error) {
	return nil, nil
}

// storeTimeout bounds one call of bucketStorage: the scheduler's Storage
// interface has no context.
const storeTimeout = 2 * time.Minute

// bucketStorage is the scheduler's view of a store (--store): containers
// are key prefixes <table>/<projection>/<id>/, listed as the directories of
// a data directory, with the newest modification time under each; inside
// one, the upload attempts (columnar/store package doc). Like the Store it
// wraps, it is safe for concurrent use.
type bucketStorage struct{ st store.Store }

func (b bucketStorage) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// CheckContainer checks a worker's output or a load's container in the store (store.Check: the
// commit, the manifest, one listing for the object sizes, then the header
// checksums by ranged reads, store.MaxCheckReads at a time); a missing or
// corrupt one wraps scheduler.ErrBadOutput. It is safe to call from
// several goroutines at once, each call bounded by storeTimeout.
func (b bucketStorage) CheckContainer(table, projection, id string) (scheduler.ContainerInfo, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	m, err := store.Check(ctx, b.st, table, projection, id)
	if err != nil {
		if errors.Is(err, columnar.ErrNotFound) || errors.Is(err, columnar.ErrCorrupt) || errors.Is(err, store.ErrInvalidKey) {
			return scheduler.ContainerInfo{}, fmt.Errorf("%w: %v", scheduler.ErrBadOutput, err)
		}
		return scheduler.ContainerInfo{}, err
	}
	return containerInfo(m), nil
}

// RemoveContainer deletes a container's prefix, its manifest first.
func (b bucketStorage) RemoveContainer(table, projection, id string) error {
	ctx, cancel := b.ctx()
	defer cancel()
	return store.Remove(ctx, b.st, table, projection, id)
}

// ReadDir lists the next key elements under the joined elements, each
// with the newest modification time of the objects under it.
func (b bucketStorage) ReadDir(elems ...string) ([]fs.DirEntry, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	prefix := ""
	if len(elems) > 0 {
		prefix = store.Join(elems...) + "/"
	}
	objs, err := b.st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var ents []fs.DirEntry
	for _, e := range store.Prefixes(objs, prefix) {
		ents = append(ents, prefixEntry{e})
	}
	return ents, nil
}

// RemoveAll deletes every object under the joined elements.
func (b bucketStorage) RemoveAll(elems ...string) error {
	ctx, cancel := b.ctx()
	defer cancel()
	return b.st.DeletePrefix(ctx, store.Join(elems...)+"/")
}

// RemoveUncommitted deletes the container's upload attempts that its
// commit does not name and that are older than cutoff.
func (b bucketStorage) RemoveUncommitted(table, projection, id string, cutoff time.Time) ([]string, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	return store.RemoveUncommitted(ctx, b.st, table, projection, id, cutoff)
}

// RemoveEmpty does nothing: a bucket has no directories to leave behind.
func (b bucketStorage) RemoveEmpty(elems ...string) error { return nil }

// prefixEntry is a key prefix seen as a directory.
type prefixEntry struct{ e store.Entry }

func (p prefixEntry) Name() string               { return p.e.Name }
func (p prefixEntry) IsDir() bool                { return true }
func (p prefixEntry) Type() fs.FileMode          { return fs.ModeDir }
func (p prefixEntry) Info() (fs.FileInfo, error) { return p, nil }
func (p prefixEntry) Size() int64                { return p.e.Size }
func (p prefixEntry) Mode() fs.FileMode          { return fs.ModeDir | 0o755 }
func (p prefixEntry) ModTime() time.Time         { return p.e.Modified }
func (p prefixEntry) Sys() any                   { return nil }
