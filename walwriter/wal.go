package walwriter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Update is one update event as the WAL logs it.
type Update struct {
	EventID string // unique per event; a repeated ID is written once
	Table   string // a registered table
	Key     []byte // the row's key, opaque bytes
	Row     Row    // the new row, one value per column of the table
	// Old is the row before the update as the producer saw it. It is
	// optional and only validated: deltas are computed against the image
	// the WAL itself last logged for the key, which replay is sure to have.
	Old Row
}

// WAL is a write-ahead log directory open for appending. Its methods are
// safe for concurrent use.
type WAL struct {
	dir  string
	opts Options
	log  *slog.Logger

	tablesMu sync.RWMutex
	tables   map[string]*Table

	mu     sync.Mutex
	queue  []*request
	closed bool
	failed error
	wake   chan struct{}
	done   chan struct{}

	// Owned by the committer goroutine.
	seg      *os.File
	segName  string
	segOff   int64
	enc      *segmentEncoder
	nextLSN  LSN
	cache    *imageCache
	dedup    *dedupWindow
	buf      []byte
	pendingC LSN // a checkpoint written in the current batch

	stats statCounters
}

type request struct {
	u          Update
	table      *Table
	imageLen   int
	id         eventID
	checkpoint bool
	done       func(LSN, error)
	lsn        LSN
}

// requestPool recycles requests once their callback has run.
var requestPool = sync.Pool{New: func() any { return new(request) }}

// Open opens (creating if needed) the WAL in dir, recovering its last
// segment, and starts a new segment for appends.
func Open(dir string, opts Options) (*WAL, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &WAL{
		dir:    dir,
		opts:   opts,
		log:    opts.Logger.With("wal", dir),
		tables: make(map[string]*Table),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		cache:  newImageCache(opts.DeltaCacheBytes),
		dedup:  newDedupWindow(opts.DedupWindow),
	}
	w.stats.rejected = make(map[string]*atomic.Uint64)
	for _, r := range []string{ReasonUnknownTable, ReasonColumns, ReasonOversized, ReasonInvalid} {
		w.stats.rejected[r] = new(atomic.Uint64)
	}
	for _, t := range opts.Tables {
		if err := w.RegisterTable(t); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("walwriter: create %s: %w", dir, err)
	}
	if err := w.recover(); err != nil {
		return nil, err
	}
	if err := w.startSegment(); err != nil {
		return nil, err
	}
	go w.commitLoop()
	return w, nil
}

// Dir returns the WAL's directory.
func (w *WAL) Dir() string { return w.dir }

// RegisterTable adds a table whose updates are accepted. Registering a
// table again with the same columns is a no-op; with other columns, an error.
func (w *WAL) RegisterTable(t Table) error {
	if err := t.validate(); err != nil {
		return err
	}
	w.tablesMu.Lock()
	defer w.tablesMu.Unlock()
	if old, ok := w.tables[t.Name]; ok {
		if !old.sameColumns(t) {
			return fmt.Errorf("walwriter: table %q already registered with columns %v, not %v", t.Name, old.Columns, t.Columns)
		}
		return nil
	}
	w.tables[t.Name] = &Table{Name: t.Name, Columns: append([]ColumnType(nil), t.Columns...)}
	return nil
}

// Append logs u and returns its LSN once the record is durable. A
// duplicate event ID returns the LSN of the record already written. When
// ctx ends first, Append returns ctx's error and the update may or may not
// become durable (a retry with the same event ID is safe).
func (w *WAL) Append(ctx context.Context, u Update) (LSN, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	type result struct {
		lsn LSN
		err error
	}
	ch := make(chan result, 1)
	if err := w.AppendAsync(u, func(lsn LSN, err error) { ch <- result{lsn, err} }); err != nil {
		return 0, err
	}
	select {
	case r := <-ch:
		return r.lsn, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// AppendAsync validates u and queues it; done is called exactly once, from
// the WAL's commit goroutine, when the record is durable (err nil) or cannot
// be. done must return quickly. u's slices must not change until done is
// called. A rejected update returns a *RejectError and done is not called.
func (w *WAL) AppendAsync(u Update, done func(LSN, error)) error {
	r := requestPool.Get().(*request)
	*r = request{u: u, done: done}
	if err := w.validate(r); err != nil {
		requestPool.Put(r)
		return err
	}
	r.id = parseEventID(u.EventID)
	if err := w.enqueue(r); err != nil {
		requestPool.Put(r)
		return err
	}
	return nil
}

// Checkpoint writes a checkpoint record and, once it is durable, the
// checkpoint file. Every key's next record is a full image, so replay can
// start at the returned LSN with nothing but the WAL from there.
func (w *WAL) Checkpoint(ctx context.Context) (LSN, error) {
	ch := make(chan error, 1)
	var lsn LSN
	r := &request{checkpoint: true, done: func(l LSN, err error) { lsn = l; ch <- err }}
	if err := w.enqueue(r); err != nil {
		return 0, err
	}
	select {
	case err := <-ch:
		return lsn, err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (w *WAL) enqueue(r *request) error {
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return ErrClosed
	case w.failed != nil:
		err := w.failed
		w.mu.Unlock()
		return err
	}
	w.queue = append(w.queue, r)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

func (w *WAL) validate(r *request) error {
	u := &r.u
	reject := func(reason, format string, args ...any) error {
		w.stats.rejected[reason].Add(1)
		return &RejectError{Reason: reason, EventID: u.EventID, Table: u.Table, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case u.EventID == "":
		return reject(ReasonInvalid, "empty event ID")
	case len(u.EventID) > maxEventIDBytes:
		return reject(ReasonOversized, "event ID of %d bytes exceeds %d", len(u.EventID), maxEventIDBytes)
	case len(u.Key) == 0:
		return reject(ReasonInvalid, "empty key")
	case len(u.Key) > maxKeyBytes:
		return reject(ReasonOversized, "key of %d bytes exceeds %d", len(u.Key), maxKeyBytes)
	}
	w.tablesMu.RLock()
	t := w.tables[u.Table]
	w.tablesMu.RUnlock()
	if t == nil {
		return reject(ReasonUnknownTable, "table is not registered")
	}
	if err := t.checkRow(u.Row); err != nil {
		return reject(ReasonColumns, "new row: %v", err)
	}
	if u.Old != nil {
		if err := t.checkRow(u.Old); err != nil {
			return reject(ReasonColumns, "old row: %v", err)
		}
	}
	r.table = t
	r.imageLen = rowImageLen(u.Row)
	if r.imageLen > w.opts.MaxRowBytes {
		return reject(ReasonOversized, "row image of %d bytes exceeds %d", r.imageLen, w.opts.MaxRowBytes)
	}
	return nil
}

// Close writes what is queued, stops the commit goroutine and closes the
// current segment. Calls after Close return ErrClosed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	err := w.seg.Close()
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("walwriter: close segment %s: %w", w.segName, err)
	}
	if failed != nil && !errors.Is(failed, ErrClosed) {
		return failed
	}
	return nil
}

// commitLoop is the single goroutine that encodes, writes and syncs.
func (w *WAL) commitLoop() {
	defer close(w.done)
	var batch []*request
	for {
		batch = w.takeBatch(batch[:0])
		if batch == nil {
			return
		}
		w.commit(batch)
		clear(batch)
	}
}

// takeBatch waits for queued requests and takes up to a batch of them; it
// returns nil when the WAL is closed and drained.
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
		w.mu.Unlock()

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

// commit encodes batch, writes it with one write and one fdatasync per
// segment touched, and reports the outcome to every request.
func (w *WAL) commit(batch []*request) {
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	if failed == nil {
		failed = w.writeBatch(batch)
		if failed != nil {
			w.log.Error("WAL write failed; refusing further appends", "err", failed)
			w.mu.Lock()
			w.failed = failed
			w.mu.Unlock()
		}
	}
	for _, r := range batch {
		if failed != nil {
			r.done(0, failed)
		} else {
			r.done(r.lsn, nil)
		}
		if !r.checkpoint {
			*r = request{}
			requestPool.Put(r)
		}
	}
}

func (w *WAL) writeBatch(batch []*request) error {
	buf := w.buf[:0]
	var err error
	w.pendingC = 0
	for _, r := range batch {
		if r.checkpoint {
			if buf, err = w.ensureRoom(buf, 2*maxRecordHeader); err != nil {
				return err
			}
			r.lsn = w.nextLSN
			w.nextLSN++
			buf = w.enc.appendCheckpoint(buf, r.lsn)
			w.cache.reset()
			w.pendingC = r.lsn
			w.stats.checkpoints.Add(1)
			continue
		}
		if lsn, dup := w.dedup.lookup(r.u.EventID); dup {
			r.lsn = lsn
			w.stats.duplicates.Add(1)
			continue
		}
		if buf, err = w.ensureRoom(buf, dataRecordBound(&r.u, r.table, r.imageLen)); err != nil {
			return err
		}
		var old Row
		var entry *cacheEntry
		var hash uint64
		if !w.opts.DisableDelta {
			if entry, hash = w.cache.lookup(r.table, r.u.Key); entry != nil {
				old = entry.row
			}
		}
		r.lsn = w.nextLSN
		w.nextLSN++
		var a appended
		buf, a = w.enc.appendData(buf, r.lsn, &r.u, r.id, r.table, old, r.imageLen)
		if !w.opts.DisableDelta {
			w.cache.store(entry, hash, r.table, r.u.Key, r.u.Row)
		}
		w.dedup.add(r.u.EventID, r.lsn, w.opts.DedupWindow)
		w.stats.records.Add(1)
		if a.kind == KindDelta {
			w.stats.deltas.Add(1)
		} else {
			w.stats.fullImages.Add(1)
		}
		w.stats.bytes.Add(uint64(a.defBytes + a.recordBytes))
		w.stats.fullImageBytes.Add(uint64(a.defBytes + a.fullImageLen))
	}
	if err := w.flush(buf); err != nil {
		return err
	}
	w.buf = buf[:0]
	w.stats.batches.Add(1)
	w.stats.lastLSN.Store(uint64(w.nextLSN - 1))
	if w.pendingC != 0 {
		if err := writeCheckpointFile(w.dir, w.pendingC); err != nil {
			return err
		}
		w.stats.checkpointLSN.Store(uint64(w.pendingC))
	}
	return nil
}

// ensureRoom makes sure n more bytes fit in the current segment after buf,
// flushing buf and starting a new segment when they do not.
func (w *WAL) ensureRoom(buf []byte, n int) ([]byte, error) {
	if w.segOff+int64(len(buf))+int64(n) <= w.opts.SegmentSize {
		return buf, nil
	}
	if err := w.flush(buf); err != nil {
		return buf, err
	}
	if err := w.seg.Close(); err != nil {
		return buf[:0], fmt.Errorf("walwriter: close segment %s: %w", w.segName, err)
	}
	if err := w.startSegment(); err != nil {
		return buf[:0], err
	}
	return buf[:0], nil
}

// flush writes buf at the end of the current segment and syncs it.
func (w *WAL) flush(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if _, err := w.seg.WriteAt(buf, w.segOff); err != nil {
		return fmt.Errorf("%w: write %d bytes to segment %s at %d: %v", ErrFailed, len(buf), w.segName, w.segOff, err)
	}
	if err := datasync(w.seg); err != nil {
		return fmt.Errorf("%w: fdatasync segment %s: %v", ErrFailed, w.segName, err)
	}
	w.segOff += int64(len(buf))
	w.stats.fsyncs.Add(1)
	return nil
}

// startSegment creates the segment that starts at nextLSN and resets the
// per-segment state.
func (w *WAL) startSegment() error {
	f, err := createSegment(w.dir, w.nextLSN, w.opts.SegmentSize)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFailed, err)
	}
	w.seg = f
	w.segName = filepath.Base(f.Name())
	w.segName = segmentName(w.nextLSN)
	w.segOff = segmentHeaderSize
	w.enc = newSegmentEncoder(w.nextLSN)
	w.cache.reset()
	w.stats.segments.Add(1)
	w.log.Debug("started segment", "segment", w.segName)
	return nil
}
