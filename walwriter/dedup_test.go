package walwriter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDedupWindowForgetsOldest(t *testing.T) {
	for _, window := range []int{1, 5, 1500} { // 1500 grows the bucket array
		d := newDedupWindow(window)
		n := 3*window + 2
		for i := range n {
			id := fmt.Sprintf("e-%d", i)
			if _, dup := d.lookup(id, d.hash(id)); dup {
				t.Fatalf("window %d: %s found before it was added", window, id)
			}
			d.add(id, d.hash(id), LSN(i+1))
		}
		if d.len() != window {
			t.Errorf("window %d: remembers %d IDs", window, d.len())
		}
		for i := range n {
			id := fmt.Sprintf("e-%d", i)
			lsn, dup := d.lookup(id, d.hash(id))
			if want := i >= n-window; dup != want || (dup && lsn != LSN(i+1)) {
				t.Errorf("window %d: %s: found %v at %d, want found %v at %d", window, id, dup, lsn, want, i+1)
			}
		}
	}
}

func TestDedupWindowHashCollisions(t *testing.T) {
	// Every ID gets one of two hashes, or hashes that share their home slot
	// or their low 32 bits: lookups must still tell them apart and removing
	// the oldest must keep the others reachable.
	hashes := []uint64{42, 42, 42 + 1<<32, 42 + 1024, 43, 42, 41}
	const window = 3
	d := newDedupWindow(window)
	ids := []string{"a", "b", "c", "d", "e", "f", "g"}
	for i, id := range ids {
		d.add(id, hashes[i], LSN(i+1))
		for j := 0; j <= i; j++ {
			lsn, dup := d.lookup(ids[j], hashes[j])
			if want := j > i-window; dup != want || (dup && lsn != LSN(j+1)) {
				t.Errorf("after %s: %s: found %v at %d, want found %v at %d", id, ids[j], dup, lsn, want, j+1)
			}
		}
	}
}

// TestDedupWindowMatchesModel checks the window against a plain FIFO of IDs,
// with hashes drawn from a small set so probe runs collide and wrap around
// the end of the table.
func TestDedupWindowMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, window := range []int{1, 7, 300, 700} {
		d := newDedupWindow(window)
		var fifo []string
		hashOf := map[string]uint64{}
		for i := range 20 * window {
			id := fmt.Sprintf("m-%d", rng.IntN(3*window))
			h, ok := hashOf[id]
			if !ok {
				// Home slots at the very end or start of the table, whatever its size.
				h = uint64(uint32(rng.IntN(40)-20)) | rng.Uint64N(4)<<32
				hashOf[id] = h
			}
			_, dup := d.lookup(id, h)
			if want := slices.Contains(fifo, id); dup != want {
				t.Fatalf("window %d, step %d: %s found %v, want %v", window, i, id, dup, want)
			}
			if !dup {
				d.add(id, h, LSN(i+1))
				fifo = append(fifo, id)
				if len(fifo) > window {
					fifo = fifo[1:]
				}
			}
		}
	}
}

func TestDedupWindowDisabled(t *testing.T) {
	d := newDedupWindow(0)
	d.add("a", d.hash("a"), 1)
	if _, dup := d.lookup("a", d.hash("a")); dup || d.len() != 0 {
		t.Error("a zero window remembered an ID")
	}
}

func BenchmarkDedupWindow(b *testing.B) {
	d := newDedupWindow(1 << 18)
	ids := make([]string, 1<<20)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-p%d-%d", i%64, i)
	}
	i := 0
	for b.Loop() {
		id := ids[i&(len(ids)-1)]
		h := d.hash(id)
		if _, dup := d.lookup(id, h); !dup {
			d.add(id, h, LSN(i+1))
		}
		i++
	}
}
