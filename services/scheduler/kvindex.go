package main

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// indexedKV is a bucketKV whose Keys answers from memory: the bucket's
// key set, kept by a watcher of its every change (values not fetched),
// and by this process's own writes as they succeed. A bucket's Keys
// lists it through a consumer that is sent the latest entry of every key,
// deleted ones too until their markers are purged (hourly, once half an
// hour old), so it costs a round trip per hundred or so keys; the catalog
// holds a key per window result kept and one per job made in the last
// hour, and the scheduler listed it on every window request, catalog
// request and job's end: a small query's latency grew with the queries
// run before it (from 30ms to 90ms over 300 queries).
//
// Until the watcher has delivered the bucket's contents, and if it stops,
// Keys lists the bucket. When the connection to NATS comes back
// (Rebuild), the index is dropped and built again by a new watcher: a
// server that restarted may have lost its last writes, and a watcher
// that goes on from the sequence it had seen would miss the writes that
// take those sequences again. The index may briefly lag another scheduler's
// writes, as a listing made a moment earlier would; a key it still holds
// after a delete is one Get finds missing, which the catalog's readers
// skip (Catalog.List).
type indexedKV struct {
	bucketKV
	idx *keyIndex
}

// keyIndex is a bucket's keys by name, with the revision each was last
// seen at, so an older change delivered late by the watcher does not undo
// a newer one written here.
type keyIndex struct {
	mu      sync.Mutex
	keys    map[string]keyState
	ready   bool // the watcher delivered the bucket's contents
	stopped bool // the watcher ended: Keys lists the bucket
	// gen counts the watchers started; changes from an older one (before
	// a Rebuild) are dropped.
	gen int
}

type keyState struct {
	rev  uint64
	live bool
}

// newIndexedKV indexes kv's keys until ctx ends.
func newIndexedKV(ctx context.Context, kv jetstream.KeyValue) (indexedKV, error) {
	x := indexedKV{bucketKV: bucketKV{kv}, idx: &keyIndex{keys: map[string]keyState{}}}
	return x, x.watch(ctx, kv)
}

// watch starts a watcher of kv feeding a fresh index.
func (b indexedKV) watch(ctx context.Context, kv jetstream.KeyValue) error {
	x := b.idx
	x.mu.Lock()
	x.gen++
	gen := x.gen
	x.keys, x.ready, x.stopped = map[string]keyState{}, false, false
	x.mu.Unlock()
	w, err := kv.WatchAll(ctx, jetstream.MetaOnly())
	if err != nil {
		x.mu.Lock()
		if x.gen == gen {
			x.stopped = true
		}
		x.mu.Unlock()
		return err
	}
	go x.follow(w, gen)
	return nil
}

// Rebuild drops the index and builds it again from a new watcher; until
// that has delivered the bucket's contents, Keys lists the bucket. For a
// reconnection to NATS: it returns at once.
func (b indexedKV) Rebuild(ctx context.Context, kv jetstream.KeyValue) {
	x := b.idx
	x.mu.Lock()
	x.gen++ // the old watcher's changes are dropped from now on
	x.ready = false
	x.mu.Unlock()
	go func() { _ = b.watch(ctx, kv) }()
}

func (x *keyIndex) follow(w jetstream.KeyWatcher, gen int) {
	defer func() {
		x.mu.Lock()
		if x.gen == gen {
			x.stopped = true
		}
		x.mu.Unlock()
		_ = w.Stop()
	}()
	for e := range w.Updates() {
		x.mu.Lock()
		current := x.gen == gen
		if current && e == nil { // the contents delivered; changes follow
			x.ready = true
		}
		x.mu.Unlock()
		if !current {
			return
		}
		if e != nil {
			x.watched(e.Key(), e.Revision(), e.Operation() == jetstream.KeyValuePut)
		}
	}
}

// watched takes a change the watcher delivered: changes come in the
// bucket's order, so one older than what a write here recorded is passed.
func (x *keyIndex) watched(key string, rev uint64, live bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.keys[key]; ok && rev <= s.rev {
		return
	}
	if !live {
		// Nothing older of this key comes after its delete: forgotten.
		delete(x.keys, key)
		return
	}
	x.keys[key] = keyState{rev: rev, live: true}
}

// wrote records a write made here (rev is the revision it made).
func (x *keyIndex) wrote(key string, rev uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.keys[key]; !ok || rev > s.rev {
		x.keys[key] = keyState{rev: rev, live: true}
	}
}

// deleted records a delete made here. Its marker's revision is not
// known: the key is kept, not live, at the revision last seen, until the
// watcher delivers the marker.
func (x *keyIndex) deleted(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.keys[key]
	x.keys[key] = keyState{rev: s.rev}
}

// list returns the live keys with prefix, sorted; ok false until the
// watcher has delivered the bucket's contents, or once it stopped.
func (x *keyIndex) list(prefix string) ([]string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.ready || x.stopped {
		return nil, false
	}
	var out []string
	for k, s := range x.keys {
		if s.live && strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, true
}

func (b indexedKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := b.bucketKV.Create(ctx, key, value)
	if err == nil {
		b.idx.wrote(key, rev)
	}
	return rev, err
}

func (b indexedKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := b.bucketKV.Update(ctx, key, value, last)
	if err == nil {
		b.idx.wrote(key, rev)
	}
	return rev, err
}

func (b indexedKV) Delete(ctx context.Context, key string) error {
	err := b.bucketKV.Delete(ctx, key)
	if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) {
		b.idx.deleted(key)
	}
	return err
}

func (b indexedKV) Keys(ctx context.Context, prefix string) ([]string, error) {
	if keys, ok := b.idx.list(prefix); ok {
		return keys, nil
	}
	return b.bucketKV.Keys(ctx, prefix)
}
