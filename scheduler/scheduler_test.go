package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// recorder is a Publisher that keeps what it was given, like JetStream with
// Nats-Msg-Id dedupe: a job published twice is recorded twice in sent but
// delivered once.
type recorder struct {
	mu        sync.Mutex
	mergeouts []*messages.MergeoutJob
	windows   []*messages.WindowJob
	events    []*messages.JobEvent
	cancels   []*messages.CancelNotice
	delivered map[string]bool
	fail      error
}

func (r *recorder) PublishJob(_ context.Context, subject, jobID string, m messages.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	switch j := m.(type) {
	case *messages.MergeoutJob:
		if subject != messages.SubjectJobMergeout || jobID != j.JobID {
			return fmt.Errorf("mergeout job %s published on %s as %s", j.JobID, subject, jobID)
		}
		if r.delivered == nil {
			r.delivered = map[string]bool{}
		}
		if !r.delivered[j.JobID] {
			r.delivered[j.JobID] = true
			c := *j
			r.mergeouts = append(r.mergeouts, &c)
		}
	case *messages.WindowJob:
		if subject != messages.SubjectJobWindow || jobID != j.JobID {
			return fmt.Errorf("window job %s published on %s as %s", j.JobID, subject, jobID)
		}
		c := *j
		r.windows = append(r.windows, &c)
	default:
		return fmt.Errorf("published a %s", m.Kind())
	}
	return nil
}

func (r *recorder) PublishCancel(_ context.Context, n *messages.CancelNotice) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancels = append(r.cancels, n)
	return nil
}

func (r *recorder) PublishEvent(_ context.Context, ev *messages.JobEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

type harness struct {
	t       *testing.T
	ctx     context.Context
	catalog *MemKV
	pools   *MemKV
	pub     *recorder
	clock   *ManualClock
	dir     string
	opts    Options
	s       *Scheduler
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), catalog: NewMemKV(), pools: NewMemKV(), pub: &recorder{},
		clock: NewManualClock(t0), dir: t.TempDir()}
	opts.Data, opts.Clock = newRootStorage(t, h.dir), h.clock
	h.opts = opts
	h.start()
	return h
}

// start makes a scheduler over the harness's stores, as a restart would.
func (h *harness) start() {
	h.t.Helper()
	s, err := New(h.ctx, h.catalog, h.pools, h.pub, h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
}

// load writes n container directories and registers them.
func (h *harness) load(table string, first, n int, bytes int64) error {
	h.t.Helper()
	req := &messages.RegisterRequest{Table: table, Projection: "p"}
	for i := first; i < first+n; i++ {
		c := messages.ContainerRef{Table: table, Projection: "p", ID: fmt.Sprintf("c%04d", i), Rows: 100, Bytes: bytes}
		h.mkdir(c)
		req.Containers = append(req.Containers, c)
	}
	_, err := h.s.Register(h.ctx, req)
	return err
}

func (h *harness) mkdir(c messages.ContainerRef) {
	h.t.Helper()
	dir := filepath.Join(h.dir, c.Table, c.Projection, c.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	stub := fmt.Sprintf(`{"table":%q,"projection":%q,"id":%q,"rows":%d,"bytes":%d}`, c.Table, c.Projection, c.ID, c.Rows, c.Bytes)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(stub), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) exists(c messages.ContainerRef) bool {
	_, err := os.Stat(filepath.Join(h.dir, c.Table, c.Projection, c.ID))
	return err == nil
}

// finish plays a worker: writes the output and sends the done event.
func (h *harness) finish(j *messages.MergeoutJob, peak int64) {
	h.t.Helper()
	var rows, bytes int64
	for _, in := range j.Inputs {
		rows += in.Rows
		bytes += in.Bytes
	}
	out := messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output, Rows: rows, Bytes: bytes}
	h.mkdir(out)
	h.event(&messages.JobEvent{JobID: j.JobID, Operation: messages.OperationMergeout, Type: messages.EventDone,
		Worker: "merger-1", Output: &out, RowsTotal: rows, Bytes: bytes, PeakBytes: peak, Plan: "vertical"})
}

// event plays a worker's event. A claim that names no worker comes from
// merger-1; its worker first accepts the job if no worker has.
func (h *harness) event(ev *messages.JobEvent) {
	h.t.Helper()
	if err := h.claim(ev); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) claim(ev *messages.JobEvent) error {
	h.t.Helper()
	if ev.Type != messages.EventAccepted {
		if ev.Worker == "" {
			ev.Worker = "merger-1"
		}
		h.s.mu.Lock()
		_, held := h.s.accepted[ev.JobID]
		_, pending := h.s.where[ev.JobID]
		h.s.mu.Unlock()
		if pending && !held {
			if err := h.s.HandleEvent(h.ctx, &messages.JobEvent{JobID: ev.JobID, Type: messages.EventAccepted, Worker: ev.Worker, Delivery: 1}); err != nil {
				return err
			}
		}
	}
	return h.s.HandleEvent(h.ctx, ev)
}

func (h *harness) state(table string) *ProjectionState {
	h.t.Helper()
	st, _, err := NewCatalog(h.catalog).Get(h.ctx, table, "p")
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// checkConsistent asserts no container is live twice, every live container
// has its directory, and no dead one is left unread.
func (h *harness) checkConsistent(table string) {
	h.t.Helper()
	st := h.state(table)
	seen := map[string]bool{}
	for _, c := range st.Live {
		if seen[c.ID] {
			h.t.Fatalf("container %s live twice", c.ID)
		}
		seen[c.ID] = true
		if !h.exists(c) {
			h.t.Fatalf("live container %s has no directory", c.ID)
		}
	}
	readers := st.readers()
	for _, c := range st.Dead {
		if !readers[c.ID] {
			h.t.Fatalf("dead container %s kept with no reader", c.ID)
		}
	}
}

func liveRows(st *ProjectionState) int64 { return rowsOf(st.Live) }

func TestMergeoutLifecycle(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 4}})
	if err := h.load("t", 0, 3, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 0 {
		t.Fatal("mergeout below capacity")
	}
	if err := h.load("t", 3, 1, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 1 {
		t.Fatalf("%d mergeouts published at capacity, want 1", len(h.pub.mergeouts))
	}
	j := h.pub.mergeouts[0]
	if len(j.Inputs) != 4 || j.Grant.Bytes != 100<<20 || j.Grant.Pool != "tm" || j.Output != "m00000001" {
		t.Fatalf("job %+v", j)
	}
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1})
	h.finish(j, 150<<20)
	st := h.state("t")
	if len(st.Live) != 1 || st.Live[0].ID != j.Output || liveRows(st) != 400 || len(st.Dead) != 0 || len(st.Pending) != 0 {
		t.Fatalf("after done: %+v", st)
	}
	for _, in := range j.Inputs {
		if h.exists(in) {
			t.Fatalf("merged input %s not removed", in.ID)
		}
	}
	// A redelivered done event changes nothing.
	h.finish(j, 150<<20)
	if got := h.state("t"); len(got.Live) != 1 {
		t.Fatalf("duplicate done event changed the catalog: %+v", got.Live)
	}
	ops, _ := h.s.Operations(&messages.OperationsRequest{})
	op := ops.Operations[0]
	if op.Status != messages.StatusDone || op.Worker != "merger-1" || op.Rows != 400 || op.Plan != "vertical" || !op.MemoryConstrained || op.Inputs != 4 {
		t.Fatalf("operation %+v", op)
	}
	pools := h.s.Pools()
	var tm messages.PoolStatus
	for _, p := range pools.Pools {
		if p.Config.Name == "tm" {
			tm = p
		}
	}
	if tm.InUse != 0 || tm.Constrained != 1 || tm.LargestPeak != 150<<20 ||
		!strings.Contains(tm.Recommendation, "grow pool tm to 300MiB") || !strings.Contains(tm.Recommendation, "1 operations were memory-constrained") {
		t.Fatalf("tm status %+v", tm)
	}
	h.checkConsistent("t")
}

func TestTooManyContainers(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100, MaxContainers: 10}})
	if err := h.load("t", 0, 8, 1000); err != nil {
		t.Fatal(err)
	}
	err := h.load("t", 8, 3, 1000)
	var tm *TooManyContainersError
	if !errors.As(err, &tm) || !errors.Is(err, ErrTooManyContainers) || tm.Live != 8 || tm.Adding != 3 || tm.Max != 10 {
		t.Fatalf("got %v, want a too many containers error", err)
	}
	if !strings.Contains(err.Error(), "too many containers") {
		t.Fatalf("message %q", err)
	}
	if APIError(err).Code != messages.ErrCodeTooManyContainers {
		t.Fatalf("code %q", APIError(err).Code)
	}
	if got := len(h.state("t").Live); got != 8 {
		t.Fatalf("refused load changed the catalog: %d live", got)
	}
	// Registering the same containers again is a no-op, not a refusal.
	if err := h.load("t", 0, 8, 1000); err != nil {
		t.Fatal(err)
	}
}

func TestQueueAndTimeout(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}})
	// Three strata-0 pairs -> three mergeouts; tm holds two.
	if err := h.load("t", 0, 6, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 2 {
		t.Fatalf("%d published, want 2 with the third queued", len(h.pub.mergeouts))
	}
	ops, _ := h.s.Operations(&messages.OperationsRequest{})
	if ops.Operations[0].Status != messages.StatusQueued {
		t.Fatalf("newest operation %+v, want queued", ops.Operations[0])
	}
	queuedJob := ops.Operations[0].JobID
	// Finishing one admits the queued job.
	h.finish(h.pub.mergeouts[0], 1<<20)
	if len(h.pub.mergeouts) != 3 || h.pub.mergeouts[2].JobID != queuedJob {
		t.Fatalf("queued job not published after a release: %d published", len(h.pub.mergeouts))
	}
	// Now fill the pool and let a new one time out.
	if err := h.load("t", 6, 2, 1000); err != nil {
		t.Fatal(err)
	}
	ops, _ = h.s.Operations(&messages.OperationsRequest{})
	waiting := ops.Operations[0]
	if waiting.Status != messages.StatusQueued {
		t.Fatalf("newest %+v, want queued", waiting)
	}
	h.clock.Advance(5*time.Minute + time.Second)
	h.s.Tick(h.ctx)
	ops, _ = h.s.Operations(&messages.OperationsRequest{JobID: waiting.JobID})
	if op := ops.Operations[0]; op.Status != messages.StatusFailed || !strings.Contains(op.Reason, "queued 5m1s in pool tm") {
		t.Fatalf("timed-out operation %+v", op)
	}
	if len(h.pub.events) != 1 || h.pub.events[0].JobID != waiting.JobID || h.pub.events[0].Type != messages.EventFailed {
		t.Fatalf("failed event not published: %+v", h.pub.events)
	}
	if got := len(h.state("t").Pending); got != 2 {
		t.Fatalf("%d pending, want the two running", got)
	}
	// A final failure frees inputs and memory; a retryable one does not.
	running := h.pub.mergeouts[1]
	h.event(&messages.JobEvent{JobID: running.JobID, Type: messages.EventFailed, Reason: "disk full", Retryable: true})
	if _, ok := h.state("t").pending(running.JobID); !ok {
		t.Fatal("retryable failure settled the job")
	}
	h.event(&messages.JobEvent{JobID: running.JobID, Type: messages.EventFailed, Reason: "disk full"})
	if _, ok := h.state("t").pending(running.JobID); ok {
		t.Fatal("final failure left the job pending")
	}
	if tm := h.s.Pools().Pools[1]; tm.Failed != 2 {
		t.Fatalf("tm counts %d failed operations, want 2 (a timeout and a failure)", tm.Failed)
	}
	acq, _ := h.s.Acquisitions(&messages.AcquisitionsRequest{Pool: "tm"})
	if len(acq.Acquisitions) != 4 {
		t.Fatalf("%d acquisitions, want 4", len(acq.Acquisitions))
	}
	h.checkConsistent("t")
}

func TestWindowKeepsInputsUntilDone(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 4}})
	if err := h.load("t", 0, 3, 1000); err != nil {
		t.Fatal(err)
	}
	reply, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.pub.windows) != 1 || reply.Job.Grant.Pool != "general" || reply.Job.Grant.Bytes != 256<<20 || reply.ResultTable != "t_window_1" {
		t.Fatalf("window reply %+v, published %d", reply, len(h.pub.windows))
	}
	w := h.pub.windows[0]
	// A mergeout requested now may still merge the window's inputs: the
	// window only reads them.
	m, err := h.s.RequestMergeout(h.ctx, &messages.MergeoutRequest{Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Jobs) != 0 {
		// Inputs read by the window are busy: nothing else to merge.
		t.Fatalf("mergeout chose containers a window reads: %+v", m.Jobs)
	}
	if err := h.load("t", 3, 1, 1000); err != nil {
		t.Fatal(err)
	}
	m, _ = h.s.RequestMergeout(h.ctx, &messages.MergeoutRequest{Table: "t"})
	if len(m.Jobs) != 0 {
		t.Fatalf("one free container merged alone: %+v", m.Jobs)
	}
	// The window finishes: its result becomes a live table.
	out := messages.ContainerRef{Table: w.ResultTable, Projection: messages.ResultProjection, ID: w.Output, Rows: 300}
	h.mkdir(out)
	h.event(&messages.JobEvent{JobID: w.JobID, Operation: messages.OperationWindow, Type: messages.EventDone, Output: &out, PeakBytes: 1 << 20})
	if got, _, _ := NewCatalog(h.catalog).Get(h.ctx, w.ResultTable, messages.ResultProjection); len(got.Live) != 1 || got.Live[0].ID != w.Output {
		t.Fatalf("result table catalog %+v", got)
	}
	if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "nope",
		Select: []messages.SelectItem{{Alias: "a"}}}}); !errors.Is(err, ErrUnknownTable) {
		t.Fatalf("window over a missing table: %v", err)
	}
	if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Pool: "nope", Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a"}}}}); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("window in a missing pool: %v", err)
	}
}

func TestDeadContainerWaitsForReader(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 4, 1000); err != nil {
		t.Fatal(err)
	}
	m, err := h.s.RequestMergeout(h.ctx, &messages.MergeoutRequest{Table: "t"})
	if err != nil || len(m.Jobs) != 1 {
		t.Fatalf("mergeout now: %+v %v", m, err)
	}
	again, err := h.s.RequestMergeout(h.ctx, &messages.MergeoutRequest{Table: "t"})
	if err != nil || len(again.Jobs) != 0 || len(again.Running) != 1 || again.Running[0].JobID != m.Jobs[0].JobID {
		t.Fatalf("second request while the first runs: %+v %v", again, err)
	}
	// A window starts while the mergeout runs and reads the same containers.
	if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a"}}}}); err != nil {
		t.Fatal(err)
	}
	h.finish(h.pub.mergeouts[0], 1)
	st := h.state("t")
	if len(st.Dead) != 4 {
		t.Fatalf("dead %d, want the 4 inputs kept for the window", len(st.Dead))
	}
	for _, c := range st.Dead {
		if !h.exists(c) {
			t.Fatalf("container %s removed while a window reads it", c.ID)
		}
	}
	w := h.pub.windows[0]
	h.event(&messages.JobEvent{JobID: w.JobID, Type: messages.EventFailed, Reason: "bad query"})
	st = h.state("t")
	if len(st.Dead) != 0 {
		t.Fatalf("dead %d after the window ended", len(st.Dead))
	}
	for _, in := range h.pub.mergeouts[0].Inputs {
		if h.exists(in) {
			t.Fatalf("dead container %s not removed", in.ID)
		}
	}
	h.checkConsistent("t")
}

// TestRestartMidMergeout kills the scheduler (drops it) with mergeouts
// running and queued, starts a new one on the same stores, and replays the
// events the old one never saw: every operation completes once and the
// catalog stays consistent.
func TestRestartMidMergeout(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}, OrphanGrace: time.Minute})
	if err := h.load("t", 0, 6, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 2 {
		t.Fatalf("%d published", len(h.pub.mergeouts))
	}
	first := h.pub.mergeouts[0]
	// The first job finishes while the scheduler is down: its output is
	// committed and its done event waits in EVENTS.
	out := messages.ContainerRef{Table: "t", Projection: "p", ID: first.Output, Rows: 200, Bytes: 2000}
	h.mkdir(out)
	done := &messages.JobEvent{JobID: first.JobID, Type: messages.EventDone, Output: &out, RowsTotal: 200, Bytes: 2000}
	// A crashed load left an old unregistered directory, and a fresh one.
	orphan := messages.ContainerRef{Table: "t", Projection: "p", ID: "orphan"}
	h.mkdir(orphan)
	old := t0.Add(-time.Hour)
	os.Chtimes(filepath.Join(h.dir, "t", "p", "orphan"), old, old)
	// The writer of a running job's output keeps its temporary directory.
	writing := filepath.Join(h.dir, "t", "p", "."+h.pub.mergeouts[1].Output+".tmp-123")
	os.MkdirAll(writing, 0o755)
	os.Chtimes(writing, old, old)
	fresh := messages.ContainerRef{Table: "t", Projection: "p", ID: "fresh"}
	h.mkdir(fresh)
	os.Chtimes(filepath.Join(h.dir, "t", "p", "fresh"), t0, t0)

	h.pub.delivered = nil // the new scheduler republishes; dedupe window passed
	h.pub.mergeouts = nil
	h.start()

	if _, err := os.Stat(writing); err != nil {
		t.Fatalf("a running job's temporary output was removed: %v", err)
	}
	if h.exists(orphan) || !h.exists(fresh) {
		t.Fatalf("orphan removal: old exists=%v, fresh exists=%v; want only the old one gone", h.exists(orphan), h.exists(fresh))
	}
	// Inside every named container, uploads older than the grace period
	// that no commit names are removed; nothing else is looked into.
	cutoff := t0.Add(-time.Minute).UTC().Format(time.RFC3339)
	var want []string
	for _, id := range []string{"c0000", "c0001", "c0002", "c0003", "c0004", "c0005", first.Output} {
		want = append(want, "t/p/"+id+" "+cutoff)
	}
	if got := h.opts.Data.(*rootStorage).uncommitted; !slices.Equal(got, want) {
		t.Fatalf("uncommitted uploads looked for in %v, want %v", got, want)
	}
	// Granted jobs are published again (deduped by job ID downstream); the
	// queued third stays queued behind the two held grants.
	if len(h.pub.mergeouts) != 2 {
		t.Fatalf("republished %d jobs, want 2", len(h.pub.mergeouts))
	}
	tm := h.s.Pools().Pools[1]
	if tm.Config.Name != "tm" || tm.InUse != 200<<20 || tm.Running != 2 || tm.Queued != 1 {
		t.Fatalf("tm after restart: %+v", tm)
	}
	// Replayed events: the done event twice (redelivered), then the rest.
	h.event(done)
	h.event(done)
	if len(h.pub.mergeouts) != 3 {
		t.Fatalf("queued job not started after the replayed done: %d", len(h.pub.mergeouts))
	}
	// Play the workers until nothing is pending: the outputs cascade
	// through further mergeouts (capacity 2) down to one container.
	for finished := 1; finished < len(h.pub.mergeouts); finished++ {
		h.finish(h.pub.mergeouts[finished], 1)
	}
	st := h.state("t")
	if len(st.Pending) != 0 || liveRows(st) != 600 || len(st.Live) != 1 {
		t.Fatalf("after all done: pending %d, live %+v; want one container of 600 rows", len(st.Pending), st.Live)
	}
	if len(h.pub.mergeouts) != 5 {
		t.Fatalf("%d mergeouts, want 3 + 2 cascading", len(h.pub.mergeouts))
	}
	ops, _ := h.s.Operations(&messages.OperationsRequest{})
	seen := map[string]bool{}
	for _, op := range ops.Operations {
		if op.Status != messages.StatusDone || seen[op.JobID] {
			t.Fatalf("operation %+v: want each done once", op)
		}
		seen[op.JobID] = true
	}
	if len(seen) != 5 {
		t.Fatalf("%d operations, want 5", len(seen))
	}
	h.checkConsistent("t")
	if tm := h.s.Pools().Pools[1]; tm.InUse != 0 || tm.Queued != 0 || tm.Running != 0 {
		t.Fatalf("grants leaked: %+v", tm)
	}
}

func TestPoolsPersistAndAlter(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}})
	mem := int64(8 << 30)
	if _, err := h.s.AlterPool(h.ctx, &messages.AlterPoolRequest{Name: "tm", MemorySize: &mem}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.CreatePool(h.ctx, &messages.CreatePoolRequest{Pool: testPool("batch", 1<<30, 2<<30, 2, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.CreatePool(h.ctx, &messages.CreatePoolRequest{Pool: testPool("batch", 1<<30, 2<<30, 2, 0)}); !errors.Is(err, ErrPoolExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	bad := 0
	if _, err := h.s.AlterPool(h.ctx, &messages.AlterPoolRequest{Name: "tm", PlannedConcurrency: &bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid alter: %v", err)
	}
	if _, err := h.s.AlterPool(h.ctx, &messages.AlterPoolRequest{Name: "nope", PlannedConcurrency: &bad}); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("unknown pool: %v", err)
	}
	h.start() // restart: pools come back from the bucket
	names := map[string]messages.PoolStatus{}
	for _, p := range h.s.Pools().Pools {
		names[p.Config.Name] = p
	}
	if names["tm"].Config.MemorySize != 8<<30 || names["tm"].Target != 4<<30 || names["batch"].Config.MaxMemorySize != 2<<30 {
		t.Fatalf("pools after restart: %+v", names)
	}
	// A window in the user-defined pool gets its target.
	if err := h.load("t", 0, 1, 1000); err != nil {
		t.Fatal(err)
	}
	r, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Pool: "batch", Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a"}}}})
	if err != nil || r.Job.Grant.Bytes != 512<<20 {
		t.Fatalf("window in batch: %+v %v", r, err)
	}
}

func TestAlterPoolAdmitsQueued(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}})
	if err := h.load("t", 0, 6, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 2 {
		t.Fatalf("%d published", len(h.pub.mergeouts))
	}
	mem := int64(300 << 20)
	planned := 3
	if _, err := h.s.AlterPool(h.ctx, &messages.AlterPoolRequest{Name: "tm", MemorySize: &mem, PlannedConcurrency: &planned}); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 3 {
		t.Fatalf("growing the pool did not start the queued job: %d published", len(h.pub.mergeouts))
	}
}

func TestPublishFailureRetried(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}})
	h.pub.fail = errors.New("nats: timeout")
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 0 {
		t.Fatal("published despite failure")
	}
	h.pub.fail = nil
	h.s.Tick(h.ctx)
	if len(h.pub.mergeouts) != 1 {
		t.Fatalf("publish not retried: %d", len(h.pub.mergeouts))
	}
}

func TestMergeoutBorrowsWhenAllowed(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2, BaseBytes: 1 << 40}})
	maxMem := int64(1 << 30)
	if _, err := h.s.AlterPool(h.ctx, &messages.AlterPoolRequest{Name: "tm", MaxMemorySize: &maxMem}); err != nil {
		t.Fatal(err)
	}
	if err := h.load("t", 0, 2, 150<<20); err != nil { // inputs of 300MiB: wants 300MiB
		t.Fatal(err)
	}
	j := h.pub.mergeouts[0]
	if j.Grant.Bytes != 300<<20 || j.Grant.Target != 100<<20 {
		t.Fatalf("grant %+v, want 300MiB borrowed beyond the 100MiB target", j.Grant)
	}
	h.finish(j, 280<<20)
	ops, _ := h.s.Operations(&messages.OperationsRequest{JobID: j.JobID})
	if !ops.Operations[0].MemoryConstrained {
		t.Fatalf("a 280MiB peak against a 100MiB target not marked: %+v", ops.Operations[0])
	}
	tm := h.s.Pools().Pools[1]
	if !strings.Contains(tm.Recommendation, "grow pool tm to 560MiB") {
		t.Fatalf("recommendation %q", tm.Recommendation)
	}
}

func TestRestoreHistory(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}})
	if err := h.load("t", 0, 4, 1000); err != nil {
		t.Fatal(err)
	}
	first, second := h.pub.mergeouts[0], h.pub.mergeouts[1]
	out := messages.ContainerRef{Table: "t", Projection: "p", ID: first.Output, Rows: 200, Bytes: 2000}
	h.mkdir(out)
	done := &messages.JobEvent{JobID: first.JobID, Type: messages.EventDone, Worker: "w1", Time: t0.Add(time.Second).UnixNano(),
		Output: &out, RowsTotal: 200, PeakBytes: 150 << 20, Plan: "vertical"}
	h.event(done)
	h.start() // restart: only the second job is pending
	if ops, _ := h.s.Operations(&messages.OperationsRequest{}); len(ops.Operations) != 1 || ops.Operations[0].JobID != second.JobID {
		t.Fatalf("before restoring history: %+v", ops.Operations)
	}
	// Replay what JOBS and EVENTS hold.
	for _, j := range []*messages.MergeoutJob{first, second} {
		h.s.RestoreJob(j, t0)
	}
	h.s.RestoreEvent(&messages.JobEvent{JobID: first.JobID, Type: messages.EventAccepted, Worker: "w1", Delivery: 1})
	h.s.RestoreEvent(done)
	h.s.RestoreEvent(&messages.JobEvent{JobID: second.JobID, Type: messages.EventDone}) // pending: left to HandleEvent
	h.s.RestoreEvent(&messages.JobEvent{JobID: "window.t.p.9", Operation: "window", Type: messages.EventFailed, Reason: "queued too long", Time: 5})
	ops, _ := h.s.Operations(&messages.OperationsRequest{})
	byID := map[string]messages.Operation{}
	for _, op := range ops.Operations {
		byID[op.JobID] = op
	}
	if op := byID[first.JobID]; op.Status != messages.StatusDone || op.Worker != "w1" || op.Rows != 200 || !op.MemoryConstrained || op.Plan != "vertical" {
		t.Fatalf("restored first job %+v", op)
	}
	if op := byID[second.JobID]; op.Status != messages.StatusRunning {
		t.Fatalf("pending job changed by history: %+v", op)
	}
	if op := byID["window.t.p.9"]; op.Status != messages.StatusFailed || op.Reason != "queued too long" {
		t.Fatalf("failed-only job %+v", op)
	}
	if _, ok := h.state("t").pending(second.JobID); !ok {
		t.Fatal("history touched the catalog")
	}
}

func TestWindowResultsPruned(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, KeepResults: 2})
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	var results []messages.ContainerRef
	for range 4 {
		results = append(results, runWindowJob(h, nil))
	}
	for i, r := range results {
		kept := i >= 2
		if h.exists(r) != kept {
			t.Fatalf("result %d (%s): exists=%v, want %v", i, r.Table, h.exists(r), kept)
		}
		st, rev, err := NewCatalog(h.catalog).Get(h.ctx, r.Table, r.Projection)
		if err != nil || (rev != 0) != kept {
			t.Fatalf("result %d catalog entry: rev %d, %+v, %v; want kept=%v", i, rev, st, err, kept)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, results[0].Table)); !os.IsNotExist(err) {
		t.Fatalf("dropped result table directory left: %v", err)
	}
}

// flakyKV fails every write while down is set, as a bucket whose server is
// unreachable would.
// flakyKV fails every update while down, and goes down by itself after
// failAfter more updates if that is set.
type flakyKV struct {
	*MemKV
	down      bool
	failAfter int
}

func (f *flakyKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if f.failAfter > 0 {
		if f.failAfter--; f.failAfter == 0 {
			defer func() { f.down = true }()
		}
	}
	if f.down {
		return 0, errors.New("nats: timeout")
	}
	return f.MemKV.Update(ctx, key, value, last)
}

func TestEventRetriedWhenCatalogUnreachable(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 2}})
	flaky := &flakyKV{MemKV: h.catalog}
	s, err := New(h.ctx, flaky, h.pools, h.pub, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	j := h.pub.mergeouts[0]
	flaky.down = true
	failed := &messages.JobEvent{JobID: j.JobID, Type: messages.EventFailed, Worker: "merger-1", Reason: "corrupt input"}
	if err := h.s.HandleEvent(h.ctx, failed); err == nil {
		t.Fatal("event applied while the catalog could not be written")
	}
	if tm := h.s.Pools().Pools[1]; tm.InUse != 0 {
		t.Fatalf("grant of a failed job still held: %+v", tm)
	}
	flaky.down = false
	h.event(failed) // redelivered
	if st := h.state("t"); len(st.Pending) != 0 || len(st.Live) != 2 {
		t.Fatalf("after redelivery: %+v", st)
	}
	ops, _ := h.s.Operations(&messages.OperationsRequest{JobID: j.JobID})
	if ops.Operations[0].Status != messages.StatusFailed {
		t.Fatalf("operation %+v", ops.Operations[0])
	}
}

// TestWindowRequestSentAgain: a client whose reply was lost sends the same
// request ID again and gets the job it already has, not a second one.
func TestWindowRequestSentAgain(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 3, 1000); err != nil {
		t.Fatal(err)
	}
	req := func(id string) *messages.WindowReply {
		t.Helper()
		rep, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{RequestID: id, Query: messages.WindowQuery{Table: "t",
			Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first, again := req("r1"), req("r1")
	if again.Job.JobID != first.Job.JobID || again.ResultTable != first.ResultTable || len(h.pub.windows) != 1 {
		t.Fatalf("resent request: %+v then %+v, %d published", first, again, len(h.pub.windows))
	}
	if other := req("r2"); other.Job.JobID == first.Job.JobID || len(h.pub.windows) != 2 {
		t.Fatalf("another request got %+v", other)
	}
	if none := req(""); none.Job.JobID == first.Job.JobID || len(h.pub.windows) != 3 {
		t.Fatalf("a request without an ID got %+v", none)
	}
	h.start() // a restarted scheduler knows the request from the catalog
	if again := req("r1"); again.Job.JobID != first.Job.JobID || len(h.state("t").Pending) != 3 {
		t.Fatalf("resent after a restart: %+v, pending %+v", again, h.state("t").Pending)
	}
}

// TestGrantNotRecordedIsSettledLater: a window job whose grant cannot be
// recorded (the catalog does not answer) is failed and its memory given
// back; the catalog still names it pending, so the next Tick after the
// catalog answers again ends it there too, and the containers it read are
// free to go. Before, it stayed pending (queued) until a restart.
func TestGrantNotRecordedIsSettledLater(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	flaky := &flakyKV{MemKV: h.catalog}
	s, err := New(h.ctx, flaky, h.pools, h.pub, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	flaky.failAfter = 1 // the pending job is written, its grant is not
	_, err = h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.pub.windows) != 0 {
		t.Fatal("a job whose grant was not recorded was published")
	}
	if gen := h.s.Pools().Pools[0]; gen.InUse != 0 || gen.Running != 0 {
		t.Fatalf("grant of the failed job still held: %+v", gen)
	}
	if st := h.state("t"); len(st.Pending) != 1 {
		t.Fatalf("pending jobs while the catalog is down: %+v", st.Pending)
	}
	flaky.down, flaky.failAfter = false, 0
	h.s.Tick(h.ctx)
	if st := h.state("t"); len(st.Pending) != 0 || len(st.Readers) != 0 {
		t.Fatalf("after the catalog came back: %+v", st)
	}
	ops, _ := h.s.Operations(&messages.OperationsRequest{})
	if len(ops.Operations) != 1 || ops.Operations[0].Status != messages.StatusFailed {
		t.Fatalf("operations %+v", ops.Operations)
	}
}
