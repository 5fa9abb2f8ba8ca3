package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/messages"
)

var (
	// ErrUnknownPool is returned for a request naming a pool that does not exist.
	ErrUnknownPool = errors.New("scheduler: unknown resource pool")
	// ErrPoolExists is returned when creating a pool whose name is taken.
	ErrPoolExists = errors.New("scheduler: resource pool exists")
	// ErrNeverFits is returned for a request no state of its pool could admit.
	ErrNeverFits = errors.New("scheduler: request can never fit its pool")
)

// Request asks a pool for memory for one job.
type Request struct {
	JobID string
	Pool  string
	// Want is what the job could use; the grant is the pool's target, and
	// more (up to Want, borrowing up to maxmemorysize) when memory is free.
	// Zero asks for the target.
	Want int64
}

// Admitted is a request that got its grant.
type Admitted struct {
	JobID string
	Grant messages.Grant
}

// TimedOut is a request that waited longer than its pool's queuetimeout.
type TimedOut struct {
	JobID  string
	Pool   string
	Reason string
}

// Admission keeps the memory accounting of every resource pool: what is
// granted, to whom, and who waits. It is not safe for concurrent use; the
// Scheduler serializes calls.
//
// Rules, after Vertica's resource pools: a job's grant is the pool's target,
// memorysize / plannedconcurrency. A job is admitted when the pool's memory
// in use plus the target stays within maxmemorysize and fewer than
// maxconcurrency jobs run; memory in use above memorysize is borrowed. A job
// that could use more than the target (Request.Want) also borrows, up to
// what it wants, from the free memory above memorysize. Otherwise it queues;
// the queue is ordered by priority, then arrival, and only its head may be
// admitted, so a large request is not starved by small ones.
type Admission struct {
	pools  map[string]*poolState
	grants map[string]*grantState // by job ID: running and queued
	seq    uint64
	log    *acquisitionLog
}

type poolState struct {
	cfg      messages.PoolConfig
	inUse    int64
	running  int
	queue    []*grantState
	timedOut int // queue timeouts since start
}

type grantState struct {
	req      Request
	seq      uint64
	priority int
	queued   time.Time
	granted  bool
	grant    messages.Grant
	acq      *messages.Acquisition
}

// NewAdmission returns the accounting for the given pools, empty.
// keepAcquisitions bounds the acquisitions table.
func NewAdmission(pools []messages.PoolConfig, keepAcquisitions int) (*Admission, error) {
	a := &Admission{pools: map[string]*poolState{}, grants: map[string]*grantState{}, log: newAcquisitionLog(keepAcquisitions)}
	for _, p := range pools {
		if err := a.CreatePool(p); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// CreatePool adds a pool.
func (a *Admission) CreatePool(cfg messages.PoolConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, ok := a.pools[cfg.Name]; ok {
		return fmt.Errorf("create pool %s: %w", cfg.Name, ErrPoolExists)
	}
	a.pools[cfg.Name] = &poolState{cfg: cfg}
	return nil
}

// AlterPool replaces a pool's configuration. Running grants keep their
// size; if the pool shrank below what is in use, nothing is admitted until
// enough is released. Returns the queued requests the change admits.
func (a *Admission) AlterPool(cfg messages.PoolConfig, now time.Time) ([]Admitted, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, ok := a.pools[cfg.Name]
	if !ok {
		return nil, fmt.Errorf("alter pool %s: %w", cfg.Name, ErrUnknownPool)
	}
	p.cfg = cfg
	return a.drain(p, now), nil
}

// Pool returns a pool's configuration.
func (a *Admission) Pool(name string) (messages.PoolConfig, bool) {
	p, ok := a.pools[name]
	if !ok {
		return messages.PoolConfig{}, false
	}
	return p.cfg, true
}

// Acquire asks for memory. It returns the grant when admitted now; queued
// is true when the request waits (Release, AlterPool and Expire return it
// once admitted). Asking again for a job that holds or awaits a grant
// returns that grant or queue place: a redelivered job is not counted twice.
func (a *Admission) Acquire(req Request, now time.Time) (grant messages.Grant, queued bool, err error) {
	if g, ok := a.grants[req.JobID]; ok {
		return g.grant, !g.granted, nil
	}
	p, ok := a.pools[req.Pool]
	if !ok {
		return messages.Grant{}, false, fmt.Errorf("job %s: pool %q: %w", req.JobID, req.Pool, ErrUnknownPool)
	}
	target := p.cfg.Target()
	if target > p.cfg.MaxMemorySize {
		return messages.Grant{}, false, fmt.Errorf("job %s: pool %s target %s exceeds maxmemorysize %s: %w",
			req.JobID, p.cfg.Name, bytesize.Format(target), bytesize.Format(p.cfg.MaxMemorySize), ErrNeverFits)
	}
	a.seq++
	g := &grantState{req: req, seq: a.seq, priority: p.cfg.Priority, queued: now}
	g.acq = a.log.add(messages.Acquisition{Pool: p.cfg.Name, JobID: req.JobID, Status: messages.AcquisitionQueued, Target: target, Queued: now.UnixNano()})
	a.grants[req.JobID] = g
	p.queue = append(p.queue, g)
	sort.SliceStable(p.queue, func(i, j int) bool {
		if p.queue[i].priority != p.queue[j].priority {
			return p.queue[i].priority > p.queue[j].priority
		}
		return p.queue[i].seq < p.queue[j].seq
	})
	a.drain(p, now)
	return g.grant, !g.granted, nil
}

// Restore records a grant that was handed out before a restart, as
// running, whether or not the pool has room now: the job holds the memory.
func (a *Admission) Restore(jobID string, grant messages.Grant, acquired time.Time) error {
	if _, ok := a.grants[jobID]; ok {
		return nil
	}
	p, ok := a.pools[grant.Pool]
	if !ok {
		return fmt.Errorf("restore grant of job %s: pool %q: %w", jobID, grant.Pool, ErrUnknownPool)
	}
	a.seq++
	g := &grantState{req: Request{JobID: jobID, Pool: grant.Pool}, seq: a.seq, queued: acquired, granted: true, grant: grant}
	g.acq = a.log.add(messages.Acquisition{Pool: p.cfg.Name, JobID: jobID, Status: messages.AcquisitionGranted,
		Target: grant.Target, Grant: grant.Bytes, Borrowed: max(0, p.inUse+grant.Bytes-p.cfg.MemorySize) - max(0, p.inUse-p.cfg.MemorySize),
		Queued: acquired.UnixNano(), Acquired: acquired.UnixNano()})
	a.grants[jobID] = g
	p.inUse += grant.Bytes
	p.running++
	return nil
}

// Release returns a job's memory (or drops it from its queue) and records
// its peak. Releasing an unknown job is a no-op, so a duplicate done or
// failed event is harmless. Returns the queued requests now admitted.
func (a *Admission) Release(jobID string, peak int64, now time.Time) []Admitted {
	g, ok := a.grants[jobID]
	if !ok {
		return nil
	}
	delete(a.grants, jobID)
	p := a.pools[g.req.Pool]
	g.acq.Released = now.UnixNano()
	g.acq.Peak = peak
	if !g.granted {
		g.acq.Status = messages.AcquisitionReleased
		g.acq.Reason = "withdrawn while queued"
		p.removeQueued(g)
		return a.drain(p, now)
	}
	g.acq.Status = messages.AcquisitionReleased
	p.inUse -= g.grant.Bytes
	p.running--
	return a.drain(p, now)
}

// Expire fails the queued requests that have waited longer than their
// pool's queuetimeout, and returns them with the reason.
func (a *Admission) Expire(now time.Time) []TimedOut {
	var out []TimedOut
	for _, name := range a.poolNames() {
		p := a.pools[name]
		if p.cfg.QueueTimeout <= 0 {
			continue
		}
		timeout := time.Duration(p.cfg.QueueTimeout)
		kept := p.queue[:0]
		for _, g := range p.queue {
			if now.Sub(g.queued) < timeout {
				kept = append(kept, g)
				continue
			}
			reason := fmt.Sprintf("queued %s in pool %s waiting for %s (in use %s of maxmemorysize %s, %d running, maxconcurrency %d); grow the pool or lower plannedconcurrency",
				now.Sub(g.queued).Round(time.Millisecond), p.cfg.Name, bytesize.Format(p.cfg.Target()),
				bytesize.Format(p.inUse), bytesize.Format(p.cfg.MaxMemorySize), p.running, p.cfg.MaxConcurrency)
			g.acq.Status = messages.AcquisitionTimedOut
			g.acq.Released = now.UnixNano()
			g.acq.Reason = reason
			delete(a.grants, g.req.JobID)
			p.timedOut++
			out = append(out, TimedOut{JobID: g.req.JobID, Pool: p.cfg.Name, Reason: reason})
		}
		clear(p.queue[len(kept):])
		p.queue = kept
	}
	return out
}

// drain admits queued requests from the head while they fit.
func (a *Admission) drain(p *poolState, now time.Time) []Admitted {
	var out []Admitted
	for len(p.queue) > 0 {
		g := p.queue[0]
		target := p.cfg.Target()
		if p.cfg.MaxConcurrency > 0 && p.running >= p.cfg.MaxConcurrency {
			break
		}
		if p.inUse+target > p.cfg.MaxMemorySize {
			break
		}
		// A job that could use more than the target borrows it from the
		// memory above memorysize that is free; it never takes the share
		// memorysize plans for other jobs.
		size := target
		if g.req.Want > target {
			above := p.cfg.MaxMemorySize - max(p.inUse+target, p.cfg.MemorySize)
			size += min(g.req.Want-target, max(0, above))
		}
		borrowed := max(0, p.inUse+size-p.cfg.MemorySize) - max(0, p.inUse-p.cfg.MemorySize)
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.inUse += size
		p.running++
		g.granted = true
		g.grant = messages.Grant{Pool: p.cfg.Name, Bytes: size, Target: target}
		g.acq.Status = messages.AcquisitionGranted
		g.acq.Grant = size
		g.acq.Borrowed = borrowed
		g.acq.Acquired = now.UnixNano()
		out = append(out, Admitted{JobID: g.req.JobID, Grant: g.grant})
	}
	return out
}

func (p *poolState) removeQueued(g *grantState) {
	for i, q := range p.queue {
		if q == g {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return
		}
	}
}

func (a *Admission) poolNames() []string {
	names := make([]string, 0, len(a.pools))
	for n := range a.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Status returns the live accounting of every pool, by name.
func (a *Admission) Status() []messages.PoolStatus {
	var out []messages.PoolStatus
	for _, name := range a.poolNames() {
		p := a.pools[name]
		out = append(out, messages.PoolStatus{
			Config:   p.cfg,
			Target:   p.cfg.Target(),
			InUse:    p.inUse,
			Borrowed: max(0, p.inUse-p.cfg.MemorySize),
			Running:  p.running,
			Queued:   len(p.queue),
		})
	}
	return out
}

// Acquisitions returns the acquisitions table, newest first.
func (a *Admission) Acquisitions(pool string, limit int) []messages.Acquisition {
	return a.log.list(pool, limit)
}

// Holding reports whether a job holds a grant (true) or waits (false, true);
// ok is false for a job Admission does not know.
func (a *Admission) Holding(jobID string) (granted, ok bool) {
	g, ok := a.grants[jobID]
	if !ok {
		return false, false
	}
	return g.granted, true
}

// acquisitionLog keeps the last n acquisitions.
type acquisitionLog struct {
	keep int
	rows []*messages.Acquisition
}

func newAcquisitionLog(keep int) *acquisitionLog {
	if keep <= 0 {
		keep = 1000
	}
	return &acquisitionLog{keep: keep}
}

func (l *acquisitionLog) add(a messages.Acquisition) *messages.Acquisition {
	row := &a
	l.rows = append(l.rows, row)
	if len(l.rows) > l.keep {
		clear(l.rows[:len(l.rows)-l.keep])
		l.rows = append(l.rows[:0], l.rows[len(l.rows)-l.keep:]...)
	}
	return row
}

// restore puts rows from before a restart ahead of the rows made since,
// oldest first, within the log's bound.
func (l *acquisitionLog) restore(rows []messages.Acquisition) {
	old := make([]*messages.Acquisition, len(rows))
	for i := range rows {
		old[i] = &rows[i]
	}
	l.rows = append(old, l.rows...)
	if len(l.rows) > l.keep {
		l.rows = append([]*messages.Acquisition(nil), l.rows[len(l.rows)-l.keep:]...)
	}
}

func (l *acquisitionLog) list(pool string, limit int) []messages.Acquisition {
	var out []messages.Acquisition
	for i := len(l.rows) - 1; i >= 0; i-- {
		if pool != "" && l.rows[i].Pool != pool {
			continue
		}
		out = append(out, *l.rows[i])
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}
