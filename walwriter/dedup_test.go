package walwriter

import (
	"fmt"
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
	d := newDedupWindow(3)
	// Every ID gets the same hash: lookups must still tell them apart and
	// eviction must unlink the right one.
	for i, id := range []string{"a", "b", "c", "d"} {
		d.add(id, 42, LSN(i+1))
	}
	for i, id := range []string{"a", "b", "c", "d"} {
		lsn, dup := d.lookup(id, 42)
		if want := id != "a"; dup != want || (dup && lsn != LSN(i+1)) {
			t.Errorf("%s: found %v at %d, want found %v at %d", id, dup, lsn, want, i+1)
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
