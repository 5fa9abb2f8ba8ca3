package walwriter

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestImageCacheKeepsImagesWithinLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	rows := make(map[int64]Row)
	c := newImageCache(40 * (cacheEntryOverhead + 300)) // room for about 40 rows
	for i := range 2000 {
		id := rng.Int64N(100)
		k := binary.BigEndian.AppendUint64(nil, uint64(id))
		row := accountRow(id, rng)
		row[2] = nil      // a NULL stays NULL
		row[3] = []byte{} // an empty value stays non-nil
		h := c.hash(&accounts, k)
		e := c.lookup(&accounts, k, h)
		if want, ok := rows[id]; e != nil && (!ok || !sameRow(e.row, want)) {
			t.Fatalf("step %d: key %d: cached %q, want %q", i, id, e.row, want)
		}
		c.store(e, h, &accounts, k, row)
		rows[id] = cloneRow(row)
		if c.used > c.limit {
			t.Fatalf("step %d: %d bytes used, limit %d", i, c.used, c.limit)
		}
		if got := c.lookup(&accounts, k, h); got == nil || !sameRow(got.row, row) || got.row[2] != nil || got.row[3] == nil {
			t.Fatalf("step %d: key %d not cached as just stored", i, id)
		}
	}
	if n := len(c.entries); n < 20 || n != len(c.clock) {
		t.Errorf("%d entries, %d on the clock; want about 40 of each", n, len(c.clock))
	}
	c.reset()
	if len(c.entries) != 0 || len(c.clock) != 0 || c.used != 0 {
		t.Errorf("reset left %d entries, %d on the clock, %d bytes", len(c.entries), len(c.clock), c.used)
	}
}

func TestImageCacheHitSurvivesEviction(t *testing.T) {
	c := newImageCache(1 << 20)
	key := func(i int) []byte { return []byte{byte(i)} }
	rng := rand.New(rand.NewPCG(1, 2))
	put := func(i int) {
		h := c.hash(&accounts, key(i))
		c.store(c.lookup(&accounts, key(i), h), h, &accounts, key(i), accountRow(int64(i), rng))
	}
	put(9)
	c.limit = 3*c.used + c.used/2 // room for three entries
	c.reset()
	for i := range 3 {
		put(i)
	}
	c.evictOne() // every mark was set: the hand clears them and evicts key 0
	put(1)       // hit: key 1 gets its second chance again
	put(3)
	put(4)
	if c.lookup(&accounts, key(1), c.hash(&accounts, key(1))) == nil {
		t.Error("the entry hit last was evicted before entries never hit since")
	}
}

// The producers hash every update's key and event ID; neither may allocate.
func TestHashesDoNotAllocate(t *testing.T) {
	c, d := newImageCache(1<<20), newDedupWindow(16)
	key, id := []byte("key-1"), "event-1"
	if n := testing.AllocsPerRun(100, func() { c.hash(&accounts, key); d.hash(id) }); n != 0 {
		t.Errorf("%v allocations per key and event ID hash", n)
	}
}
