package walwriter

import "hash/maphash"

// dedupWindow remembers the LSN of the last n event IDs written, to drop
// redelivered events. It is owned by the encoder goroutine (and by recovery
// before that); only hash may be called concurrently.
//
// The IDs live in a ring, oldest overwritten first, and are found through
// an open-addressing table with linear probing whose slots hold the low 32
// bits of the ID's hash and its ring position. A lookup of a new ID touches
// one run of slots and reads the ring only when those 32 bits match; the
// full hash and the ID are then compared, so a collision never drops an
// event. Removing the oldest ID shifts the slots after it back (no
// tombstones), so the table stays at most half full and costs no allocation
// per ID once the window is full.
type dedupWindow struct {
	seed   maphash.Seed
	window int
	slots  []dedupSlot // power-of-two length, at least 2 x len(ring)
	ring   []dedupEntry
	pos    int // the oldest entry once the ring is full
}

type dedupSlot struct {
	hashLo uint32 // low 32 bits of the hash; the home slot is hashLo & mask
	at     int32  // ring position + 1; 0 is an empty slot
}

type dedupEntry struct {
	id   string
	hash uint64
	lsn  LSN
}

func newDedupWindow(n int) *dedupWindow {
	d := &dedupWindow{seed: maphash.MakeSeed(), window: n}
	d.reset()
	return d
}

// reset forgets every ID. It keeps the seed, so hashes producers computed
// before stay valid.
func (d *dedupWindow) reset() {
	d.ring, d.slots, d.pos = nil, nil, 0
	if d.window > 0 {
		d.ring = make([]dedupEntry, 0, min(d.window, 1<<16))
		d.slots = make([]dedupSlot, 1024)
	}
}

// hash is the hash of id that lookup and add take. It only reads the seed,
// so producers compute it concurrently, off the encoder.
func (d *dedupWindow) hash(id string) uint64 { return maphash.String(d.seed, id) }

func (d *dedupWindow) mask() uint32 { return uint32(len(d.slots) - 1) }

// lookup returns the LSN id was written at, if it is in the window.
func (d *dedupWindow) lookup(id string, hash uint64) (LSN, bool) {
	if d.window == 0 {
		return 0, false
	}
	lo, mask := uint32(hash), d.mask()
	for i := lo & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s.at == 0 {
			return 0, false
		}
		if s.hashLo == lo {
			if e := &d.ring[s.at-1]; e.hash == hash && e.id == id {
				return e.lsn, true
			}
		}
	}
}

// add remembers id (not in the window), forgetting the oldest ID when full.
func (d *dedupWindow) add(id string, hash uint64, lsn LSN) {
	if d.window == 0 {
		return
	}
	e := dedupEntry{id: id, hash: hash, lsn: lsn}
	var at int
	if len(d.ring) < d.window {
		at = len(d.ring)
		d.ring = append(d.ring, e)
		if 2*len(d.ring) > len(d.slots) {
			d.rebuild(2 * len(d.slots)) // places the new entry too
			return
		}
	} else {
		at = d.pos
		d.remove(at)
		d.ring[at] = e
		d.pos = (d.pos + 1) % d.window
	}
	d.insert(uint32(hash), at)
}

func (d *dedupWindow) insert(lo uint32, at int) {
	mask := d.mask()
	i := lo & mask
	for d.slots[i].at != 0 {
		i = (i + 1) & mask
	}
	d.slots[i] = dedupSlot{hashLo: lo, at: int32(at + 1)}
}

// remove empties the slot of ring position at and moves later slots of the
// probe run back, so every entry stays reachable from its home slot.
func (d *dedupWindow) remove(at int) {
	mask := d.mask()
	i := uint32(d.ring[at].hash) & mask
	for d.slots[i].at != int32(at+1) {
		if d.slots[i].at == 0 {
			return // not in the table (cannot happen: every ring entry is)
		}
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		s := d.slots[j]
		if s.at == 0 {
			break
		}
		// s may move into the hole at i unless its home lies cyclically
		// in (i, j].
		home := s.hashLo & mask
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			d.slots[i] = s
			i = j
		}
	}
	d.slots[i] = dedupSlot{}
}

// rebuild places every ring entry in a table of n slots.
func (d *dedupWindow) rebuild(n int) {
	d.slots = make([]dedupSlot, n)
	for at := range d.ring {
		d.insert(uint32(d.ring[at].hash), at)
	}
}

// len is the number of IDs remembered.
func (d *dedupWindow) len() int { return len(d.ring) }
