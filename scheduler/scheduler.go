package scheduler

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/strata-db/strata/messages"
)

// Publisher sends what the scheduler decides: jobs to workers and, for jobs
// the scheduler itself fails (a queue timeout), their failed event. In
// production it publishes to JetStream with Nats-Msg-Id set to the job ID,
// so publishing a job twice delivers it once.
type Publisher interface {
	PublishMergeout(ctx context.Context, job *messages.MergeoutJob) error
	PublishWindow(ctx context.Context, job *messages.WindowJob) error
	PublishEvent(ctx context.Context, ev *messages.JobEvent) error
}

// Storage is the data directory as the scheduler uses it; every name it
// passes is resolved inside the data directory (columnar.DataDir in
// production), so a name can never reach outside it.
type Storage interface {
	// CheckContainer checks a committed container (its manifest names this
	// table, projection and ID; its files have the manifest's sizes and
	// header checksums) and returns its rows and bytes on disk. A missing
	// or corrupt container gives an error wrapping ErrBadOutput.
	CheckContainer(table, projection, id string) (rows, bytes int64, err error)
	// RemoveContainer deletes a container; a missing one is not an error.
	RemoveContainer(table, projection, id string) error
	// ReadDir lists a directory (nil if missing); RemoveAll removes an
	// entry and all under it; RemoveEmpty removes an empty directory.
	ReadDir(elems ...string) ([]fs.DirEntry, error)
	RemoveAll(elems ...string) error
	RemoveEmpty(elems ...string) error
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
	// OrphanGrace is how old a directory the catalog does not name must be
	// before it is removed at start; younger ones may be a load or a
	// mergeout still writing. Default 1h.
	OrphanGrace      time.Duration
	KeepOperations   int // rows of the operations table kept; default 10000
	KeepAcquisitions int // rows of the acquisitions table kept; default 10000
	// KeepResults is how many window result tables are kept; older ones
	// are dropped (containers deleted once no job reads them). Default 100.
	KeepResults int
	Clock       Clock
	Logger      *slog.Logger
}

func (o Options) withDefaults() Options {
	o.Strata = o.Strata.withDefaults()
	if o.Pools == nil {
		o.Pools = DefaultPools()
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = time.Hour
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
	// where is the projection whose catalog entry holds each pending job.
	where map[string]projKey
	// unpublished are granted jobs whose publish failed; Tick retries them.
	unpublished map[string]bool
	// accepted is the worker holding each in-flight job's latest delivery,
	// from its accepted event (kept in the job's pending entry too).
	accepted map[string]delivery
	// answered remembers the replies to the latest window requests that
	// carried a request ID, so a client's resend gets the same job.
	answered *requestLog
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
		pools:       poolStore{kv: poolsKV},
		pub:         pub,
		ops:         newOperationLog(opts.KeepOperations),
		where:       map[string]projKey{},
		unpublished: map[string]bool{},
		accepted:    map[string]delivery{},
		answered:    newRequestLog(answeredRequests),
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

// recover rebuilds in-memory state from the catalog.
func (s *Scheduler) recover(ctx context.Context) error {
	states, err := s.catalog.List(ctx, "")
	if err != nil {
		return err
	}
	now := s.now()
	var requeue []PendingJob
	for _, st := range states {
		for _, p := range st.Pending {
			s.where[p.JobID] = projKey{st.Table, st.Projection}
			if p.Worker != "" {
				s.accepted[p.JobID] = delivery{p.Worker, p.Delivery}
			}
			op := s.ops.upsert(operationOf(st, &p))
			if p.Granted {
				if err := s.adm.Restore(p.JobID, p.Grant, time.Unix(0, p.GrantedAt)); err != nil {
					return fmt.Errorf("recover job %s: %w", p.JobID, err)
				}
				op.Status = messages.StatusRunning
				op.Start = p.GrantedAt
				s.unpublished[p.JobID] = true // publish again; deduped by job ID
			} else {
				requeue = append(requeue, p)
			}
		}
		s.log.Info("recovered projection", "table", st.Table, "projection", st.Projection,
			"live", len(st.Live), "dead", len(st.Dead), "pending", len(st.Pending))
	}
	// Queued jobs go back to their queue in the order they were made.
	sort.SliceStable(requeue, func(i, j int) bool { return requeue[i].Created < requeue[j].Created })
	for _, p := range requeue {
		if err := s.admit(ctx, p.JobID, p.Grant.Pool, wantOf(&p), now); err != nil {
			s.log.Error("requeue job after restart", "job", p.JobID, "err", err)
		}
	}
	s.publishPending(ctx)
	if err := s.removeOrphans(ctx, states); err != nil {
		s.log.Error("remove orphaned containers", "err", err)
	}
	for _, st := range states {
		s.collectDead(ctx, st.Table, st.Projection)
		s.selectStrata(ctx, st.Table, st.Projection)
	}
	return nil
}

// operationOf makes the operations row of a pending job.
func operationOf(st *ProjectionState, p *PendingJob) messages.Operation {
	op := messages.Operation{
		JobID: p.JobID, Operation: p.Operation, Status: messages.StatusQueued,
		Table: st.Table, Projection: st.Projection, Inputs: len(p.Inputs),
		Created: p.Created, Grant: p.Grant, InputIDs: p.Inputs,
	}
	if p.Mergeout != nil {
		op.Output = p.Mergeout.Output
		op.Stratum = p.Mergeout.Stratum
	}
	if p.Window != nil {
		op.Output = p.Window.ResultTable + "/" + p.Window.Output
	}
	return op
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
			if p.Mergeout != nil {
				p.Mergeout.Grant = a.Grant
			}
			if p.Window != nil {
				p.Window.Grant = a.Grant
			}
			return nil
		})
		if err != nil {
			// Not recorded: the job fails visibly and its memory goes back.
			s.log.Error("record grant", "job", a.JobID, "err", err)
			if ferr := s.finishFailed(ctx, a.JobID, "record grant: "+err.Error(), 0, now); ferr != nil {
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
		switch {
		case p.Mergeout != nil:
			err = s.pub.PublishMergeout(ctx, p.Mergeout)
		case p.Window != nil:
			err = s.pub.PublishWindow(ctx, p.Window)
		default:
			err = fmt.Errorf("pending job %s has no job body", id)
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
	s.publishPending(ctx)
}
