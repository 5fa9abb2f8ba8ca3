package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// Options configures a Scheduler. Zero values take the defaults.
type Options struct {
	// DataDir is the data directory containers live under; empty disables
	// removing dead and orphaned container directories.
	DataDir string
	Strata  StrataOptions
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

// Register adds loaded containers to a projection's live set, refusing a
// load that would pass the projection's container limit, then starts the
// mergeouts the strata call for. Registering a container already live is a
// no-op, so a retried load is safe.
func (s *Scheduler) Register(ctx context.Context, req *messages.RegisterRequest) (*messages.RegisterReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("register: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.catalog.Update(ctx, req.Table, req.Projection, func(st *ProjectionState) error {
		var add []messages.ContainerRef
		for _, c := range req.Containers {
			if st.liveIndex(c.ID) < 0 {
				add = append(add, c)
			}
		}
		if max := s.opts.Strata.MaxContainers; len(st.Live)+len(add) > max {
			return &TooManyContainersError{Table: req.Table, Projection: req.Projection, Live: len(st.Live), Adding: len(add), Max: max}
		}
		st.Live = append(st.Live, add...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("registered containers", "table", req.Table, "projection", req.Projection, "added", len(req.Containers), "live", len(st.Live))
	s.selectStrata(ctx, req.Table, req.Projection)
	return &messages.RegisterReply{Live: len(st.Live)}, nil
}

// RequestMergeout merges, now, every live container of the table's
// projections (or the one named) that no running job reads.
func (s *Scheduler) RequestMergeout(ctx context.Context, req *messages.MergeoutRequest) (*messages.MergeoutReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("mergeout: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	states, err := s.catalog.List(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	reply := &messages.MergeoutReply{}
	found := false
	for _, st := range states {
		if req.Projection != "" && st.Projection != req.Projection {
			continue
		}
		found = true
		for _, p := range st.Pending {
			if p.Mergeout != nil {
				reply.Running = append(reply.Running, s.jobRef(p.JobID))
			}
		}
		sel, ok := SelectAll(st.Live, st.readers(), s.opts.Strata)
		if !ok {
			continue
		}
		ref, err := s.startMergeout(ctx, st.Table, st.Projection, sel)
		if err != nil {
			return nil, err
		}
		reply.Jobs = append(reply.Jobs, ref)
	}
	if !found {
		return nil, fmt.Errorf("mergeout %s: %w", req.Table, ErrUnknownTable)
	}
	return reply, nil
}

// selectStrata starts the mergeouts the projection's strata call for.
// Errors are logged: selection runs again on the next change.
func (s *Scheduler) selectStrata(ctx context.Context, table, projection string) {
	st, _, err := s.catalog.Get(ctx, table, projection)
	if err != nil {
		s.log.Error("strata selection", "table", table, "projection", projection, "err", err)
		return
	}
	for _, sel := range SelectStrata(st.Live, st.readers(), s.opts.Strata) {
		if _, err := s.startMergeout(ctx, table, projection, sel); err != nil {
			s.log.Error("start mergeout", "table", table, "projection", projection, "stratum", sel.Stratum, "err", err)
			return
		}
	}
}

// errInputsTaken aborts a catalog update whose selection went stale.
var errInputsTaken = errors.New("scheduler: mergeout inputs no longer free")

// startMergeout records the job as pending in the catalog (so its inputs
// are taken), then asks the tm pool for its grant.
func (s *Scheduler) startMergeout(ctx context.Context, table, projection string, sel Selection) (messages.JobRef, error) {
	now := s.now()
	var job *messages.MergeoutJob
	_, err := s.catalog.Update(ctx, table, projection, func(st *ProjectionState) error {
		busy := st.readers()
		inputs := make([]messages.ContainerRef, 0, len(sel.Inputs))
		ids := make([]string, 0, len(sel.Inputs))
		for _, in := range sel.Inputs {
			i := st.liveIndex(in.ID)
			if i < 0 || busy[in.ID] {
				return fmt.Errorf("container %s: %w", in.ID, errInputsTaken)
			}
			inputs = append(inputs, st.Live[i])
			ids = append(ids, in.ID)
		}
		st.NextSeq++
		job = &messages.MergeoutJob{
			JobID:      fmt.Sprintf("mergeout.%s.%s.%d", table, projection, st.NextSeq),
			Table:      table,
			Projection: projection,
			Inputs:     inputs,
			Output:     fmt.Sprintf("m%08d", st.NextSeq),
			Stratum:    sel.Stratum,
			Created:    now.UnixNano(),
		}
		st.Pending = append(st.Pending, PendingJob{
			JobID: job.JobID, Operation: messages.OperationMergeout, Inputs: ids,
			Grant: messages.Grant{Pool: messages.DefaultMergeoutPool}, Created: job.Created, Mergeout: job,
		})
		return nil
	})
	if err != nil {
		return messages.JobRef{}, fmt.Errorf("start mergeout of %s.%s: %w", table, projection, err)
	}
	s.where[job.JobID] = projKey{table, projection}
	st := &ProjectionState{Table: table, Projection: projection}
	s.ops.upsert(operationOf(st, &PendingJob{JobID: job.JobID, Operation: messages.OperationMergeout,
		Inputs: idsOf(job.Inputs), Created: job.Created, Mergeout: job, Grant: messages.Grant{Pool: messages.DefaultMergeoutPool}}))
	s.log.Info("mergeout selected", "job", job.JobID, "stratum", sel.Stratum, "inputs", len(job.Inputs))
	if err := s.admit(ctx, job.JobID, messages.DefaultMergeoutPool, wantOf(&PendingJob{Mergeout: job}), now); err != nil {
		return messages.JobRef{}, err
	}
	return s.jobRef(job.JobID), nil
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

// wantOf is the memory a job could use: for a mergeout, its inputs' size
// on disk (all of them at once); a window job asks for the target.
func wantOf(p *PendingJob) int64 {
	if p.Mergeout == nil {
		return 0
	}
	var n int64
	for _, in := range p.Mergeout.Inputs {
		n += in.Bytes
	}
	return n
}

// admit asks the pool for a pending job's grant and starts the jobs that
// get one. A job that can never be admitted is failed.
func (s *Scheduler) admit(ctx context.Context, jobID, pool string, want int64, now time.Time) error {
	_, queued, err := s.adm.Acquire(Request{JobID: jobID, Pool: pool, Want: want}, now)
	if err != nil {
		s.finishFailed(ctx, jobID, err.Error(), 0, now)
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
			// Not recorded: give the memory back; the job stays queued-less
			// and pending, and fails visibly.
			s.log.Error("record grant", "job", a.JobID, "err", err)
			s.adm.Release(a.JobID, 0, now)
			s.finishFailed(ctx, a.JobID, "record grant: "+err.Error(), 0, now)
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

// HandleEvent applies a job event: accepted and progress update the
// operations table; done swaps a mergeout's inputs for its output (or
// registers a window result) and releases the grant; a final failure
// releases the grant and frees the inputs. Events of jobs the scheduler
// does not hold pending (duplicates, another deployment's) change nothing
// but the operations row, so redelivered events are harmless.
func (s *Scheduler) HandleEvent(ctx context.Context, ev *messages.JobEvent) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("event: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	op := s.ops.get(ev.JobID)
	if op != nil {
		if ev.Worker != "" {
			op.Worker = ev.Worker
		}
		op.Deliveries = max(op.Deliveries, ev.Delivery)
		if ev.RowsTotal > 0 {
			op.Rows = ev.RowsTotal
		}
		if ev.Plan != "" {
			op.Plan = ev.Plan
		}
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.SpilledBytes = max(op.SpilledBytes, ev.SpilledBytes)
	}
	where, pending := s.where[ev.JobID]
	switch ev.Type {
	case messages.EventAccepted, messages.EventProgress:
		return nil
	case messages.EventFailed:
		if op != nil {
			op.Reason = ev.Reason
		}
		if ev.Retryable || !pending {
			return nil // the job is redelivered, or already settled
		}
		s.finishFailed(ctx, ev.JobID, ev.Reason, ev.PeakBytes, now)
		return nil
	case messages.EventDone:
		if !pending {
			return nil
		}
		return s.finishDone(ctx, where, ev, now)
	}
	return nil
}

// finishDone settles a finished job.
func (s *Scheduler) finishDone(ctx context.Context, where projKey, ev *messages.JobEvent, now time.Time) error {
	var done PendingJob
	_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
		i, ok := st.pending(ev.JobID)
		if !ok {
			done = PendingJob{}
			return nil // settled by an earlier delivery of this event
		}
		done = st.Pending[i]
		st.Pending = slices.Delete(st.Pending, i, i+1)
		if done.Mergeout == nil {
			return nil
		}
		out := messages.ContainerRef{Table: where.table, Projection: where.projection, ID: done.Mergeout.Output, Rows: ev.RowsTotal, Bytes: ev.Bytes}
		if ev.Output != nil {
			out.Rows, out.Bytes = ev.Output.Rows, ev.Output.Bytes
		}
		for _, id := range done.Inputs {
			if j := st.liveIndex(id); j >= 0 {
				st.Dead = append(st.Dead, st.Live[j])
				st.Live = slices.Delete(st.Live, j, j+1)
			}
		}
		if st.liveIndex(out.ID) < 0 {
			st.Live = append(st.Live, out)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle job %s: %w", ev.JobID, err)
	}
	delete(s.where, ev.JobID)
	delete(s.unpublished, ev.JobID)
	if op := s.ops.get(ev.JobID); op != nil {
		op.Status, op.End = messages.StatusDone, now.UnixNano()
		op.Bytes = ev.Bytes
		if ev.Output != nil {
			op.Rows, op.Bytes = ev.Output.Rows, ev.Output.Bytes
		}
		op.PeakBytes = max(op.PeakBytes, ev.PeakBytes)
		op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
	}
	if done.Window != nil && ev.Output != nil {
		s.registerResult(ctx, ev.JobID, *ev.Output, now)
	}
	s.log.Info("job done", "job", ev.JobID, "worker", ev.Worker, "peak", ev.PeakBytes)
	s.granted(ctx, s.adm.Release(ev.JobID, ev.PeakBytes, now), now)
	s.collectDead(ctx, where.table, where.projection)
	s.selectStrata(ctx, where.table, where.projection)
	return nil
}

// registerResult makes a window job's result container live in its own
// table, then drops the oldest result tables past KeepResults.
func (s *Scheduler) registerResult(ctx context.Context, jobID string, out messages.ContainerRef, now time.Time) {
	_, err := s.catalog.Update(ctx, out.Table, out.Projection, func(st *ProjectionState) error {
		if st.liveIndex(out.ID) < 0 {
			st.Live = append(st.Live, out)
		}
		st.ResultOf = jobID
		if st.Created == 0 {
			st.Created = now.UnixNano()
		}
		return nil
	})
	if err != nil {
		s.log.Error("register window result", "table", out.Table, "container", out.ID, "err", err)
		return
	}
	s.pruneResults(ctx)
}

// pruneResults retires the containers of the oldest window result tables
// beyond KeepResults, and forgets result tables left with nothing.
func (s *Scheduler) pruneResults(ctx context.Context) {
	states, err := s.catalog.List(ctx, "")
	if err != nil {
		s.log.Error("list window results", "err", err)
		return
	}
	var results []*ProjectionState
	for _, st := range states {
		if st.ResultOf != "" {
			results = append(results, st)
		}
	}
	if len(results) <= s.opts.KeepResults {
		return
	}
	slices.SortFunc(results, func(a, b *ProjectionState) int { return cmp.Compare(a.Created, b.Created) })
	for _, old := range results[:len(results)-s.opts.KeepResults] {
		st, err := s.catalog.Update(ctx, old.Table, old.Projection, func(st *ProjectionState) error {
			st.Dead = append(st.Dead, st.Live...)
			st.Live = nil
			return nil
		})
		if err != nil {
			s.log.Error("retire window result", "table", old.Table, "err", err)
			continue
		}
		s.collectDead(ctx, st.Table, st.Projection)
		if st, _, err := s.catalog.Get(ctx, old.Table, old.Projection); err == nil && len(st.Live)+len(st.Dead)+len(st.Pending) == 0 {
			if err := s.catalog.Delete(ctx, old.Table, old.Projection); err != nil {
				s.log.Error("forget window result", "table", old.Table, "err", err)
				continue
			}
			if s.opts.DataDir != "" {
				os.Remove(filepath.Join(s.opts.DataDir, old.Table, old.Projection))
				os.Remove(filepath.Join(s.opts.DataDir, old.Table))
			}
			s.log.Info("window result dropped", "table", old.Table, "job", old.ResultOf)
		}
	}
}

// finishFailed settles a job that will not complete: its inputs stay live,
// its grant is released, and anyone waiting hears a failed event.
func (s *Scheduler) finishFailed(ctx context.Context, jobID, reason string, peak int64, now time.Time) {
	where, ok := s.where[jobID]
	if ok {
		_, err := s.catalog.Update(ctx, where.table, where.projection, func(st *ProjectionState) error {
			if i, ok := st.pending(jobID); ok {
				st.Pending = slices.Delete(st.Pending, i, i+1)
			}
			return nil
		})
		if err != nil {
			s.log.Error("settle failed job", "job", jobID, "err", err)
			return // still pending; the next event or restart settles it
		}
	}
	delete(s.where, jobID)
	delete(s.unpublished, jobID)
	if op := s.ops.get(jobID); op != nil {
		op.Status, op.End, op.Reason = messages.StatusFailed, now.UnixNano(), reason
		op.MemoryConstrained = op.Grant.Target > 0 && op.PeakBytes > op.Grant.Target
	}
	s.log.Warn("job failed", "job", jobID, "reason", reason)
	s.granted(ctx, s.adm.Release(jobID, peak, now), now)
	if ok {
		s.collectDead(ctx, where.table, where.projection)
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
		s.finishFailed(ctx, t.JobID, t.Reason, 0, now)
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
