package scheduler

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/strata-db/strata/messages"
)

// Publisher sends what the scheduler decides: jobs to workers and, for jobs
// the scheduler itself fails (a queue timeout), their failed event. In
// production it publishes to JetStream with Nats-Msg-Id set to the job ID,
// so publishing a job twice delivers it once.
type Publisher interface {
	// PublishJob publishes job (a *messages.MergeoutJob, a
	// *messages.WindowJob, ...) on subject, deduplicated by jobID.
	PublishJob(ctx context.Context, subject, jobID string, job messages.Message) error
	PublishEvent(ctx context.Context, ev *messages.JobEvent) error
	// PublishCancel tells the workers to stop a running job (cancel.go);
	// not stored: the scheduler sends it again until the job ends.
	PublishCancel(ctx context.Context, n *messages.CancelNotice) error
}

// Storage is the data directory as the scheduler uses it; every name it
// passes is resolved inside the data directory (columnar.DataDir in
// production), so a name can never reach outside it. With containers in a
// store, the directories are key prefixes and their modification time the
// newest object's under each.
type Storage interface {
	// CheckContainer checks a committed container (its manifest names this
	// table, projection and ID; its files have the manifest's sizes and
	// header checksums) and returns what its manifest says of it: rows,
	// bytes on disk, primary key. A missing or corrupt container gives an
	// error wrapping ErrBadOutput.
	CheckContainer(table, projection, id string) (ContainerInfo, error)
	// RemoveContainer deletes a container; a missing one is not an error.
	// Removing a container again finishes a removal of it that a crash
	// interrupted (collectDead drops a dead container from the catalog
	// only once it is removed, so a scheduler that restarts does that).
	RemoveContainer(table, projection, id string) error
	// ReadDir lists a directory (nil if missing); RemoveAll removes an
	// entry and all under it; RemoveEmpty removes an empty directory.
	ReadDir(elems ...string) ([]fs.DirEntry, error)
	RemoveAll(elems ...string) error
	RemoveEmpty(elems ...string) error
	// RemoveUncommitted deletes what uploads of container table/projection/id
	// left beside its commit, last modified before cutoff, and returns the
	// names of what it deleted: in a store, the upload attempts its commit
	// does not name (a worker killed mid-upload, the loser of two uploads);
	// a data directory, whose commits are renames, has none.
	RemoveUncommitted(table, projection, id string, cutoff time.Time) ([]string, error)
}

// ContainerInfo is what the scheduler takes from a checked container's
// manifest, never from a request or an event.
type ContainerInfo struct {
	Rows, Bytes int64
	// PrimaryKey names the key columns of a keyed table's container; empty
	// for an append-only table's.
	PrimaryKey []string
	// Changes are a keyed container's change statistics (the manifest's
	// "changes"); nil when it has none.
	Changes *ChangeInfo
}

// ChangeInfo is a keyed container's change statistics: the least and
// greatest version of its rows and how many are delete markers (columnar
// package doc, Format). An apply is refused when MinVersion is at or below
// the table's frozen floor (apply.go).
type ChangeInfo struct {
	MinVersion int64 `json:"min_version"`
	MaxVersion int64 `json:"max_version"`
	Markers    int64 `json:"markers"`
}

// Options configures a Scheduler. Zero values take the defaults.
type Options struct {
	// Data is the data directory containers live under. Nil (tests only)
	// disables removing dead and orphaned containers and checking job
	// outputs: a done claim is then taken with its inputs' row count.
	Data   Storage
	Strata StrataOptions
	// Pools are created in the pools bucket when missing. Default DefaultPools().
	Pools []messages.PoolConfig
	// OrphanGrace is how old a directory the catalog does not name, or an
	// upload no commit names, must be before it is removed at start;
	// younger ones may be a load or a mergeout still writing. Default 1h.
	OrphanGrace time.Duration
	// ReserveLease is how long a reservation of container numbers holds
	// unless renewed (reserve.go). Default 10m.
	ReserveLease     time.Duration
	KeepOperations   int // rows of the operations table kept; default 10000
	KeepApplies      int // rows of the applies log kept (operations.go); default 1000
	KeepAcquisitions int // rows of the acquisitions table kept; default 10000
	// KeepResults is how many window result tables are kept; older ones
	// are dropped (containers deleted once no job reads them). Default 100.
	KeepResults int
	Clock       Clock
	Logger      *slog.Logger
	// ChangeFloor returns the version (UPDATES stream sequence) through
	// which every change of every keyed table is applied, visible in the
	// live containers or dead-lettered: in production the ack floor of the
	// walwriter's durable consumer. A mergeout of every live container of
	// a keyed projection drops the delete markers at or below it
	// (messages.MergeoutJob.DropMarkersThrough): no row they delete can
	// arrive later. Nil, or an error, keeps every marker. It is called
	// with the scheduler's lock held, bounded by changeFloorTimeout.
	ChangeFloor func(ctx context.Context) (int64, error)
}

func (o Options) withDefaults() Options {
	o.Strata = o.Strata.withDefaults()
	if o.Pools == nil {
		o.Pools = DefaultPools()
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = time.Hour
	}
	if o.ReserveLease <= 0 {
		o.ReserveLease = 10 * time.Minute
	}
	if o.KeepOperations <= 0 {
		o.KeepOperations = 10000
	}
	if o.KeepAcquisitions <= 0 {
		o.KeepAcquisitions = 10000
	}
	if o.KeepResults <= 0 {
		o.KeepResults = 100
	}
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Scheduler decides what runs: it keeps the catalog, chooses mergeouts by
// strata, admits jobs into resource pools, and learns from job events when
// to swap containers and release memory. Its methods are safe for
// concurrent use; they are serialized.
type Scheduler struct {
	mu      sync.Mutex
	opts    Options
	log     *slog.Logger
	catalog *Catalog
	pools   poolStore
	adm     *Admission
	pub     Publisher
	ops     *operationLog
	applies *applyLog // the applies log (operations.go)
	// where is the projection whose catalog entry holds each pending job.
	where map[string]projKey
	// unpublished are granted jobs whose publish failed; Tick retries them.
	unpublished map[string]bool
	// accepted is the worker holding each in-flight job's latest delivery,
	// from its accepted event (kept in the job's pending entry too).
	accepted map[string]delivery
	// inflight are the client requests with an ID being carried out, so a
	// resend waits for the first rather than running again (requests.go).
	inflight singleflight.Group
	// registering counts, by "<table>/<projection>/<id>", the containers
	// registrations are checking: the orphan sweep leaves them alone.
	registering map[string]int
	// failing are jobs failed (with the reason) whose catalog entry could
	// not be written then; Tick settles them again.
	failing map[string]string
	// cancels are the running jobs told to stop (cancel.go).
	cancels map[string]cancelling
	// results are the window result tables, by table (results.go).
	results resultTables
}

// delivery is one worker's hold on a job: the worker that reported it
// accepted delivery n of the job message.
type delivery struct {
	worker string
	n      uint64
}

type projKey struct{ table, projection string }

// New loads the pools and the catalog, removes orphaned container
// directories, rebuilds the running state (grants held, jobs queued) from the
// catalog's pending jobs, publishes granted jobs again (the publisher
// dedupes by job ID), and starts any mergeout the strata call for. Events
// the scheduler missed while down are then fed to HandleEvent (in production
// the EVENTS durable consumer redelivers what it never acked).
func New(ctx context.Context, catalogKV, poolsKV KV, pub Publisher, opts Options) (*Scheduler, error) {
	opts = opts.withDefaults()
	s := &Scheduler{
		opts:        opts,
		log:         opts.Logger,
		catalog:     NewCatalog(catalogKV),
		pools:       poolStore{kv: withRetries(poolsKV)},
		pub:         pub,
		ops:         newOperationLog(opts.KeepOperations),
		applies:     newApplyLog(opts.KeepApplies),
		where:       map[string]projKey{},
		unpublished: map[string]bool{},
		accepted:    map[string]delivery{},
		registering: map[string]int{},
		failing:     map[string]string{},
		cancels:     map[string]cancelling{},
	}
	cfgs, err := s.pools.load(ctx, opts.Pools)
	if err != nil {
		return nil, err
	}
	if s.adm, err = NewAdmission(cfgs, opts.KeepAcquisitions); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.recover(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Scheduler) now() time.Time { return s.opts.Clock.Now() }

// recover rebuilds in-memory state from the catalog, rewriting entries
// of an older format first.
func (s *Scheduler) recover(ctx context.Context) error {
	states, err := s.catalog.List(ctx, "")
	if err != nil {
		return err
	}
	now := s.now()
	type queued struct {
		p PendingJob
		j job
	}
	var requeue []queued
	var cancelled []PendingJob // queued when cancelled: failed once recovered
	bodies := map[string]job{}
	for i, st := range states {
		if st.legacy {
			if states[i], err = s.catalog.Update(ctx, st.Table, st.Projection, func(*ProjectionState) error { return nil }); err != nil {
				return fmt.Errorf("recover: rewrite the catalog entry of %s.%s: %w", st.Table, st.Projection, err)
			}
			s.log.Info("catalog entry rewritten in the current format", "table", st.Table, "projection", st.Projection, "version", catalogVersion)
			st = states[i]
		}
		for _, p := range st.Pending {
			j, err := s.catalog.Job(ctx, st.Table, st.Projection, &p)
			if err != nil {
				// Left pending (its reads kept), neither queued nor published.
				s.log.Error("recover pending job", "job", p.JobID, "err", err)
				continue
			}
			bodies[p.JobID] = j
			s.where[p.JobID] = projKey{st.Table, st.Projection}
			if p.Worker != "" {
				s.accepted[p.JobID] = delivery{p.Worker, p.Delivery}
			}
			op := s.ops.upsert(operationOf(st, &p, j))
			if p.Cancel != "" && p.Granted {
				s.cancels[p.JobID] = cancelling{reason: p.Cancel, at: now} // told again at the next Tick
			}
			if p.Granted {
				if err := s.adm.Restore(p.JobID, p.Grant, time.Unix(0, p.GrantedAt)); err != nil {
					return fmt.Errorf("recover job %s: %w", p.JobID, err)
				}
				op.Status = messages.StatusRunning
				op.Start = p.GrantedAt
				s.unpublished[p.JobID] = true // publish again; deduped by job ID
			} else if p.Cancel != "" {
				cancelled = append(cancelled, p)
			} else {
				requeue = append(requeue, queued{p, j})
			}
		}
		s.checkReaders(st, bodies)
		s.log.Info("recovered projection", "table", st.Table, "projection", st.Projection,
			"live", len(st.Live), "dead", len(st.Dead), "pending", len(st.Pending))
	}
	// Queued jobs go back to their queue in the order they were made.
	sort.SliceStable(requeue, func(i, j int) bool { return requeue[i].p.Created < requeue[j].p.Created })
	for _, q := range requeue {
		if err := s.admit(ctx, q.p.JobID, q.p.Grant.Pool, q.j.want(), now); err != nil {
			s.log.Error("requeue job after restart", "job", q.p.JobID, "err", err)
		}
	}
	for _, p := range cancelled {
		s.failCancelled(ctx, p.JobID, p.Cancel, now)
	}
	s.publishPending(ctx)
	if swept, err := s.catalog.SweepJobs(ctx); err != nil {
		s.log.Error("remove orphaned job bodies", "err", err)
	} else if len(swept) > 0 {
		s.log.Warn("orphaned job bodies removed", "keys", swept)
	}
	if err := s.removeOrphans(ctx, states, bodies, false); err != nil {
		s.log.Error("remove orphaned containers", "err", err)
	}
	for _, st := range states {
		s.collectDead(ctx, st.Table, st.Projection)
		s.selectStrata(ctx, st.Table, st.Projection)
	}
	return nil
}

// checkReaders logs an entry whose reader counts are not its pending
// jobs' inputs (bodies, by job ID). Every write keeps them equal; a
// difference is a bug to report, not something to guess a repair for.
func (s *Scheduler) checkReaders(st *ProjectionState, bodies map[string]job) {
	want := map[string]int{}
	for _, p := range st.Pending {
		j, ok := bodies[p.JobID]
		if !ok {
			return // unknown inputs: nothing to compare
		}
		for _, in := range j.inputs() {
			want[in.ID]++
		}
	}
	if !maps.Equal(want, st.Readers) {
		s.log.Error("catalog reader counts differ from the pending jobs' inputs", "table", st.Table, "projection", st.Projection,
			"counted", st.Readers, "inputs", want)
	}
}

// operationOf makes the operations row of a pending job.
func operationOf(st *ProjectionState, p *PendingJob, j job) messages.Operation {
	op := messages.Operation{
		JobID: p.JobID, Operation: p.Operation, Status: messages.StatusQueued,
		Table: st.Table, Projection: st.Projection, Inputs: len(j.inputs()),
		Created: p.Created, Grant: p.Grant, InputIDs: idsOf(j.inputs()),
	}
	j.record(&op)
	return op
}

// track makes a job just added to the catalog known here: where it is
// pending, and its operations row.
func (s *Scheduler) track(st *ProjectionState, j job, pool string) {
	s.where[j.id()] = projKey{st.Table, st.Projection}
	p := PendingJob{JobID: j.id(), Operation: j.kind(), Created: j.created(), Grant: messages.Grant{Pool: pool}}
	s.ops.upsert(operationOf(st, &p, j))
}

func idsOf(cs []messages.ContainerRef) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

func (s *Scheduler) jobRef(jobID string) messages.JobRef {
	op := s.ops.get(jobID)
	if op == nil {
		return messages.JobRef{JobID: jobID}
	}
	return messages.JobRef{JobID: jobID, Table: op.Table, Projection: op.Projection, Inputs: op.Inputs,
		Output: op.Output, Queued: op.Status == messages.StatusQueued, Grant: op.Grant}
}

// admit asks the pool for a pending job's grant and starts the jobs that
// get one. A job that can never be admitted is failed.
func (s *Scheduler) admit(ctx context.Context, jobID, pool string, want int64, now time.Time) error {
	_, queued, err := s.adm.Acquire(Request{JobID: jobID, Pool: pool, Want: want}, now)
	if err != nil {
		if ferr := s.finishFailed(ctx, jobID, err.Error(), 0, now); ferr != nil {
			s.log.Error("fail job", "job", jobID, "err", ferr)
		}
		return err
	}
	if queued {
		s.log.Info("job queued for memory", "job", jobID, "pool", pool)
		return nil
	}
	s.granted(ctx, []Admitted{{JobID: jobID, Grant: s.adm.grants[jobID].grant}}, now)
	return nil
}

// granted records grants in the catalog and publishes the jobs.
func (s *Scheduler) granted(ctx context.Context, admitted []Admitted, now time.Time) {
	for _, a := range admitted {
		where, ok := s.where[a.JobID]
		if !ok {
			s.adm.Release(a.JobID, 0, now)
			continue
		}
		_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
			i, ok := st.pending(a.JobID)
			if !ok {
				return fmt.Errorf("job %s: not pending in the catalog", a.JobID)
			}
			p := &st.Pending[i]
			p.Granted, p.Grant, p.GrantedAt = true, a.Grant, now.UnixNano()
			return nil
		})
		if err != nil {
			// Not recorded: the job fails visibly and its memory goes back,
			// even if the request that granted it has run out of time.
			s.log.Error("record grant", "job", a.JobID, "err", err)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			ferr := s.finishFailed(fctx, a.JobID, "record grant: "+err.Error(), 0, now)
			cancel()
			if ferr != nil {
				s.log.Error("fail job", "job", a.JobID, "err", ferr)
			}
			continue
		}
		if op := s.ops.get(a.JobID); op != nil {
			op.Status, op.Grant, op.Start = messages.StatusRunning, a.Grant, now.UnixNano()
		}
		s.unpublished[a.JobID] = true
	}
	s.publishPending(ctx)
}

// publishPending publishes granted jobs not yet published.
func (s *Scheduler) publishPending(ctx context.Context) {
	ids := make([]string, 0, len(s.unpublished))
	for id := range s.unpublished {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		where, ok := s.where[id]
		if !ok {
			delete(s.unpublished, id)
			continue
		}
		st, _, err := s.catalog.Get(ctx, where.table, where.projection)
		if err != nil {
			s.log.Error("publish job", "job", id, "err", err)
			continue
		}
		i, ok := st.pending(id)
		if !ok {
			delete(s.unpublished, id)
			continue
		}
		p := st.Pending[i]
		j, err := s.catalog.Job(ctx, where.table, where.projection, &p)
		if err == nil {
			// The grant is the entry's: the body is the job as made.
			subject, m := j.message(p.Grant)
			err = s.pub.PublishJob(ctx, subject, id, m)
		}
		if err != nil {
			s.log.Error("publish job; will retry", "job", id, "err", err)
			continue
		}
		delete(s.unpublished, id)
		s.log.Info("job published", "job", id, "grant", p.Grant.Bytes, "pool", p.Grant.Pool)
	}
}

// Tick does the periodic work: fails jobs past their queue timeout (and
// tells waiting clients), retries failed publishes, and deletes dead
// containers no job reads any more.
func (s *Scheduler) Tick(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, t := range s.adm.Expire(now) {
		where, ok := s.where[t.JobID]
		if err := s.finishFailed(ctx, t.JobID, t.Reason, 0, now); err != nil {
			// Its grant is gone; the catalog still names it pending, so a
			// restart queues it again.
			s.log.Error("fail timed-out job", "job", t.JobID, "err", err)
		}
		op := s.ops.get(t.JobID)
		ev := &messages.JobEvent{JobID: t.JobID, Type: messages.EventFailed, Worker: "scheduler", Time: now.UnixNano(), Reason: t.Reason}
		if op != nil {
			ev.Operation = op.Operation
		}
		if err := s.pub.PublishEvent(ctx, ev); err != nil {
			s.log.Error("publish queue timeout", "job", t.JobID, "err", err)
		}
		if ok {
			s.collectDead(ctx, where.table, where.projection)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.failing)) {
		if err := s.finishFailed(ctx, id, s.failing[id], 0, now); err != nil {
			s.log.Error("settle failed job; will retry", "job", id, "err", err)
		}
	}
	s.tickCancels(ctx, now)
	s.publishPending(ctx)
	s.pruneResults(ctx)
}
