package walwriter

import "hash/maphash"

// dedupWindow remembers the LSN of the last n event IDs written, to drop
// redelivered events. It is owned by the encoder goroutine (and by recovery
// before that); only hash may be called concurrently.
//
// It is a chained hash table over a ring of entries: heads holds, per
// bucket, the ring position (+1) of the bucket's first entry and each entry
// the position of the next one. Lookups compare the full hash and then the
// ID, so a hash collision never drops an event. When the ring is full the
// oldest entry is unlinked from its chain and its slot reused, so a window
// costs no allocation per ID once it is full.
type dedupWindow struct {
	seed   maphash.Seed
	window int
	heads  []int32 // power-of-two length, at least len(ring)
	ring   []dedupEntry
	pos    int // the oldest entry once the ring is full
}

type dedupEntry struct {
	id   string
	hash uint64
	lsn  LSN
	next int32 // ring position+1 of the next entry of the bucket, 0 at the end
}

func newDedupWindow(n int) *dedupWindow {
	d := &dedupWindow{seed: maphash.MakeSeed(), window: n}
	if n > 0 {
		d.ring = make([]dedupEntry, 0, min(n, 1<<16))
		d.heads = make([]int32, 1024)
	}
	return d
}

// hash is the hash of id that lookup and add take. It only reads the seed,
// so producers compute it concurrently, off the encoder.
func (d *dedupWindow) hash(id string) uint64 { return maphash.String(d.seed, id) }

func (d *dedupWindow) bucket(hash uint64) *int32 { return &d.heads[hash&uint64(len(d.heads)-1)] }

// lookup returns the LSN id was written at, if it is in the window.
func (d *dedupWindow) lookup(id string, hash uint64) (LSN, bool) {
	if d.window == 0 {
		return 0, false
	}
	for p := *d.bucket(hash); p != 0; {
		e := &d.ring[p-1]
		if e.hash == hash && e.id == id {
			return e.lsn, true
		}
		p = e.next
	}
	return 0, false
}

// add remembers id (not in the window), forgetting the oldest ID when full.
func (d *dedupWindow) add(id string, hash uint64, lsn LSN) {
	if d.window == 0 {
		return
	}
	var at int
	if len(d.ring) < d.window {
		at = len(d.ring)
		d.ring = append(d.ring, dedupEntry{})
		if len(d.ring) > len(d.heads) {
			d.rehash(2 * len(d.heads))
		}
	} else {
		at = d.pos
		d.unlink(at)
		d.pos = (d.pos + 1) % d.window
	}
	head := d.bucket(hash)
	d.ring[at] = dedupEntry{id: id, hash: hash, lsn: lsn, next: *head}
	*head = int32(at + 1)
}

// unlink removes the entry at ring position at from its bucket's chain.
func (d *dedupWindow) unlink(at int) {
	link := d.bucket(d.ring[at].hash)
	for *link != 0 {
		if int(*link-1) == at {
			*link = d.ring[at].next
			return
		}
		link = &d.ring[*link-1].next
	}
}

// rehash rebuilds the chains over n buckets.
func (d *dedupWindow) rehash(n int) {
	d.heads = make([]int32, n)
	for i := range d.ring {
		e := &d.ring[i]
		if e.id == "" { // the slot add is about to fill
			continue
		}
		head := d.bucket(e.hash)
		e.next = *head
		*head = int32(i + 1)
	}
}

// len is the number of IDs remembered.
func (d *dedupWindow) len() int { return len(d.ring) }
