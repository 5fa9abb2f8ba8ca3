package columnar

import (
	"container/list"
	"slices"
	"sync"
)

// A container's manifest is written once, when the container commits,
// and never changed: the same bytes are the same manifest.
// ReadSourceManifest (and so OpenSource) keeps the manifests it decodes
// in a process-wide cache keyed by those bytes, so opening a container
// again (the next job over the same inputs, a query rerun) reads the
// manifest's bytes but skips decoding and validating its JSON, which for
// a container of a million rows in 250 blocks of 8 columns (150KB) costs
// more than a millisecond. Keyed by the bytes rather than by a path or an
// object name, an entry can never be stale: another manifest is other
// bytes.
//
// Each caller gets its own deep copy, so no caller can change another's.
// The cache holds at most manifestCacheBytes of manifest JSON, the least
// recently used dropped first.

// manifestCacheBytes bounds the manifest bytes the cache keeps.
const manifestCacheBytes = 16 << 20

var manifests = newManifestCache(manifestCacheBytes)

type manifestCache struct {
	mu      sync.Mutex
	max     int64
	bytes   int64
	entries map[string]*list.Element // by the manifest's bytes
	lru     list.List                // front: most recently used
}

type manifestEntry struct {
	data string
	m    *Manifest
}

func newManifestCache(max int64) *manifestCache {
	return &manifestCache{max: max, entries: map[string]*list.Element{}}
}

// decode returns the manifest encoded by data, from the cache when it
// holds it, else from DecodeManifest (and then it holds it).
func (c *manifestCache) decode(data []byte) (*Manifest, error) {
	c.mu.Lock()
	if e, ok := c.entries[string(data)]; ok {
		c.lru.MoveToFront(e)
		m := e.Value.(*manifestEntry).m
		c.mu.Unlock()
		return m.clone(), nil
	}
	c.mu.Unlock()
	m, err := DecodeManifest(data)
	if err != nil || int64(len(data)) > c.max {
		return m, err
	}
	kept := m.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[string(data)]; ok {
		return m, nil // decoded at the same time by another open
	}
	key := string(data)
	c.entries[key] = c.lru.PushFront(&manifestEntry{data: key, m: kept})
	c.bytes += int64(len(key))
	for c.bytes > c.max {
		old := c.lru.Remove(c.lru.Back()).(*manifestEntry)
		delete(c.entries, old.data)
		c.bytes -= int64(len(old.data))
	}
	return m, nil
}

// clone returns a deep copy of m.
func (m *Manifest) clone() *Manifest {
	c := *m
	c.Schema = slices.Clone(m.Schema)
	c.SortKey = slices.Clone(m.SortKey)
	c.PrimaryKey = slices.Clone(m.PrimaryKey)
	if m.Changes != nil {
		ch := *m.Changes
		c.Changes = &ch
	}
	c.Blocks = slices.Clone(m.Blocks)
	for i := range c.Blocks {
		c.Blocks[i].MinKey = slices.Clone(c.Blocks[i].MinKey)
		c.Blocks[i].MaxKey = slices.Clone(c.Blocks[i].MaxKey)
	}
	c.Files = slices.Clone(m.Files)
	for i := range c.Files {
		c.Files[i].Blocks = slices.Clone(c.Files[i].Blocks)
	}
	return &c
}
