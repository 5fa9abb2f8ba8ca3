package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-db/strata/messages"
)

// ProjectionState is the catalog entry of one projection: which containers
// are live, which are dead but still read, the jobs that read them and how
// many of those read each container. It is stored as JSON under the key
// "<table>/<projection>" (see the package documentation); the bodies of
// its pending jobs are stored under keys of their own.
type ProjectionState struct {
	Table      string
	Projection string
	Live       []messages.ContainerRef
	Dead       []messages.ContainerRef
	Pending    []PendingJob
	// Readers counts, by container ID, the pending jobs whose inputs hold
	// the container. It changes only in the write that adds or ends a job.
	Readers map[string]int
	NextSeq uint64
	// ResultOf names the window job whose result this table is; empty for
	// loaded tables. Created is when a result table was made (unix ns).
	ResultOf string
	Created  int64
	// Requests are the scheduler's answers to the latest client requests
	// that changed this entry (requests.go), oldest first.
	Requests []RequestRecord
	// NextContainer is one past the highest container number handed out
	// by a reservation; Reservations are those not yet released or
	// expired (reserve.go).
	NextContainer int
	Reservations  []Reservation
	// PrimaryKey names the key columns of a keyed table (its first load
	// sets it); empty for an append-only table.
	PrimaryKey []string
	// Applied is, per WAL (by its ID), the position up to which that
	// WAL's changes of this table are in the live containers (apply.go).
	Applied map[string]uint64
	// FrozenThrough is the version through which a full mergeout of this
	// keyed table wrote its rows' versions as 0 (its change floor): an
	// apply whose changes reach down to it is refused (apply.go). It is
	// set when such a mergeout is added, and again in the write that makes
	// its output live; it only grows.
	FrozenThrough int64
	// ChangedRows estimates the rows of changes since the last full
	// mergeout of this keyed table: the rows of every applied batch, less
	// the rows each mergeout folded away; a full mergeout starts it again
	// from the rows applied while it ran. Each change supersedes at most
	// one older row, so it bounds the superseded rows the live containers
	// hold; strata selection merges the table early when it passes a share
	// of the table's rows (strata.go, SelectPurge).
	ChangedRows int64

	// legacy: decoded from an entry written before format version 1; the
	// next write rewrites it.
	legacy bool
}

// PendingJob is a job the scheduler made and has not seen finish. It is in
// the catalog so a restarted scheduler knows which grants are held and
// which jobs to publish again; the job itself (its inputs, the message to
// publish) is its body, kept under the key jobKey(table, projection, Seq).
type PendingJob struct {
	JobID     string
	Seq       uint64 // the projection's job number (NextSeq when it was made)
	Operation string // the job's kind: mergeout, window
	Granted   bool
	Grant     messages.Grant
	Created   int64
	GrantedAt int64
	// Worker is the worker that accepted the job's latest delivery,
	// Delivery that delivery's number: the only worker whose done or
	// failed claim the scheduler takes.
	Worker   string
	Delivery uint64
	// Cancel, when set, is the reason of a cancel request (cancel.go):
	// the job's worker was told to stop it.
	Cancel string

	// inline is the body of a job read from a format-0 entry, which held
	// it; the write that rewrites the entry stores it under its own key
	// first.
	inline job
}

func (st *ProjectionState) pending(jobID string) (int, bool) {
	for i := range st.Pending {
		if st.Pending[i].JobID == jobID {
			return i, true
		}
	}
	return -1, false
}

// readers returns the container IDs pending jobs read.
func (st *ProjectionState) readers() map[string]bool {
	r := map[string]bool{}
	for id, n := range st.Readers {
		if n > 0 {
			r[id] = true
		}
	}
	return r
}

// addJob makes j pending with number seq and counts its inputs as read.
func (st *ProjectionState) addJob(j job, seq uint64, pool string) {
	st.NextSeq = max(st.NextSeq, seq)
	st.Pending = append(st.Pending, PendingJob{JobID: j.id(), Seq: seq, Operation: j.kind(),
		Grant: messages.Grant{Pool: pool}, Created: j.created()})
	if st.Readers == nil {
		st.Readers = map[string]int{}
	}
	for _, in := range j.inputs() {
		st.Readers[in.ID]++
	}
}

// endJob drops j from the pending jobs, and its inputs from the readers;
// it reports whether j was pending.
func (st *ProjectionState) endJob(j job) bool {
	i, ok := st.pending(j.id())
	if !ok {
		return false
	}
	st.Pending = slices.Delete(st.Pending, i, i+1)
	for _, in := range j.inputs() {
		if st.Readers[in.ID]--; st.Readers[in.ID] <= 0 {
			delete(st.Readers, in.ID)
		}
	}
	return true
}

func (st *ProjectionState) liveIndex(id string) int {
	return slices.IndexFunc(st.Live, func(c messages.ContainerRef) bool { return c.ID == id })
}

// named returns every container ID of the projection the entry names:
// live, dead, and the outputs its pending jobs (whose bodies are given, by
// job ID) will write here.
func (st *ProjectionState) named(bodies map[string]job) map[string]bool {
	n := map[string]bool{}
	for _, c := range st.Live {
		n[c.ID] = true
	}
	for _, c := range st.Dead {
		n[c.ID] = true
	}
	for _, p := range st.Pending {
		j, ok := bodies[p.JobID]
		if !ok {
			continue
		}
		if out, _ := j.output(); out.Table == st.Table && out.Projection == st.Projection {
			n[out.ID] = true
		}
	}
	return n
}

// Catalog keeps ProjectionStates in a KV and changes them only by
// compare-and-set. The bodies of pending jobs are written before the entry
// that names them and deleted after the entry that ends them, so an entry
// never names a job whose body is missing; a body no entry names (left by
// a crash between the two writes) is ignored and deleted by SweepJobs.
type Catalog struct {
	kv      KV
	retries int
}

// NewCatalog returns a catalog over kv.
func NewCatalog(kv KV) *Catalog { return &Catalog{kv: withRetries(kv), retries: 32} }

func catalogKey(table, projection string) string { return table + "/" + projection }

// Get returns the projection's state and revision; a projection the catalog
// does not hold comes back empty with revision 0.
func (c *Catalog) Get(ctx context.Context, table, projection string) (*ProjectionState, uint64, error) {
	data, rev, err := c.kv.Get(ctx, catalogKey(table, projection))
	if errors.Is(err, ErrKeyNotFound) {
		return &ProjectionState{Table: table, Projection: projection}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: read %s.%s: %w", table, projection, err)
	}
	st, err := DecodeEntry(data)
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: decode %s.%s at revision %d: %w", table, projection, rev, err)
	}
	if st.Table != table || st.Projection != projection {
		return nil, 0, fmt.Errorf("catalog: entry %q names %s.%s", catalogKey(table, projection), st.Table, st.Projection)
	}
	return st, rev, nil
}

// Update applies fn to the projection's current state and writes the result
// with compare-and-set, reading again and re-applying fn when another writer
// changed the entry in between; fn must therefore depend only on its
// argument. An error from fn aborts the update and is returned as is.
func (c *Catalog) Update(ctx context.Context, table, projection string, fn func(*ProjectionState) error) (*ProjectionState, error) {
	for range c.retries {
		st, rev, err := c.Get(ctx, table, projection)
		if err != nil {
			return nil, err
		}
		if err := fn(st); err != nil {
			return nil, err
		}
		err = c.write(ctx, st, rev)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, fmt.Errorf("catalog: update %s.%s: %d attempts lost the race: %w", table, projection, c.retries, ErrConflict)
}

// write stores st over revision rev (0: a new entry). The bodies an entry
// of format 0 held are first written under their own keys.
func (c *Catalog) write(ctx context.Context, st *ProjectionState, rev uint64) error {
	for _, p := range st.Pending {
		if p.inline == nil {
			continue
		}
		data, err := encodeJob(st.Table, st.Projection, p.Seq, p.inline)
		if err != nil {
			return fmt.Errorf("catalog: encode job %s: %w", p.JobID, err)
		}
		// Only this job's entry names its number, so a body already there
		// is this one, stored by an earlier rewrite that lost its race.
		if _, err := c.kv.Create(ctx, jobKey(st.Table, st.Projection, p.Seq), data); err != nil && !errors.Is(err, ErrConflict) {
			return fmt.Errorf("catalog: write job %s: %w", p.JobID, err)
		}
	}
	data, err := encodeEntry(st)
	if err != nil {
		return fmt.Errorf("catalog: encode %s.%s: %w", st.Table, st.Projection, err)
	}
	key := catalogKey(st.Table, st.Projection)
	if rev == 0 {
		_, err = c.kv.Create(ctx, key, data)
	} else {
		_, err = c.kv.Update(ctx, key, data, rev)
	}
	if errors.Is(err, ErrConflict) {
		return err
	}
	if err != nil {
		return fmt.Errorf("catalog: write %s.%s: %w", st.Table, st.Projection, err)
	}
	return nil
}

// maxSkips bounds the job numbers AddJob passes over because a body is
// already stored under them.
const maxSkips = 16

// AddJob makes a pending job in the projection's entry, as one
// compare-and-set like Update. make builds the job from the state read and
// the number the job is to have (the job's ID and output derive from it);
// it must depend only on its arguments and not change the state. The
// job's body is written first under its own key, created only if absent,
// so no two writers ever store two bodies under one number: a number whose
// key is taken (by a writer that crashed or is losing a race) is passed
// over. The entry then names the job, counts its inputs as read and takes
// its number as NextSeq. A body whose entry write lost the race is deleted
// before trying again. answer, if not nil, records in the same write the
// answer to the client request that asked for the job (requests.go).
func (c *Catalog) AddJob(ctx context.Context, table, projection, pool string,
	make func(st *ProjectionState, seq uint64) (job, error), answer func(*ProjectionState, job) error) (*ProjectionState, job, error) {
	for range c.retries {
		st, rev, err := c.Get(ctx, table, projection)
		if err != nil {
			return nil, nil, err
		}
		j, seq, err := c.createBody(ctx, st, make)
		if err != nil {
			return nil, nil, err
		}
		st.addJob(j, seq, pool)
		if answer != nil {
			err = answer(st, j)
		}
		if err == nil {
			err = c.write(ctx, st, rev)
		}
		if errors.Is(err, ErrConflict) {
			// Not written: no entry names the body.
			if derr := c.kv.Delete(ctx, jobKey(table, projection, seq)); derr != nil {
				return nil, nil, fmt.Errorf("catalog: drop unused job %s: %w", j.id(), derr)
			}
			continue
		}
		if err != nil {
			// Perhaps written: the body stays, and is swept if no entry names it.
			return nil, nil, err
		}
		return st, j, nil
	}
	return nil, nil, fmt.Errorf("catalog: add job to %s.%s: %d attempts lost the race: %w", table, projection, c.retries, ErrConflict)
}

// createBody makes the job numbered after st.NextSeq and creates its body.
func (c *Catalog) createBody(ctx context.Context, st *ProjectionState, make func(*ProjectionState, uint64) (job, error)) (job, uint64, error) {
	for seq := st.NextSeq + 1; seq <= st.NextSeq+maxSkips; seq++ {
		j, err := make(st, seq)
		if err != nil {
			return nil, 0, err
		}
		data, err := encodeJob(st.Table, st.Projection, seq, j)
		if err != nil {
			return nil, 0, fmt.Errorf("catalog: encode job %s: %w", j.id(), err)
		}
		_, err = c.kv.Create(ctx, jobKey(st.Table, st.Projection, seq), data)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("catalog: write job %s: %w", j.id(), err)
		}
		return j, seq, nil
	}
	return nil, 0, fmt.Errorf("catalog: %s.%s: job numbers %d to %d are all taken: %w",
		st.Table, st.Projection, st.NextSeq+1, st.NextSeq+maxSkips, ErrConflict)
}

// readerOf returns the first pending job of st that reads container id,
// or "" (for messages: the entry counts a container's readers, their
// bodies name them).
func (c *Catalog) readerOf(ctx context.Context, st *ProjectionState, id string) string {
	for i := range st.Pending {
		j, err := c.Job(ctx, st.Table, st.Projection, &st.Pending[i])
		if err == nil && slices.ContainsFunc(j.inputs(), func(in messages.ContainerRef) bool { return in.ID == id }) {
			return j.id()
		}
	}
	return ""
}

// Job returns the body of a pending job of the projection.
func (c *Catalog) Job(ctx context.Context, table, projection string, p *PendingJob) (job, error) {
	if p.inline != nil {
		return p.inline, nil
	}
	data, _, err := c.kv.Get(ctx, jobKey(table, projection, p.Seq))
	if err != nil {
		return nil, fmt.Errorf("catalog: read job %s: %w", p.JobID, err)
	}
	j, err := decodeJob(table, projection, p.Seq, data)
	if err != nil {
		return nil, fmt.Errorf("catalog: decode job %s: %w", p.JobID, err)
	}
	if j.id() != p.JobID || j.kind() != p.Operation {
		return nil, fmt.Errorf("catalog: job %d of %s.%s is %s %s, the entry names %s %s",
			p.Seq, table, projection, j.kind(), j.id(), p.Operation, p.JobID)
	}
	return j, nil
}

// DropJob deletes the body of a job no entry names any more.
func (c *Catalog) DropJob(ctx context.Context, table, projection string, seq uint64) error {
	if err := c.kv.Delete(ctx, jobKey(table, projection, seq)); err != nil {
		return fmt.Errorf("catalog: delete job %d of %s.%s: %w", seq, table, projection, err)
	}
	return nil
}

// SweepJobs deletes the job bodies no entry names: those of projections
// the catalog does not hold, and those numbered at most their entry's
// NextSeq that it does not name. Such a body stays unnamed: a writer that
// made it read an older revision of the entry (or one since deleted), so
// its entry write cannot succeed. A body numbered past NextSeq may be a
// writer's between its two writes and is left. Returns the keys deleted.
func (c *Catalog) SweepJobs(ctx context.Context) ([]string, error) {
	keys, err := c.kv.Keys(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("catalog: list: %w", err)
	}
	entries := map[string]*ProjectionState{} // read after the keys were listed; nil: none
	var swept []string
	for _, k := range keys {
		table, projection, seq, ok := parseJobKey(k)
		if !ok {
			continue
		}
		st, ok := entries[catalogKey(table, projection)]
		if !ok {
			got, rev, err := c.Get(ctx, table, projection)
			if err != nil {
				return swept, err
			}
			if rev != 0 {
				st = got
			}
			entries[catalogKey(table, projection)] = st
		}
		if st != nil && (seq > st.NextSeq || slices.ContainsFunc(st.Pending, func(p PendingJob) bool { return p.Seq == seq })) {
			continue
		}
		if err := c.kv.Delete(ctx, k); err != nil {
			return swept, fmt.Errorf("catalog: delete orphaned job %s: %w", k, err)
		}
		swept = append(swept, k)
	}
	return swept, nil
}

// Delete forgets a projection.
func (c *Catalog) Delete(ctx context.Context, table, projection string) error {
	if err := c.kv.Delete(ctx, catalogKey(table, projection)); err != nil {
		return fmt.Errorf("catalog: delete %s.%s: %w", table, projection, err)
	}
	return nil
}

// List returns every projection's state, by table then projection. A
// non-empty table limits it to that table.
func (c *Catalog) List(ctx context.Context, table string) ([]*ProjectionState, error) {
	prefix := ""
	if table != "" {
		prefix = table + "/"
	}
	keys, err := c.kv.Keys(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("catalog: list: %w", err)
	}
	var out []*ProjectionState
	for _, k := range keys {
		t, p, ok := strings.Cut(k, "/")
		if !ok || strings.Contains(p, "/") {
			continue // not an entry: a job body, or not a catalog key
		}
		st, rev, err := c.Get(ctx, t, p)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			continue // deleted since Keys
		}
		out = append(out, st)
	}
	return out, nil
}
