package merger

import "bytes"

// loserTree is a tournament tree of losers over k sorted sources, keyed by
// normalized (memcmp-comparable) keys. Each internal node keeps the source
// that lost the match played there; the overall winner sits in node 0. After
// the winner advances, replaying its leaf-to-root path costs ceil(log2 k)
// comparisons, against 2 log2 k for a binary heap.
//
// Ties go to the lower source index, so a merge driven by the tree is stable:
// equal keys come out in source order, and within a source in the order the
// source yields them.
//
// The tree does not own the keys: the caller sets keys[i] (or done[i]) for the
// winner and calls fix. Keys are compared with bytes.Compare.
type loserTree struct {
	n     int      // leaves, a power of two >= k; leaves >= k are permanently done
	nodes []int32  // nodes[0] is the winner, nodes[1..n-1] the losers
	keys  [][]byte // current key of each source
	done  []bool   // source exhausted (or padding)

	comparisons int64 // key comparisons made, for the statistics
}

// newLoserTree returns a tree over k sources, all done until set.
func newLoserTree(k int) *loserTree {
	n := 1
	for n < k {
		n <<= 1
	}
	t := &loserTree{
		n:     n,
		nodes: make([]int32, n),
		keys:  make([][]byte, n),
		done:  make([]bool, n),
	}
	for i := range t.done {
		t.done[i] = true
	}
	return t
}

// set gives source i its current key (nil-safe: an empty key is a valid key).
// Call init after setting every source, or fix(i) after the winner moved.
func (t *loserTree) set(i int, key []byte) {
	t.keys[i] = key
	t.done[i] = false
}

// exhaust marks source i as having no more rows.
func (t *loserTree) exhaust(i int) {
	t.keys[i] = nil
	t.done[i] = true
}

// beats reports whether source a comes before source b.
func (t *loserTree) beats(a, b int32) bool {
	if t.done[a] {
		return false
	}
	if t.done[b] {
		return true
	}
	t.comparisons++
	c := bytes.Compare(t.keys[a], t.keys[b])
	return c < 0 || (c == 0 && a < b)
}

// init plays every match from the leaves up. O(n).
func (t *loserTree) init() {
	if t.n == 1 {
		t.nodes[0] = 0
		return
	}
	// winners[j] is the winner of the subtree rooted at node j, for j in [1, 2n).
	winners := make([]int32, 2*t.n)
	for i := 0; i < t.n; i++ {
		winners[t.n+i] = int32(i)
	}
	for j := t.n - 1; j >= 1; j-- {
		a, b := winners[2*j], winners[2*j+1]
		if t.beats(b, a) {
			a, b = b, a
		}
		winners[j] = a
		t.nodes[j] = b
	}
	t.nodes[0] = winners[1]
}

// winner returns the source with the smallest key, and false when every
// source is exhausted.
func (t *loserTree) winner() (int, bool) {
	w := t.nodes[0]
	return int(w), !t.done[w]
}

// fix replays the path of source i, which must be the current winner, after
// its key changed or it was exhausted.
func (t *loserTree) fix(i int) {
	cur := int32(i)
	for node := (t.n + i) >> 1; node >= 1; node >>= 1 {
		if t.beats(t.nodes[node], cur) {
			t.nodes[node], cur = cur, t.nodes[node]
		}
	}
	t.nodes[0] = cur
}
