package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/messages"
)

// The last stage's buckets, streamed: when the query's last stage is
// dealt to range buckets, its buckets' results are not written to the
// spill directory and read back. Result reads them from memory, bucket by
// bucket, while the next buckets are evaluated: bucketWorkers goroutines
// take the buckets in order, and each bucket holds a slot, its share of
// the grant, from the start of its evaluation until the reader is done
// with its rows. A bucket evaluated on the external path (one that does
// not fit its share) takes every slot, as it takes the whole grant.
// Slots are taken in bucket order, so a bucket never waits for a slot
// that only a later bucket's reader would free.

// bucketStream reads the results of a stage's buckets in bucket order.
type bucketStream struct {
	b       *buckets
	q       *messages.WindowQuery
	todo    []int
	ready   []chan bucketResult // by index into todo, one result each
	st      *Stats              // the Result's, completed as buckets end
	limit   int64
	workers int
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex
	cond  *sync.Cond
	turn  int  // index into todo of the next bucket to take its slots
	free  int  // slots not held
	ended bool // Close was called

	i   int           // index into todo of the bucket being read
	cur *bucketResult // its result
	err error         // the error Next returned, returned again
}

// bucketResult is one bucket's evaluation: its result in memory (or
// spilled, from the external path) and the slots it holds.
type bucketResult struct {
	res   *Result
	slots int
	err   error
}

// stream starts evaluating the buckets for a Result to read, which gets
// its figures as each bucket ends (st). LIMIT applies as rows are read.
func (b *buckets) stream(ctx context.Context, st *Stats, limit int64) *bucketStream {
	s := &bucketStream{b: b, st: st, limit: limit, q: b.query(), todo: b.filled()}
	s.cond = sync.NewCond(&s.mu)
	s.ready = make([]chan bucketResult, len(s.todo))
	for i := range s.ready {
		s.ready[i] = make(chan bucketResult, 1)
	}
	s.workers = min(bucketWorkers, max(b.o.Threads, 1), max(len(s.todo), 1))
	s.free = s.workers
	ctx, s.cancel = context.WithCancel(ctx)
	var next atomic.Int64
	s.wg.Add(s.workers)
	for range s.workers {
		go func() {
			defer s.wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(s.todo) {
					return
				}
				r := s.evaluate(ctx, i)
				s.ready[i] <- r
				if r.err != nil {
					return
				}
			}
		}()
	}
	return s
}

// evaluate evaluates bucket todo[i] once it has its slots.
func (s *bucketStream) evaluate(ctx context.Context, i int) bucketResult {
	b := s.b
	need, err := b.need(s.q, s.todo[i])
	if err != nil {
		s.pass(i)
		return bucketResult{err: err}
	}
	slots, external := 1, need > b.fit()
	if external {
		slots = s.workers
	}
	if !s.acquire(i, slots) {
		return bucketResult{err: fmt.Errorf("windower: bucket %d: %w", s.todo[i], context.Cause(ctx))}
	}
	share, threads := b.avail/int64(s.workers)*int64(slots), max(b.o.Threads/s.workers, 1)*slots
	res, _, err := b.evaluateBucket(ctx, s.q, s.todo[i], share, threads, external)
	if err == nil && res == nil {
		// Its results repeat strings longer than planned: the external
		// path, in the share it holds (taking more slots could wait for a
		// later bucket's reader, who waits for this bucket).
		res, _, err = b.evaluateBucket(ctx, s.q, s.todo[i], share, threads, true)
	}
	if err != nil {
		s.release(slots)
		return bucketResult{err: err}
	}
	return bucketResult{res: res, slots: slots}
}

// acquire waits for bucket i's turn and n free slots, and takes them; it
// returns false if the stream was closed meanwhile.
func (s *bucketStream) acquire(i, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.ended && (s.turn != i || s.free < n) {
		s.cond.Wait()
	}
	if s.ended {
		return false
	}
	s.turn++
	s.free -= n
	s.cond.Broadcast()
	return true
}

// pass gives up bucket i's turn without taking slots.
func (s *bucketStream) pass(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.ended && s.turn != i {
		s.cond.Wait()
	}
	s.turn++
	s.cond.Broadcast()
}

func (s *bucketStream) release(n int) {
	s.mu.Lock()
	s.free += n
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *bucketStream) Next() (arrow.RecordBatch, error) {
	if s.err != nil {
		return nil, s.err
	}
	rec, err := s.next()
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return rec, err
}

func (s *bucketStream) next() (arrow.RecordBatch, error) {
	for {
		if s.limit > 0 && s.st.Rows >= s.limit {
			return nil, io.EOF
		}
		if s.cur == nil {
			if s.i >= len(s.todo) {
				return nil, io.EOF
			}
			r := <-s.ready[s.i]
			if r.err != nil {
				return nil, r.err
			}
			s.cur = &r
		}
		rec, err := s.cur.res.Next()
		if errors.Is(err, io.EOF) {
			s.endBucket()
			continue
		}
		if err != nil {
			return nil, err
		}
		if s.limit > 0 && s.st.Rows+rec.NumRows() > s.limit {
			cut := rec.NewSlice(0, s.limit-s.st.Rows)
			rec.Release()
			rec = cut
		}
		s.st.Rows += rec.NumRows()
		return rec, nil
	}
}

// endBucket lets go of the bucket being read and its slots, and adds its
// figures.
func (s *bucketStream) endBucket() {
	bst := s.cur.res.Stats()
	s.cur.res.Close()
	s.release(s.cur.slots)
	s.cur = nil
	s.i++
	s.st.Partitions += bst.Partitions
	s.st.SpilledBytes += bst.SpilledBytes
	s.st.PeakBytes = max(s.st.PeakBytes, s.b.o.Budget.Peak())
}

// Close stops the evaluation of the buckets not yet read and lets go of
// every result.
func (s *bucketStream) Close() error {
	s.cancel()
	s.mu.Lock()
	s.ended = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	if s.cur != nil {
		s.cur.res.Close()
		s.cur = nil
	}
	for ; s.i < len(s.todo); s.i++ {
		select {
		case r := <-s.ready[s.i]:
			if r.res != nil {
				r.res.Close()
			}
		default:
		}
	}
	return nil
}
