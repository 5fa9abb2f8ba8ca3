package walwriter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-db/strata/internal/fsutil"
)

// Commit pipeline. The encoder goroutine (encodeLoop) takes batches of
// requests, assigns LSNs, drops duplicates, computes deltas and frames
// records into a buffer; the syncer goroutine (syncLoop) writes each buffer
// with one pwrite, fdatasyncs it and then reports to the batch's requests.
// The two overlap: while one batch is being synced, the next is encoded.
// Items reach the syncer in order and it handles one at a time, so a
// request is acknowledged only after every record before it is durable.

// flushItem is one write and sync for the syncer.
type flushItem struct {
	file       *os.File
	segName    string
	off        int64
	buf        []byte
	reqs       []*request // reported after the sync; empty for a segment's last part of a batch
	closeAfter bool       // the segment is full: close it after the sync
	checkpoint LSN        // a checkpoint record in buf: write the checkpoint file after the sync
	lastLSN    LSN        // the last LSN assigned when the item was made
	// barrier, when set, is closed by the syncer on reaching the item: every
	// item before it has then been handled. Nothing else is set.
	barrier chan struct{}
}

// encodeLoop is the single goroutine that encodes batches. After a failed
// write it recovers (recoverFailure) before it encodes anything more.
func (w *WAL) encodeLoop() {
	defer close(w.flushes)
	var batch []*request
	for {
		if w.failure() != nil && !w.recoverFailure() {
			return
		}
		batch = w.takeBatch(batch[:0])
		if batch != nil && len(batch) == 0 {
			continue // a write failed while waiting
		}
		if batch == nil {
			// Closed and drained: wait for the last writes, which may
			// still fail and need writing again.
			w.barrier()
			if w.failure() != nil {
				continue
			}
			return
		}
		reqs := make([]*request, len(batch))
		copy(reqs, batch)
		clear(batch)
		if err := w.encodeBatch(reqs); err != nil {
			w.fail(err)
			w.flushes <- flushItem{reqs: reqs} // parked by the syncer
		}
	}
}

// encodeBatch encodes reqs and hands the result to the syncer, in one item
// or, when the batch fills the segment, in one item per segment touched.
func (w *WAL) encodeBatch(reqs []*request) error {
	buf := w.getBuffer()
	var ckpt LSN
	var err error
	checkpoint := func() (LSN, error) {
		if buf, err = w.ensureRoom(buf, 2*maxRecordHeader, &ckpt); err != nil {
			return 0, err
		}
		lsn := w.nextLSN
		w.nextLSN++
		buf = w.enc.appendCheckpoint(buf, lsn)
		w.cache.reset()
		w.sinceCheckpoint = 0
		ckpt = lsn
		w.stats.checkpoints.Add(1)
		return lsn, nil
	}
	for i, r := range reqs {
		if i%warmAhead == 0 {
			w.warm(reqs[i:min(i+warmAhead, len(reqs))])
		}
		if r.checkpoint {
			if r.lsn, err = checkpoint(); err != nil {
				return err
			}
			continue
		}
		if w.opts.CheckpointBytes > 0 && w.sinceCheckpoint >= w.opts.CheckpointBytes {
			if _, err = checkpoint(); err != nil {
				return err
			}
		}
		if lsn, dup := w.dedup.lookup(r.u.EventID, r.idHash); dup {
			r.lsn = lsn
			w.stats.duplicates.Add(1)
			continue
		}
		if buf, err = w.ensureRoom(buf, dataRecordBound(&r.u, r.table, r.imageLen), &ckpt); err != nil {
			return err
		}
		var old Row
		var entry *cacheEntry
		if !w.opts.DisableDelta {
			if entry = w.cache.lookup(r.table, r.u.Key, r.keyHash); entry != nil {
				old = entry.row
			}
		}
		r.lsn = w.nextLSN
		w.nextLSN++
		var a appended
		buf, a = w.enc.appendData(buf, r.lsn, &r.u, r.id, r.table, old, r.imageLen)
		switch {
		case w.opts.DisableDelta:
		case r.u.Delete:
			// The key's next record is a full image: a delta must not
			// be based on a row that no longer exists.
			if entry != nil {
				w.cache.evict(entry)
			}
		default:
			w.cache.store(entry, r.keyHash, r.table, r.u.Key, r.u.Row)
		}
		w.dedup.add(r.u.EventID, r.idHash, r.lsn)
		w.stats.records.Add(1)
		switch a.kind {
		case KindDelta:
			w.stats.deltas.Add(1)
		case KindDelete:
		default:
			w.stats.fullImages.Add(1)
		}
		w.stats.bytes.Add(uint64(a.defBytes + a.recordBytes))
		w.sinceCheckpoint += int64(a.defBytes + a.recordBytes)
		w.stats.fullImageBytes.Add(uint64(a.defBytes + a.fullImageLen))
	}
	w.flushes <- flushItem{file: w.seg, segName: w.segName, off: w.segOff, buf: buf, reqs: reqs, checkpoint: ckpt, lastLSN: w.nextLSN - 1}
	w.segOff += int64(len(buf))
	return nil
}

// ensureRoom makes sure n more bytes fit in the current segment after buf.
// When they do not, buf goes to the syncer as the segment's last write, a
// new segment is started and an empty buffer returned.
func (w *WAL) ensureRoom(buf []byte, n int, ckpt *LSN) ([]byte, error) {
	if w.segOff+int64(len(buf))+int64(n) <= w.opts.SegmentSize {
		return buf, nil
	}
	w.flushes <- flushItem{file: w.seg, segName: w.segName, off: w.segOff, buf: buf, closeAfter: true, checkpoint: *ckpt, lastLSN: w.nextLSN - 1}
	*ckpt = 0
	w.seg = nil // the syncer closes it
	if err := w.startSegment(); err != nil {
		return w.getBuffer(), err
	}
	return w.getBuffer(), nil
}

// getBuffer returns an empty buffer the syncer is done with, or a new one.
func (w *WAL) getBuffer() []byte {
	select {
	case b := <-w.buffers:
		return b[:0]
	default:
		return make([]byte, 0, 1<<20)
	}
}

// syncLoop is the single goroutine that writes, syncs and reports. Once a
// write has failed it writes nothing more and parks the requests of that
// item and every later one for the encoder to write again.
func (w *WAL) syncLoop() {
	defer close(w.done)
	for it := range w.flushes {
		if it.barrier != nil {
			close(it.barrier)
			continue
		}
		err := w.failure()
		if err == nil && it.file != nil {
			if err = w.writeAndSync(it); err != nil {
				w.fail(err)
			} else {
				w.durableSeg, w.durableOff = it.segName, it.off+int64(len(it.buf))
			}
		}
		if err == nil && it.checkpoint != 0 {
			// The records are durable; only the pointer to the checkpoint
			// failed. The batch is written again after recovery, where its
			// updates are found as duplicates of what is durable.
			if err = writeCheckpointFile(w.dir, it.checkpoint); err != nil {
				w.fail(fmt.Errorf("%w: %w", ErrFailed, err))
			} else {
				w.stats.checkpointLSN.Store(uint64(it.checkpoint))
				w.notifyChanged()
			}
		}
		if it.closeAfter {
			if cerr := it.file.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("%w: close segment %s: %w", ErrFailed, it.segName, cerr)
				w.fail(err)
			}
			if err == nil {
				// Its last batch is durable and nothing more is written to
				// it: the segment is sealed.
				first, _ := parseSegmentName(it.segName)
				w.seal(first)
			}
		}
		if it.buf != nil {
			select {
			case w.buffers <- it.buf:
			default:
			}
		}
		if len(it.reqs) > 0 {
			if err == nil {
				w.stats.batches.Add(1)
				w.stats.lastLSN.Store(uint64(it.lastLSN))
				w.report(it.reqs, nil)
			} else {
				w.mu.Lock()
				w.parked = append(w.parked, it.reqs...)
				w.mu.Unlock()
				select { // the encoder may be waiting for requests
				case w.wake <- struct{}{}:
				default:
				}
			}
		}
	}
	// The encoder has stopped (it closed flushes): its segment is ours.
	if w.seg != nil {
		w.sealAtClose()
		if err := w.seg.Close(); err != nil {
			w.fail(fmt.Errorf("%w: close segment %s: %w", ErrFailed, w.segName, err))
		}
	}
}

// sealAtClose seals the segment being written when the WAL closes cleanly
// and it holds records: cut to the end of its last durable batch (the
// preallocated zeros after it, as the next Open would) and synced, it is
// never written again, since Open continues in a new segment. A segment
// holding no record is left for Open to remove. A failed cut only leaves
// the segment unsealed until the next Open.
func (w *WAL) sealAtClose() {
	if w.failure() != nil || w.durableSeg != w.segName || w.durableOff <= segmentHeaderSize {
		return
	}
	err := w.seg.Truncate(w.durableOff)
	if err == nil {
		err = w.seg.Sync()
	}
	if err != nil {
		w.log.Warn("cannot cut the last segment at close; the next open does", "segment", w.segName, "err", err)
		return
	}
	first, _ := parseSegmentName(w.segName)
	w.seal(first)
}

// barrier returns once the syncer has handled every item sent before it.
// Only the encoder calls it.
func (w *WAL) barrier() {
	ch := make(chan struct{})
	w.flushes <- flushItem{barrier: ch}
	<-ch
}

func (w *WAL) writeAndSync(it flushItem) error {
	if len(it.buf) == 0 {
		return nil
	}
	buf, ferr := it.buf, error(nil)
	if f := w.opts.Faults; f != nil && f.Write != nil {
		var n int
		if n, ferr = f.Write(it.segName, it.off, len(buf)); ferr != nil {
			buf = buf[:min(max(n, 0), len(buf))]
		}
	}
	if len(buf) > 0 {
		if _, err := it.file.WriteAt(buf, it.off); err != nil {
			return fmt.Errorf("%w: write %d bytes to segment %s at %d: %w", ErrFailed, len(it.buf), it.segName, it.off, err)
		}
	}
	if ferr != nil {
		return fmt.Errorf("%w: write %d bytes to segment %s at %d: %w", ErrFailed, len(it.buf), it.segName, it.off, ferr)
	}
	if f := w.opts.Faults; f != nil && f.Sync != nil {
		if err := f.Sync(it.segName); err != nil {
			return fmt.Errorf("%w: fdatasync segment %s: %w", ErrFailed, it.segName, err)
		}
	}
	start := time.Now()
	if err := datasync(it.file); err != nil {
		return fmt.Errorf("%w: fdatasync segment %s: %w", ErrFailed, it.segName, err)
	}
	synced := time.Since(start)
	w.stats.fsyncs.Add(1)
	if w.opts.OnSync != nil {
		records := 0
		for _, r := range it.reqs {
			if !r.checkpoint {
				records++
			}
		}
		w.opts.OnSync(SyncStats{Records: records, Bytes: len(it.buf), Sync: synced})
	}
	return nil
}

// report tells every request of a batch its outcome and recycles it.
func (w *WAL) report(reqs []*request, err error) {
	for _, r := range reqs {
		if err != nil {
			r.done(0, err)
		} else {
			r.done(r.lsn, nil)
		}
		if !r.checkpoint {
			*r = request{}
			w.requests.Put(r)
		}
	}
}

func (w *WAL) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// fail puts the WAL in the failed state, in which nothing more is written
// until the encoder has recovered; the first error sticks.
func (w *WAL) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.log.Error("WAL write failed; appends wait while it retries", "err", err)
		w.failed, w.failedAt, w.lastErr, w.attempts = err, time.Now(), nil, 0
		w.stats.writeFailures.Add(1)
	}
}

// recoverFailure makes the WAL write again after a failure, retrying with
// backoff until it can or the WAL is closed. It returns true when the
// parked requests are back at the front of the queue, false when the WAL
// was closed first: every pending request has then been told ErrFailed.
// Only the encoder calls it.
func (w *WAL) recoverFailure() bool {
	w.barrier() // the syncer has parked everything sent before
	backoff := 10 * time.Millisecond
	for {
		err := w.reopenAfterFailure()
		w.mu.Lock()
		if err == nil {
			n := len(w.parked)
			w.queue = append(w.parked, w.queue...)
			w.parked = nil
			w.log.Info("WAL writes again; rewriting the appends that were not durable",
				"failed_for", time.Since(w.failedAt).Round(time.Millisecond), "retries", w.attempts, "rewriting", n, "segment", w.segName)
			w.failed, w.lastErr, w.attempts = nil, nil, 0
			w.stats.recoveries.Add(1)
			w.mu.Unlock()
			return true
		}
		w.attempts++
		w.lastErr = err
		if w.closed {
			w.gaveUp = true
			w.failed = fmt.Errorf("%w: closed while unable to write: %w", ErrFailed, err)
			pending := append(w.parked, w.queue...)
			w.parked, w.queue = nil, nil
			final := w.failed
			w.mu.Unlock()
			w.log.Error("WAL closed while it cannot write; pending appends are not durable", "err", err, "pending", len(pending))
			w.report(pending, final)
			return false
		}
		w.mu.Unlock()
		w.log.Warn("WAL still cannot write; will retry", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-w.closing:
		}
		backoff = min(2*backoff, max(w.opts.RetryBackoff, 10*time.Millisecond))
	}
}

// reopenAfterFailure brings the directory and the encoder's state back to
// the last durable record, as if the WAL had been closed there and opened
// again, and starts a new segment.
//
// Nothing after the last successful fdatasync is trusted, even what reads
// back fine: after a failed fsync Linux may have dropped the dirty pages
// and marked them clean, so retrying the fsync can succeed with the data
// never written (PostgreSQL's "fsyncgate"), and a partially written batch
// is in the segment too. So the WAL never retries an fsync: it closes the
// segment, cuts it back to the end of the last durable batch and syncs
// that, removes any segment started after it, rebuilds the next LSN and the
// dedup window from what is on disk (Open's recovery) with an empty image
// cache, and writes the requests that were not durable again, in a new
// segment. A failure on the way is returned, and the whole is tried again.
func (w *WAL) reopenAfterFailure() error {
	if w.seg != nil {
		_ = w.seg.Close() // its data past the durable end is discarded
		w.seg = nil
	}
	if w.durableSeg == "" {
		// Nothing was written since Open, whose recovery left the
		// directory clean: only a segment is missing.
		return w.startAfterFailure()
	}
	// The segment may be gone: an earlier attempt's recovery removes it
	// when it holds no record.
	path := filepath.Join(w.dir, w.durableSeg)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("walwriter: reopen segment %s: %w", w.durableSeg, err)
	default:
		err = f.Truncate(w.durableOff)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("walwriter: cut segment %s back to its last durable record at %d: %w", w.durableSeg, w.durableOff, err)
		}
	}
	first, _ := parseSegmentName(w.durableSeg)
	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	removed := false
	for _, s := range segs {
		if s.First > first {
			if err := os.Remove(filepath.Join(w.dir, s.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("walwriter: remove segment %s started after the failure: %w", s.Name, err)
			}
			removed = true
		}
	}
	if removed {
		if err := fsutil.SyncDir(w.dir); err != nil {
			return fmt.Errorf("walwriter: %w", err)
		}
	}
	w.cache.reset()
	w.dedup.reset()
	w.sinceCheckpoint = 0
	if err := w.recover(); err != nil {
		return err
	}
	return w.startAfterFailure()
}

func (w *WAL) startAfterFailure() error {
	if err := w.startSegment(); err != nil {
		return err
	}
	w.durableSeg, w.durableOff = w.segName, segmentHeaderSize
	return nil
}

// startSegment creates the segment that starts at nextLSN and resets the
// per-segment state.
func (w *WAL) startSegment() error {
	if f := w.opts.Faults; f != nil && f.Create != nil {
		if err := f.Create(segmentName(w.nextLSN)); err != nil {
			return fmt.Errorf("%w: create segment %s: %w", ErrFailed, segmentName(w.nextLSN), err)
		}
	}
	f, err := createSegment(w.dir, w.nextLSN, w.opts.SegmentSize)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	w.seg = f
	w.segName = segmentName(w.nextLSN)
	w.segOff = segmentHeaderSize
	w.enc = newSegmentEncoder(w.nextLSN)
	w.stats.segments.Add(1)
	w.log.Debug("started segment", "segment", w.segName)
	return nil
}
