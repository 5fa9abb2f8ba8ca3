package walwriter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/messages"
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
	// Version, if not zero, is the change's version (the UPDATES stream
	// sequence of its event), logged with it so that changes replayed from
	// the WAL are applied in the order their events were published.
	Version uint64
	// Delete logs the key's deletion: Row and Old must be nil.
	Delete bool
}

// WAL is a write-ahead log directory open for appending. Its methods are
// safe for concurrent use.
type WAL struct {
	dir  string
	opts Options
	log  *slog.Logger

	// tables maps names to registered tables. It is replaced, never
	// changed, so producers read it without a lock; tablesMu serializes
	// RegisterTable.
	tablesMu sync.Mutex
	tables   atomic.Pointer[map[string]*Table]

	mu     sync.Mutex
	queue  []*request
	closed bool
	// failed is the write failure the WAL is recovering from, nil while it
	// writes; lastErr the error of the last attempt to recover, attempts
	// their number. parked holds, in order, the requests of the items the
	// syncer did not make durable since the failure, for the encoder to
	// write again (see recoverFailure). gaveUp is set when the WAL was
	// closed while failing: failed is then final.
	failed   error
	failedAt time.Time
	lastErr  error
	attempts int
	parked   []*request
	gaveUp   bool
	wake     chan struct{}
	closing  chan struct{} // closed by Close
	done     chan struct{}

	flushes chan flushItem // encoder to syncer
	buffers chan []byte    // syncer back to encoder

	// Owned by the encoder goroutine.
	seg     *os.File
	segName string
	segOff  int64
	enc     *segmentEncoder
	nextLSN LSN
	// sinceCheckpoint counts record bytes since the last checkpoint (or
	// Open), for automatic checkpoints.
	sinceCheckpoint int64
	cache           *imageCache
	dedup           *dedupWindow
	warmSink        byte // keeps warm's loads from being optimized away

	// The end of the last durable batch: segment durableSeg is good up to
	// durableOff, and every segment before it is whole. Owned by the
	// syncer; the encoder reads and resets it only when the syncer is idle
	// (after a barrier, or before the goroutines start).
	durableSeg string
	durableOff int64

	stats    statCounters
	requests sync.Pool // of *request, recycled once their callback has run

	// sealedThrough is the first LSN of the newest sealed segment: every
	// segment whose first LSN is at most it is sealed (see Segments). It
	// only grows. changed is signalled, never blocking, when it grows or
	// the checkpoint file is replaced; removeGuard, if set, vetoes
	// RemoveObsoleteSegments (SetRemoveGuard).
	sealedThrough atomic.Uint64
	changed       chan struct{}
	removeGuard   atomic.Pointer[func(segment string) bool]
}

type request struct {
	u          Update
	table      *Table
	imageLen   int
	id         eventID
	idHash     uint64 // dedupWindow.hash of the event ID
	keyHash    uint64 // imageCache.hash of table and key
	checkpoint bool
	done       func(LSN, error)
	lsn        LSN
}

// Open opens (creating if needed) the WAL in dir, recovering its last
// segment, and starts a new segment for appends.
func Open(dir string, opts Options) (*WAL, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &WAL{
		requests: sync.Pool{New: func() any { return new(request) }},
		dir:      dir,
		opts:     opts,
		log:      opts.Logger.With("wal", dir),
		wake:     make(chan struct{}, 1),
		changed:  make(chan struct{}, 1),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		// One item being synced, one queued: encoding overlaps syncing.
		flushes: make(chan flushItem, 1),
		buffers: make(chan []byte, 4),
		cache:   newImageCache(opts.DeltaCacheBytes),
		dedup:   newDedupWindow(opts.DedupWindow),
	}
	w.tables.Store(&map[string]*Table{})
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
		// A full or failing disk is transient: open, report it in Health
		// and retry as after any failed write (durableSeg "" means nothing
		// was written since Open).
		if !errors.Is(err, ErrFailed) {
			return nil, err
		}
		w.fail(err)
	} else {
		w.durableSeg, w.durableOff = w.segName, segmentHeaderSize
	}
	go w.encodeLoop()
	go w.syncLoop()
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
	tables := *w.tables.Load()
	if old, ok := tables[t.Name]; ok {
		if !old.sameColumns(t) {
			return fmt.Errorf("walwriter: table %q already registered with columns %v, not %v", t.Name, old.Columns, t.Columns)
		}
		return nil
	}
	next := make(map[string]*Table, len(tables)+1)
	for name, t := range tables {
		next[name] = t
	}
	next[t.Name] = &Table{Name: t.Name, Columns: append([]messages.RowType(nil), t.Columns...)}
	w.tables.Store(&next)
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
	r := w.requests.Get().(*request)
	*r = request{u: u, done: done}
	if err := w.validate(r); err != nil {
		w.requests.Put(r)
		return err
	}
	// Work that needs no encoder state is done here, on the producers.
	r.id = parseEventID(u.EventID)
	r.idHash = w.dedup.hash(u.EventID)
	r.keyHash = w.cache.hash(r.table, u.Key)
	if err := w.enqueue(r); err != nil {
		w.requests.Put(r)
		return err
	}
	return nil
}

// Check returns the *RejectError AppendAsync would return for u, without
// queueing it: a caller logging several updates as one unit (a change
// batch) checks them all before it queues any.
func (w *WAL) Check(u Update) error {
	r := request{u: u}
	return w.validate(&r)
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
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	// While the WAL cannot write, requests wait in the queue until it can
	// again (or is closed); the caller sees it in Health.
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
	t := (*w.tables.Load())[u.Table]
	if t == nil {
		return reject(ReasonUnknownTable, "table is not registered")
	}
	if u.Delete {
		if u.Row != nil || u.Old != nil {
			return reject(ReasonInvalid, "a delete carries no row")
		}
		r.table = t
		return nil
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
// current segment. When everything was written, a current segment holding
// records is cut after its last record and sealed (Segments reports it so
// after Close), so an archiver's next pass copies it. Calls after Close
// return ErrClosed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	close(w.closing)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	return w.failure()
}

// Health returns nil while the WAL writes, and while a write, sync or
// segment creation has failed, an error saying since when and why (it wraps
// the failure's cause, such as syscall.ENOSPC). Appends made meanwhile wait
// and become durable once the WAL writes again.
func (w *WAL) Health() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		return nil
	}
	if w.gaveUp {
		return w.failed
	}
	if w.lastErr != nil && w.attempts > 0 {
		return fmt.Errorf("cannot write since %s, %d retries failed, the last with %w (first failure: %v)",
			w.failedAt.UTC().Format(time.RFC3339), w.attempts, w.lastErr, w.failed)
	}
	return fmt.Errorf("cannot write since %s: %w", w.failedAt.UTC().Format(time.RFC3339), w.failed)
}
