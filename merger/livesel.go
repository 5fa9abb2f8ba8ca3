package merger

import (
	"context"
	"fmt"
	"sync"
)

// liveSel is the selection vector of every output row (the input each row
// comes from), filled by the key merge while gathers already read it: the
// overlapped plan. The key merge appends runs and publishes the rows
// appended so far once per output block; a gather waits until the rows it
// needs are published. Rows below the published mark are never written
// again, so readers and the writer share the slice without copying it.
type liveSel struct {
	sel []uint16
	n   int // rows appended; the key merge's goroutine only

	mu        sync.Mutex
	cond      sync.Cond
	published int  // rows readers may read
	closed    bool // no more rows will be published
}

func newLiveSel(rows int64) *liveSel {
	s := &liveSel{sel: make([]uint16, rows)}
	s.cond.L = &s.mu
	return s
}

// append records that the next count rows come from input. It fails when
// the key merge yields more rows than the inputs' manifests hold.
func (s *liveSel) append(input int, count int) error {
	if count > len(s.sel)-s.n {
		return fmt.Errorf("%w: the key columns hold more than the %d rows of the inputs' manifests", ErrMismatch, len(s.sel))
	}
	if input >= maxSelInputs {
		return fmt.Errorf("%w: input %d in a selection vector", ErrInternal, input)
	}
	v := uint16(input)
	for i := range s.sel[s.n : s.n+count] {
		s.sel[s.n+i] = v
	}
	s.n += count
	return nil
}

// publish lets readers read the rows appended so far.
func (s *liveSel) publish() {
	s.mu.Lock()
	s.published = s.n
	s.mu.Unlock()
	s.cond.Broadcast()
}

// close publishes the rows appended and wakes every reader for good; the
// key merge calls it however it ends.
func (s *liveSel) close() {
	s.mu.Lock()
	s.published = s.n
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// wait blocks until rows [0, end) are published and returns them, or
// returns the rows published so far (fewer than end) once the key merge has
// ended without them.
func (s *liveSel) wait(end int) []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.published < end && !s.closed {
		s.cond.Wait()
	}
	return s.sel[:min(end, s.published)]
}

// gatherLive drives gathers with slices of a selection vector the key merge
// is still filling.
func gatherLive(ctx context.Context, gathers []*columnGather, ls *liveSel, blockRows int, res reserver) error {
	groups, err := newSelGroups(len(gathers[0].srcs), blockRows, res)
	if err != nil {
		return err
	}
	defer res.Release(groupsBytes(len(gathers[0].srcs), blockRows))
	total := len(ls.sel)
	for off := 0; off < total; {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := off + min(blockRows-gathers[0].outRows, total-off)
		sel := ls.wait(end)
		if len(sel) < end {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%w: the key merge ended after %d of the %d rows of the inputs' manifests", ErrMismatch, len(sel), total)
		}
		gr := groups.group(sel[off:end])
		for _, g := range gathers {
			if err := g.takeSelGrouped(sel[off:end], gr); err != nil {
				return fmt.Errorf("merger: %w", err)
			}
		}
		off = end
	}
	return nil
}
