package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// The indexed catalog lists what the bucket holds: its own writes at
// once, another writer's once the watcher delivers them, never a key
// deleted here, and the same as the bucket's own listing.
func TestIndexedKVKeys(t *testing.T) {
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	plain := bucketKV{b}
	if _, err := plain.Create(ctx, "before/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Create(ctx, "gone/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := plain.Delete(ctx, "gone/p"); err != nil {
		t.Fatal(err)
	}
	kv, err := newIndexedKV(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	waitKeys := func(what, prefix string, want ...string) {
		t.Helper()
		for {
			got, err := kv.Keys(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(got, want) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: keys %q, want %q", what, got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitKeys("the bucket's contents", "", "before/p")
	// Its own writes are listed at once, every time.
	for i := range 50 {
		rev, err := kv.Create(ctx, "t/p", []byte("1"))
		if err != nil {
			t.Fatal(err)
		}
		if keys, _ := kv.Keys(ctx, "t/"); !slices.Equal(keys, []string{"t/p"}) {
			t.Fatalf("round %d: keys after a create %q", i, keys)
		}
		if _, err := kv.Update(ctx, "t/p", []byte("2"), rev); err != nil {
			t.Fatal(err)
		}
		if err := kv.Delete(ctx, "t/p"); err != nil {
			t.Fatal(err)
		}
		if keys, _ := kv.Keys(ctx, "t/"); len(keys) != 0 {
			t.Fatalf("round %d: keys after a delete %q", i, keys)
		}
	}
	// Another writer's, once the watcher has them.
	if _, err := plain.Create(ctx, "other/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitKeys("another writer's create", "", "before/p", "other/p")
	if err := plain.Delete(ctx, "before/p"); err != nil {
		t.Fatal(err)
	}
	waitKeys("another writer's delete", "", "other/p")
	// Once the watcher stopped, the bucket is listed.
	cancel()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	for {
		kv.idx.mu.Lock()
		stopped := kv.idx.stopped
		kv.idx.mu.Unlock()
		if stopped {
			break
		}
		if ctx2.Err() != nil {
			t.Fatal("the index did not see its watcher stop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := plain.Create(ctx2, "late/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if keys, err := kv.Keys(ctx2, ""); err != nil || !slices.Equal(keys, []string{"late/p", "other/p"}) {
		t.Fatalf("keys once the watcher stopped: %q, %v", keys, err)
	}
}

// A change the watcher delivers late does not undo a newer write made
// here.
func TestKeyIndexOrder(t *testing.T) {
	x := &keyIndex{keys: map[string]keyState{}, ready: true}
	x.wrote("k", 5)
	x.watched("k", 3, false) // an older incarnation's delete
	if keys, _ := x.list(""); !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("an old delete undid a newer create: %q", keys)
	}
	x.deleted("k")
	x.watched("k", 5, true) // the create, delivered after the delete here
	if keys, _ := x.list(""); len(keys) != 0 {
		t.Fatalf("a late create undid a delete: %q", keys)
	}
	x.watched("k", 6, false) // the delete's marker
	if _, ok := x.keys["k"]; ok {
		t.Fatal("a delete the watcher delivered is remembered")
	}
	x.watched("k", 7, true)
	if keys, _ := x.list(""); !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("another writer's create after it: %q", keys)
	}
}

// After a reconnection the index is built again from a new watcher: keys
// the old index held that the bucket no longer has (a restarted server
// that lost its last writes) are gone, and writes after it are listed.
func TestIndexedKVRebuild(t *testing.T) {
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := newIndexedKV(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "a/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A key the server lost: in the old index only.
	kv.idx.wrote("lost/p", 1<<40)
	if keys, _ := kv.Keys(ctx, ""); !slices.Equal(keys, []string{"a/p", "lost/p"}) {
		t.Fatalf("keys before the rebuild %q", keys)
	}
	kv.Rebuild(ctx, b)
	if _, err := kv.Create(ctx, "b/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for {
		keys, err := kv.Keys(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		kv.idx.mu.Lock()
		ready := kv.idx.ready
		kv.idx.mu.Unlock()
		if ready && slices.Equal(keys, []string{"a/p", "b/p"}) {
			break
		}
		if !ready && !slices.Equal(keys, []string{"a/p", "b/p"}) {
			t.Fatalf("keys listed from the bucket during the rebuild %q", keys)
		}
		if ctx.Err() != nil {
			t.Fatalf("keys after the rebuild %q (index ready %v)", keys, ready)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
