package merger

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
)

// recordSource streams one input's record batches in row order;
// *columnar.BatchReader is one.
type recordSource interface {
	Next() (arrow.RecordBatch, error) // io.EOF after the last batch
}

// kwayInput is one input's cursor: its current batch and the batch's keys.
type kwayInput struct {
	src      recordSource
	name     string // for errors: the container
	rec      arrow.RecordBatch
	keys     columnar.KeyBatch
	reserved int64 // bytes of keys counted in the budget
	pos      int   // next row of rec
	batches  int   // batches loaded, for errors
	done     bool
}

// kway is the k-way merge at the heart of every plan: a loser tree over the
// normalized keys of each input's current batch. next hands out runs of
// consecutive rows of one input that come next in merged order; the merge is
// stable (ties go to the lower input).
type kway struct {
	enc     *columnar.KeyEncoder
	keyCols []int // positions of the key columns in the sources' batches
	in      []kwayInput
	tree    *loserTree
	res     reserver
	pending int           // input whose batch ran out at the end of the last run, or -1
	scratch []arrow.Array // key columns of a batch
}

func newKway(enc *columnar.KeyEncoder, keyCols []int, srcs []recordSource, names []string, res reserver) (*kway, error) {
	if res == nil {
		res = nopReserver{}
	}
	m := &kway{
		enc:     enc,
		keyCols: keyCols,
		in:      make([]kwayInput, len(srcs)),
		tree:    newLoserTree(len(srcs)),
		res:     res,
		pending: -1,
		scratch: make([]arrow.Array, len(keyCols)),
	}
	for i, s := range srcs {
		m.in[i].src = s
		if i < len(names) {
			m.in[i].name = names[i]
		}
		if err := m.load(i); err != nil {
			m.close()
			return nil, err
		}
	}
	m.tree.init()
	return m, nil
}

// load moves input i to its next non-empty batch and gives the tree its
// first key, or marks the input exhausted.
func (m *kway) load(i int) error {
	in := &m.in[i]
	if in.rec != nil {
		in.rec.Release()
		in.rec = nil
	}
	for !in.done {
		rec, err := in.src.Next()
		if errors.Is(err, io.EOF) {
			in.done = true
			break
		}
		if err != nil {
			return fmt.Errorf("merge input %d (%s), batch %d: %w", i, in.name, in.batches, err)
		}
		in.batches++
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		for j, c := range m.keyCols {
			m.scratch[j] = rec.Column(c)
		}
		if err := m.enc.EncodeBatch(&in.keys, m.scratch, 0, int(rec.NumRows())); err != nil {
			rec.Release()
			return fmt.Errorf("merge input %d (%s), batch %d: encode keys: %w", i, in.name, in.batches-1, err)
		}
		if err := m.account(in); err != nil {
			rec.Release()
			return fmt.Errorf("merge input %d (%s): keys of batch %d: %w", i, in.name, in.batches-1, err)
		}
		in.rec, in.pos = rec, 0
		m.tree.set(i, in.keys.Key(0))
		return nil
	}
	m.tree.exhaust(i)
	in.keys = columnar.KeyBatch{}
	return m.account(in)
}

// account brings the budget's count of input's key buffers up to date.
func (m *kway) account(in *kwayInput) error {
	now := int64(cap(in.keys.Data)) + 16*int64(cap(in.keys.Offsets))
	switch {
	case now > in.reserved:
		if err := m.res.Reserve(now - in.reserved); err != nil {
			return err
		}
	case now < in.reserved:
		m.res.Release(in.reserved - now)
	}
	in.reserved = now
	return nil
}

// next returns the next run: rows [start, start+n) of rec, from input, with
// 1 <= n <= maxRows. rec stays valid until the following call. At the end it
// returns io.EOF.
func (m *kway) next(maxRows int) (input int, rec arrow.RecordBatch, start, n int, err error) {
	if p := m.pending; p >= 0 {
		m.pending = -1
		if err := m.load(p); err != nil {
			return 0, nil, 0, 0, err
		}
		m.tree.fix(p)
	}
	w, ok := m.tree.winner()
	if !ok {
		return 0, nil, 0, 0, io.EOF
	}
	in := &m.in[w]
	start = in.pos
	rows := int(in.rec.NumRows())
	for {
		in.pos++
		n++
		if in.pos == rows {
			// Keep the batch for the caller; load the next one on the next call.
			m.pending = w
			break
		}
		m.tree.keys[w] = in.keys.Key(in.pos)
		m.tree.fix(w)
		if n == maxRows {
			break
		}
		if nw, _ := m.tree.winner(); nw != w {
			break
		}
	}
	return w, in.rec, start, n, nil
}

// comparisons returns the key comparisons made so far.
func (m *kway) comparisons() int64 { return m.tree.comparisons }

// close releases every batch and key buffer.
func (m *kway) close() {
	for i := range m.in {
		in := &m.in[i]
		if in.rec != nil {
			in.rec.Release()
			in.rec = nil
		}
		m.res.Release(in.reserved)
		in.reserved = 0
		in.keys = columnar.KeyBatch{}
	}
}
