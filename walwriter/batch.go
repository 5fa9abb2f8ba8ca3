package walwriter

import "time"

// takeBatch waits for queued requests and takes up to a batch of them; it
// returns nil when the WAL is closed and drained, and an empty batch when a
// write has failed and nothing is taken (the encoder must recover first).
func (w *WAL) takeBatch(batch []*request) []*request {
	var deadline time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	bytes := 0
	for {
		w.mu.Lock()
		n := 0
		for n < len(w.queue) && len(batch) < w.opts.MaxBatchRecords && bytes < w.opts.MaxBatchBytes {
			r := w.queue[n]
			batch = append(batch, r)
			bytes += r.imageLen
			n++
		}
		rest := copy(w.queue, w.queue[n:])
		clear(w.queue[rest:])
		w.queue = w.queue[:rest]
		closed := w.closed
		failed := w.failed != nil
		w.mu.Unlock()

		if len(batch) == 0 && failed && !closed {
			return make([]*request, 0)
		}
		full := len(batch) >= w.opts.MaxBatchRecords || bytes >= w.opts.MaxBatchBytes
		if len(batch) > 0 && (full || closed || w.opts.BatchWindow == 0) {
			return batch
		}
		if len(batch) == 0 && closed {
			return nil
		}
		if len(batch) > 0 {
			if deadline.IsZero() {
				deadline = time.Now().Add(w.opts.BatchWindow)
				timer = time.NewTimer(w.opts.BatchWindow)
			}
			select {
			case <-w.wake:
			case <-timer.C:
				return w.takeMore(batch, bytes)
			}
			continue
		}
		<-w.wake
	}
}

// takeMore adds whatever is queued to batch, within the batch limits.
func (w *WAL) takeMore(batch []*request, bytes int) []*request {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for n < len(w.queue) && len(batch) < w.opts.MaxBatchRecords && bytes < w.opts.MaxBatchBytes {
		batch = append(batch, w.queue[n])
		bytes += w.queue[n].imageLen
		n++
	}
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	return batch
}
