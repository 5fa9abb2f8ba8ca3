package walwriter

import (
	"fmt"
	"os"
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
}

// encodeLoop is the single goroutine that encodes batches.
func (w *WAL) encodeLoop() {
	defer close(w.flushes)
	var batch []*request
	for {
		batch = w.takeBatch(batch[:0])
		if batch == nil {
			return
		}
		reqs := make([]*request, len(batch))
		copy(reqs, batch)
		clear(batch)
		if err := w.failure(); err != nil {
			w.flushes <- flushItem{reqs: reqs}
			continue
		}
		if err := w.encodeBatch(reqs); err != nil {
			w.fail(err)
			w.flushes <- flushItem{reqs: reqs}
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
		if !w.opts.DisableDelta {
			w.cache.store(entry, r.keyHash, r.table, r.u.Key, r.u.Row)
		}
		w.dedup.add(r.u.EventID, r.idHash, r.lsn)
		w.stats.records.Add(1)
		if a.kind == KindDelta {
			w.stats.deltas.Add(1)
		} else {
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

// syncLoop is the single goroutine that writes, syncs and reports.
func (w *WAL) syncLoop() {
	defer close(w.done)
	for it := range w.flushes {
		err := w.failure()
		if err == nil && it.file != nil {
			if err = w.writeAndSync(it); err != nil {
				w.fail(err)
			}
		}
		if err == nil && it.checkpoint != 0 {
			if err = writeCheckpointFile(w.dir, it.checkpoint); err != nil {
				w.fail(err)
			} else {
				w.stats.checkpointLSN.Store(uint64(it.checkpoint))
			}
		}
		if it.closeAfter {
			if cerr := it.file.Close(); cerr != nil && err == nil {
				w.fail(fmt.Errorf("%w: close segment %s: %v", ErrFailed, it.segName, cerr))
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
			}
			w.report(it.reqs, err)
		}
	}
	// The encoder has stopped (it closed flushes): its segment is ours.
	if w.seg != nil {
		if err := w.seg.Close(); err != nil {
			w.fail(fmt.Errorf("%w: close segment %s: %v", ErrFailed, w.segName, err))
		}
	}
}

func (w *WAL) writeAndSync(it flushItem) error {
	if len(it.buf) == 0 {
		return nil
	}
	if _, err := it.file.WriteAt(it.buf, it.off); err != nil {
		return fmt.Errorf("%w: write %d bytes to segment %s at %d: %v", ErrFailed, len(it.buf), it.segName, it.off, err)
	}
	if err := datasync(it.file); err != nil {
		return fmt.Errorf("%w: fdatasync segment %s: %v", ErrFailed, it.segName, err)
	}
	w.stats.fsyncs.Add(1)
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

// fail puts the WAL in the failed state; the first error sticks.
func (w *WAL) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.log.Error("WAL write failed; refusing further appends", "err", err)
		w.failed = err
	}
}

// startSegment creates the segment that starts at nextLSN and resets the
// per-segment state.
func (w *WAL) startSegment() error {
	f, err := createSegment(w.dir, w.nextLSN, w.opts.SegmentSize)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFailed, err)
	}
	w.seg = f
	w.segName = segmentName(w.nextLSN)
	w.segOff = segmentHeaderSize
	w.enc = newSegmentEncoder(w.nextLSN)
	w.stats.segments.Add(1)
	w.log.Debug("started segment", "segment", w.segName)
	return nil
}
