package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/internal/fsutil"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// How changes reach the data (ARCHITECTURE.md, "Changes"):
//
// An event of a keyed table is logged in the WAL with its version (its
// UPDATES stream sequence) and, once durable, added to its table's batch.
// Every flush interval each table's batch is written as one sorted
// container of the keys it changed (applier.Batch) and made live by the
// scheduler's apply request, which records in the same compare-and-set
// how far this WAL's changes of the table are applied. Only then are the
// batch's events acked: an ack means the change is visible. A batch that
// cannot be written or applied stays, joined by the next changes, and is
// tried again at the next flush.
//
// After a restart the WAL is read from the local applied floor (the APPLIED
// file) and every versioned record past the position the catalog holds
// for its table is applied again before any event is taken. Segments that
// neither that replay nor the WAL's last checkpoint needs are removed as
// the floor moves (and the archive, if any, has them). A change
// applied twice (the apply's reply lost) is harmless: readers count rows
// of one key and version once.

// appliedFile is the applier's state in the WAL directory: the WAL's ID
// (the name its positions have in the catalog) and the LSN through which
// every change it logged is applied. It is written whole (temporary name,
// fsync, rename) after each flush that moves it.
const appliedFile = "APPLIED"

type appliedState struct {
	WAL string `json:"wal"`
	LSN uint64 `json:"lsn"`
}

// readAppliedState returns the WAL directory's applier state, making a new
// WAL ID the first time.
func readAppliedState(walDir string) (appliedState, error) {
	path := filepath.Join(walDir, appliedFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var b [6]byte
		if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
			return appliedState{}, err
		}
		st := appliedState{WAL: "wal-" + hex.EncodeToString(b[:])}
		return st, fsutil.WriteFile(path, mustJSON(st))
	}
	if err != nil {
		return appliedState{}, fmt.Errorf("applier state: %w", err)
	}
	var st appliedState
	if err := json.Unmarshal(data, &st); err != nil || messages.ValidName(st.WAL) != nil {
		return appliedState{}, fmt.Errorf("applier state %s: malformed (%q): remove it to apply the whole WAL again", path, data)
	}
	return st, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// pendingChange is a durable change waiting to be applied, with the
// event to ack once it is (none for a change replayed from the WAL).
type pendingChange struct {
	msg     jetstream.Msg
	trackID uint64
	changes int // the changes of a change batch; 0 for an update event's one
}

// tableBatch is a table's changes waiting for the next flush.
type tableBatch struct {
	t      *applier.Table
	batch  *applier.Batch
	from   walwriter.LSN // lowest LSN in the batch
	to     walwriter.LSN // highest
	oldest time.Time     // when its oldest change became durable
	events []pendingChange
	// frozen is the frozen floor whose changes were dropped from the
	// batch (dropFrozen); it names the container written again.
	frozen uint64
}

// changeApplier batches durable changes by table and applies them every
// flush interval.
type changeApplier struct {
	wal    *walwriter.WAL
	walDir string
	state  appliedState
	data   string
	store  store.Store
	api    *apiclient.Client
	log    *slog.Logger
	ack    func(pendingChange) // acks the event and stops tracking it
	m      *metrics

	mu      sync.Mutex
	batches map[string]*tableBatch
	last    walwriter.LSN // highest LSN added
	flushMu sync.Mutex    // one flush at a time
	floor   atomic.Uint64 // state.LSN, for the metrics
	failing error         // why the last flush left changes unapplied
}

// add queues a durable change of t logged at lsn.
func (a *changeApplier) add(t *applier.Table, c applier.Change, lsn walwriter.LSN, ev pendingChange) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.batches[t.Name]
	if b == nil {
		b = &tableBatch{t: t, batch: t.NewBatch(), from: lsn, oldest: time.Now()}
		a.batches[t.Name] = b
	}
	b.batch.Add(c)
	b.from = min(b.from, lsn)
	b.to = max(b.to, lsn)
	if ev.msg != nil {
		b.events = append(b.events, ev)
	}
	a.last = max(a.last, lsn)
}

// addAll queues the durable changes of one change batch, cs[i] logged at
// lsns[i], all of one table: the batch's event is acked once every one of
// them is applied. Added under one lock, they join one flush's batch, or
// (if a flush takes the batch between) an earlier flush's batch, which is
// requeued in front of this one if it fails.
func (a *changeApplier) addAll(t *applier.Table, cs []applier.Change, lsns []walwriter.LSN, ev pendingChange) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.batches[t.Name]
	if b == nil {
		b = &tableBatch{t: t, batch: t.NewBatch(), from: lsns[0], oldest: time.Now()}
		a.batches[t.Name] = b
	}
	for i, c := range cs {
		b.batch.Add(c)
		b.from = min(b.from, lsns[i])
		b.to = max(b.to, lsns[i])
		a.last = max(a.last, lsns[i])
	}
	b.events = append(b.events, ev)
}

// run flushes every half interval until stop is closed: a change waits
// at most half the interval for its flush, which leaves the other half
// for writing and applying its batch, so it is visible within the
// interval while batches apply in less than half of it.
func (a *changeApplier) run(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*interval+30*time.Second)
		a.flush(ctx)
		cancel()
	}
}

// health is the "apply" check of /healthz: failing while changes older
// than maxLag wait to be applied.
func (a *changeApplier) health(maxLag time.Duration) func() error {
	return func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if lag := a.lagLocked(); lag > maxLag {
			return fmt.Errorf("changes waiting %s to be applied (over %s): %v", lag.Round(time.Second), maxLag, a.failing)
		}
		return nil
	}
}

// lagRecords is how many WAL records past the applied floor were logged:
// the apply lag in WAL positions.
func (a *changeApplier) lagRecords() float64 {
	a.mu.Lock()
	last := uint64(a.last)
	a.mu.Unlock()
	return float64(last - min(last, a.floor.Load()))
}

func (a *changeApplier) lagLocked() time.Duration {
	var lag time.Duration
	for _, b := range a.batches {
		lag = max(lag, time.Since(b.oldest))
	}
	return lag
}

// flush applies every table's batch, one container and one apply request
// each. It returns the error of the first batch left unapplied.
func (a *changeApplier) flush(ctx context.Context) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	batches := a.batches
	a.batches = map[string]*tableBatch{}
	through := a.last
	a.mu.Unlock()
	var first error
	for name, b := range batches {
		start := time.Now()
		err := a.applyBatch(ctx, b)
		if err != nil {
			a.log.Warn("changes not applied yet; trying again at the next flush", "table", name, "changes", b.batch.Len(), "err", err)
			a.requeue(b)
			first = cmpErr(first, err)
			continue
		}
		a.m.applied.Add(float64(b.batch.Len()))
		a.m.applyBatches.Inc()
		a.m.applySeconds.Observe(time.Since(start).Seconds())
		a.m.visibleLag.Observe(time.Since(b.oldest).Seconds())
		for _, ev := range b.events {
			a.ack(ev)
		}
	}
	a.mu.Lock()
	a.failing = first
	floor := through
	for _, b := range a.batches {
		if b.from <= through {
			floor = min(floor, b.from-1)
		}
	}
	a.mu.Unlock()
	if uint64(floor) > a.state.LSN {
		st := appliedState{WAL: a.state.WAL, LSN: uint64(floor)}
		if err := fsutil.WriteFile(filepath.Join(a.walDir, appliedFile), mustJSON(st)); err != nil {
			a.log.Warn("write the applier state", "err", err)
		} else {
			a.state = st
			a.floor.Store(st.LSN)
			a.trim(walwriter.LSN(st.LSN + 1))
		}
	}
	return first
}

// trim removes the WAL segments that neither a replay from the applied
// floor nor the last checkpoint needs (and the archive has, when there is
// one): without it the WAL would grow for good.
func (a *changeApplier) trim(from walwriter.LSN) {
	if a.wal == nil {
		return
	}
	if removed, err := a.wal.RemoveSegmentsNotNeededFrom(from); err != nil {
		a.log.Warn("remove WAL segments already applied", "err", err)
	} else if len(removed) > 0 {
		a.log.Info("removed WAL segments already applied", "segments", len(removed), "applied_through", from-1)
	}
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// requeue puts a batch that was not applied back in front of the changes
// that came since: versions decide which change of a key wins, so the
// order they are joined in does not matter.
func (a *changeApplier) requeue(b *tableBatch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.batches[b.t.Name]
	if cur == nil {
		a.batches[b.t.Name] = b
		return
	}
	for _, c := range cur.batch.Changes() {
		b.batch.Add(c)
	}
	b.from = min(b.from, cur.from)
	b.to = max(b.to, cur.to)
	b.events = append(b.events, cur.events...)
	a.batches[b.t.Name] = b
}

// applyBatch writes b as a container and asks the scheduler to make it
// live with this WAL's position b.to. Refused for changes at or below the
// table's frozen floor (a full mergeout wrote the versions through it as
// 0), it drops them from the batch (dropFrozen) and applies the rest.
func (a *changeApplier) applyBatch(ctx context.Context, b *tableBatch) error {
	for range 3 { // the floor can rise between two attempts
		floor, err := a.applyOnce(ctx, b)
		if floor == 0 {
			return err
		}
		if a.dropFrozen(b, floor) == 0 {
			return err // refused, and nothing at or below the floor
		}
		if b.batch.Len() == 0 {
			return nil // nothing left to apply: the events are acked
		}
	}
	return fmt.Errorf("apply changes of %s: refused for the frozen floor three times", b.t.Name)
}

// dropFrozen removes from b its changes at or below floor, the version
// through which a full mergeout froze the table, and returns how many.
// Their events are past the walwriter consumer's ack floor, which the
// frozen floor was when the mergeout was made: applied already (a change
// applied twice), or dead-lettered after MaxDeliver while this WAL still
// held them (their producer was told so); applied now they would beat the
// newer changes frozen into their keys' rows. Their events stay in the
// batch, acked with it.
func (a *changeApplier) dropFrozen(b *tableBatch, floor uint64) int {
	kept := b.t.NewBatch()
	var versions []uint64
	for _, c := range b.batch.Changes() {
		if c.Version > floor {
			kept.Add(c)
		} else {
			versions = append(versions, c.Version)
		}
	}
	if len(versions) == 0 {
		return 0
	}
	b.batch, b.frozen = kept, floor
	a.m.droppedFrozen.Add(float64(len(versions)))
	const shown = 100
	a.log.Warn("late changes at or below the table's frozen floor dropped (dead-lettered or applied already)",
		"table", b.t.Name, "frozen_through", floor, "dropped", len(versions), "versions", versions[:min(len(versions), shown)],
		"more", max(0, len(versions)-shown), "left", kept.Len())
	return len(versions)
}

// applyOnce writes b as a container and applies it. A refusal for the
// table's frozen floor returns the floor (the refused container is
// removed); any other outcome returns 0.
func (a *changeApplier) applyOnce(ctx context.Context, b *tableBatch) (uint64, error) {
	t := b.t
	id := fmt.Sprintf("%s-%d", a.state.WAL, b.to)
	if b.frozen > 0 {
		// Other changes than the refused container of this position.
		id = fmt.Sprintf("%s-%d-f%d", a.state.WAL, b.to, b.frozen)
	}
	dir := columnar.ContainerDir(a.data, t.Name, t.Projection, id)
	m, err := b.batch.Write(dir, id, applier.WriteOptions{})
	if errors.Is(err, columnar.ErrExists) {
		// Written by an attempt whose apply did not answer: the same
		// changes (the same position), so the same container.
		m, err = columnar.ReadManifest(dir)
	}
	if err != nil {
		return 0, fmt.Errorf("write changes of %s as container %s: %w", t.Name, id, err)
	}
	if a.store != nil {
		// Committed already by an attempt whose apply was not answered:
		// the same changes (Upload's ErrExists is columnar's, not the
		// store's object-level one).
		if _, err := store.Upload(ctx, a.store, dir, t.Name, t.Projection, id); err != nil && !errors.Is(err, columnar.ErrExists) {
			return 0, fmt.Errorf("upload changes of %s as container %s: %w", t.Name, id, err)
		}
	}
	req := &messages.ApplyRequest{Table: t.Name, Projection: t.Projection, WAL: a.state.WAL, To: uint64(b.to),
		Container: messages.ContainerRef{Table: t.Name, Projection: t.Projection, ID: id, Rows: m.Rows, Bytes: m.CompressedBytes()},
		RequestID: apiclient.NewRequestID()}
	var rep messages.ApplyReply
	if err := a.api.Call(ctx, messages.SubjectAPIApply, req, &rep); err != nil {
		return 0, fmt.Errorf("apply changes of %s: %w", t.Name, err)
	}
	if rep.Error != nil {
		err := fmt.Errorf("apply changes of %s: refused: %s", t.Name, rep.Error.Message)
		if rep.Error.Code == messages.ErrCodeFrozen && rep.FrozenThrough > 0 {
			// Never live: the scheduler's orphan sweep takes a copy in
			// the store.
			if rerr := os.RemoveAll(dir); rerr != nil {
				a.log.Warn("remove a refused container of changes", "container", id, "err", rerr)
			}
			return rep.FrozenThrough, err
		}
		return 0, err
	}
	if rep.Repeat {
		a.log.Info("changes were applied already", "table", t.Name, "container", id, "applied", rep.Applied)
	}
	return 0, nil
}

// replay applies again what the WAL logged after the applied floor and
// the catalog does not show applied: the changes of the batches a stopped
// or killed walwriter had not applied. It runs before any event is taken,
// and flushes until they are applied or ctx ends.
func (a *changeApplier) replay(ctx context.Context, tables *tableCache) error {
	r, err := walwriter.NewReader(a.walDir, walwriter.LSN(a.state.LSN+1))
	if err != nil {
		return fmt.Errorf("replay the WAL from %d: %w", a.state.LSN+1, err)
	}
	defer r.Close()
	applied := map[string]uint64{}
	known := map[string]*applier.Table{}
	var n int
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("replay the WAL: %w", err)
		}
		if rec.LSN <= walwriter.LSN(a.state.LSN) || rec.Kind == walwriter.KindCheckpoint || rec.Version == 0 {
			continue // applied, or logged before changes were applied (no version)
		}
		t, ok := known[rec.Table]
		if !ok {
			t, err = tables.get(ctx, rec.Table)
			if errors.Is(err, errNotKeyed) {
				a.log.Warn("WAL records of a table whose changes cannot be applied; skipped", "table", rec.Table, "err", err)
				t = nil
			} else if err != nil {
				return err
			}
			known[rec.Table] = t
			if t != nil {
				if applied[rec.Table], err = a.appliedPosition(ctx, t); err != nil {
					return err
				}
			}
		}
		if t == nil || uint64(rec.LSN) <= applied[rec.Table] {
			continue
		}
		c := applier.Change{Version: rec.Version, Delete: rec.Kind == walwriter.KindDelete, Key: rec.Key}
		if !c.Delete {
			c.Row = rec.Row
		}
		a.add(t, c, rec.LSN, pendingChange{})
		n++
	}
	if n == 0 {
		return nil
	}
	a.log.Info("applying changes logged before the restart", "changes", n, "from", a.state.LSN+1)
	for {
		if err := a.flush(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply the changes logged before the restart: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// appliedPosition is the position the catalog holds for this WAL's
// changes of t.
func (a *changeApplier) appliedPosition(ctx context.Context, t *applier.Table) (uint64, error) {
	var rep messages.CatalogReply
	if err := a.api.Call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: t.Name, Projection: t.Projection}, &rep); err != nil {
		return 0, fmt.Errorf("table %s: read the catalog: %w", t.Name, err)
	}
	for _, p := range rep.Projections {
		if p.Table == t.Name && p.Projection == t.Projection {
			return p.Applied[a.state.WAL], nil
		}
	}
	return 0, nil
}
