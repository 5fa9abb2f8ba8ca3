package columnar

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// Resolving versions by merging. When a keyed table's containers are
// sorted on a sort key that begins with the primary key's columns, the
// rows of one key are adjacent in the containers' merged order, so a
// k-way merge of their key and change columns resolves every key with
// one block of each container in memory: no key table, whatever share of
// the table changed. Superseded takes this path when the key table of
// the hash path would be large against the budget: a full mergeout of a
// table with many changes (its largest input no smaller than the others
// together) would otherwise need memory in proportion to the changes.

// mergeable reports whether cs can be resolved by merging (their sort
// keys equal, led by the primary key's columns) and should be: the key
// table the hash path would build is more than a quarter of the budget,
// or more than 1Mi rows without one.
func mergeable(cs []*Container, opts ResolveOptions) bool {
	if len(cs) < 2 {
		return false
	}
	sk, pk := cs[0].m.SortKey, cs[0].m.PrimaryKey
	if len(sk) < len(pk) {
		return false
	}
	for _, c := range cs[1:] {
		if !c.m.SortKey.Equal(sk) {
			return false
		}
	}
	for _, col := range sk[:len(pk)] {
		if !slices.Contains(pk, col.Name) {
			return false
		}
	}
	var total, largest int64
	for _, c := range cs {
		total += c.m.Rows
		largest = max(largest, c.m.Rows)
	}
	table := total - largest
	if opts.Budget == nil {
		return table > 1<<20
	}
	return table*(entryBytes+16) > opts.Budget.Limit()/4
}

// mergeCursor walks one container's key prefix and change columns in
// order, a block at a time.
type mergeCursor struct {
	c      int
	blocks []*changeBlockKeys
	next   int // block to read next
	cur    *changeBlockKeys
	j      int // row within cur
}

// changeBlockKeys is a block's normalized keys and change columns.
type changeBlockKeys struct {
	keys KeyBatch
	cb   *changeBlock
	row  int32 // the container's row of the block's first row
}

func (m *mergeCursor) key() []byte { return m.cur.keys.Key(m.j) }

func (m *mergeCursor) entry() keyEntry {
	return keyEntry{version: m.cur.cb.version(m.j), container: int32(m.c), row: m.cur.row + int32(m.j), marker: m.cur.cb.marker(m.j)}
}

type cursorHeap []*mergeCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(a, b int) bool {
	if d := bytes.Compare(h[a].key(), h[b].key()); d != 0 {
		return d < 0
	}
	return h[a].c < h[b].c
}
func (h cursorHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*mergeCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeRun resolves by merging the containers in their sort order.
func (r *resolver) mergeRun(ctx context.Context) error {
	sk := r.cs[0].m.SortKey[:len(r.cs[0].m.PrimaryKey)]
	enc, err := NewKeyEncoder(r.cs[0].schema, sk)
	if err != nil {
		return fmt.Errorf("resolve changed rows: %w", err)
	}
	idx, _ := sk.Indices(r.cs[0].schema)
	// Each container is read a block at a time as the merge reaches it.
	h := make(cursorHeap, 0, len(r.cs))
	readers := make([]*blockPuller, len(r.cs))
	defer func() {
		for _, p := range readers {
			if p != nil {
				p.close()
			}
		}
	}()
	for i, c := range r.cs {
		if c.m.Rows == 0 {
			continue
		}
		p, err := r.newPuller(i, idx, enc)
		if err != nil {
			return err
		}
		readers[i] = p
		m := &mergeCursor{c: i}
		if m.cur, err = p.pull(ctx); err != nil {
			return err
		}
		if m.cur != nil {
			h = append(h, m)
		}
	}
	heap.Init(&h)
	var key []byte
	var best keyEntry
	have := false
	settleKey := func() {
		if have {
			r.dropIfMarker(best)
		}
	}
	for h.Len() > 0 {
		m := h[0]
		e := m.entry()
		if e.version < 0 {
			return r.negative(e)
		}
		switch {
		case have && bytes.Equal(m.key(), key):
			if wins(e, best) {
				r.drop(int(best.container), best.row)
				best = e
			} else {
				r.drop(int(e.container), e.row)
			}
		default:
			settleKey()
			key = append(key[:0], m.key()...)
			best, have = e, true
		}
		m.j++
		if m.j == m.cur.cb.n {
			if m.cur, err = readers[m.c].pull(ctx); err != nil {
				return err
			}
			m.j = 0
			if m.cur == nil {
				heap.Pop(&h)
				continue
			}
		}
		heap.Fix(&h, 0)
	}
	settleKey()
	return r.finish()
}

// blockPuller reads one container's key prefix and change columns a block
// at a time, on demand.
type blockPuller struct {
	r      *resolver
	i      int
	enc    *KeyEncoder
	br     *BatchReader
	nkey   int
	change []int
	ver    int64
	cons   bool
	marks  bool
	next   int
	row    int32
}

func (r *resolver) newPuller(i int, keyCols []int, enc *KeyEncoder) (*blockPuller, error) {
	change, ver, constant, markers := r.changeColumns(i)
	p := &blockPuller{r: r, i: i, enc: enc, nkey: len(keyCols), change: change, ver: ver, cons: constant, marks: markers}
	br, err := r.cs[i].OpenColumns(append(slices.Clone(keyCols), change...))
	if err != nil {
		return nil, fmt.Errorf("resolve changed rows: %w", err)
	}
	p.br = br
	return p, nil
}

func (p *blockPuller) close() { p.br.Close() }

// pull returns the next block, nil after the last.
func (p *blockPuller) pull(ctx context.Context) (*changeBlockKeys, error) {
	if p.next >= p.br.NumBlocks() {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec, err := p.br.ReadBlock(p.next)
	if err != nil {
		return nil, fmt.Errorf("resolve changed rows: %w", err)
	}
	defer rec.Release()
	c := p.r.cs[p.i]
	arrs := rec.Columns()
	out := &changeBlockKeys{cb: &changeBlock{ver: p.ver, n: int(rec.NumRows())}, row: p.row}
	if err := p.enc.EncodeBatch(&out.keys, arrs[:p.nkey], 0, out.cb.n); err != nil {
		return nil, fmt.Errorf("resolve changed rows of container %s: %w", c.dir, err)
	}
	k := p.nkey
	ok := true
	if !p.cons {
		vers, ok1 := arrs[k].(*array.Int64)
		ok = ok1 && vers.NullN() == 0
		if ok {
			out.cb.vers = slices.Clone(vers.Int64Values())
		}
		k++
	}
	if ok && p.marks {
		dels, ok2 := arrs[k].(*array.Boolean)
		ok = ok2 && dels.NullN() == 0
		if ok {
			out.cb.marks = make([]bool, dels.Len())
			for j := range out.cb.marks {
				out.cb.marks[j] = dels.Value(j)
			}
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: container %s block %d: change columns are not int64 and bool without NULLs", ErrCorrupt, c.dir, p.next)
	}
	p.next++
	p.row += int32(out.cb.n)
	return out, nil
}
