package walwriter

// The encoder is bound by memory latency once the image cache and the dedup
// window outgrow the CPU caches: each update needs its key's cache entry,
// the entry's image and a dedup slot, found through chains of dependent
// loads. Encoding the requests one by one takes those misses one after the
// other. warm instead walks a group of requests ahead of the encoder in
// passes whose loads do not depend on each other within a pass, so the CPU
// has many misses in flight at once and the encoder then finds its data in
// cache. It only reads; the encoder still looks everything up itself, so
// the result is the same whether or not the lines are still cached.

// warmAhead is how many requests warm loads at a time: enough to overlap
// many misses, few enough that their lines stay cached until encoded.
const warmAhead = 32

// warm loads what encoding reqs (at most warmAhead) will touch.
func (w *WAL) warm(reqs []*request) {
	var entries [warmAhead]*cacheEntry
	var images [warmAhead][]byte
	var sink byte
	for i, r := range reqs {
		if r.checkpoint {
			continue
		}
		sink += w.dedup.touch(r.idHash) + w.dedup.touchOldest(i)
		if !w.opts.DisableDelta {
			entries[i] = w.cache.entries[r.keyHash]
		}
	}
	// The new rows were written by the producers, on other cores.
	for _, r := range reqs {
		for _, v := range r.u.Row {
			for off := 0; off < len(v); off += 64 {
				sink += v[off]
			}
		}
	}
	for i, e := range entries[:len(reqs)] {
		if e != nil {
			images[i] = e.buf
			if len(e.row) > 0 && e.row[0] != nil {
				sink += e.row[0][0]
			}
		}
	}
	for _, b := range images[:len(reqs)] {
		for off := 0; off < len(b); off += 64 {
			sink += b[off]
		}
	}
	w.warmSink += sink
}

// touchOldest loads the slot of the ID the i-th next add will forget.
func (d *dedupWindow) touchOldest(i int) byte {
	if len(d.ring) < d.window || d.window == 0 {
		return 0
	}
	return d.touch(d.ring[(d.pos+i)%d.window].hash)
}

// touch loads the slot a lookup of hash starts at.
func (d *dedupWindow) touch(hash uint64) byte {
	if len(d.slots) == 0 {
		return 0
	}
	return byte(d.slots[uint32(hash)&d.mask()].at)
}
