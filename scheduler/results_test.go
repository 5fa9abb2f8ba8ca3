package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// countingKV counts the reads and listings of a catalog.
type countingKV struct {
	*MemKV
	gets, lists int
}

func (c *countingKV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	c.gets++
	return c.MemKV.Get(ctx, key)
}

func (c *countingKV) Keys(ctx context.Context, prefix string) ([]string, error) {
	c.lists++
	return c.MemKV.Keys(ctx, prefix)
}

// startOver makes the harness's scheduler one over catalog (the
// harness's catalog seen through a wrapper).
func (h *harness) startOver(catalog KV) {
	h.t.Helper()
	s, err := New(h.ctx, catalog, h.pools, h.pub, h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
}

// runWindowJob is endWindowJob, then a tick (which prunes the result
// tables).
func runWindowJob(h *harness, beforeDone func()) messages.ContainerRef {
	h.t.Helper()
	out := endWindowJob(h, beforeDone)
	h.s.Tick(h.ctx)
	return out
}

// endWindowJob submits a window job over t and settles it with a result
// of two rows, a second later than the last; beforeDone (if any) runs just
// before the done event.
func endWindowJob(h *harness, beforeDone func()) messages.ContainerRef {
	h.t.Helper()
	if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a"}}}}); err != nil {
		h.t.Fatal(err)
	}
	w := h.pub.windows[len(h.pub.windows)-1]
	out := messages.ContainerRef{Table: w.ResultTable, Projection: "result", ID: w.Output, Rows: 2}
	h.mkdir(out)
	h.clock.Advance(time.Second)
	if beforeDone != nil {
		beforeDone()
	}
	h.event(&messages.JobEvent{JobID: w.JobID, Type: messages.EventDone, Output: &out})
	return out
}

// A window job's end registers its result and drops nothing: the result
// tables past KeepResults are dropped at the next tick, so the request
// that follows a job's end does not wait for the prune's catalog writes
// and directory removal.
func TestWindowResultsPrunedAtTick(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, KeepResults: 2})
	counting := &writeCountingKV{MemKV: h.catalog}
	h.startOver(counting)
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	var results []messages.ContainerRef
	for i := range 4 {
		results = append(results, endWindowJob(h, func() { counting.deletes, counting.lists = 0, 0 }))
		if counting.lists != 0 || counting.deletes > 1 { // the job's body
			t.Fatalf("job %d's end listed the catalog %d times and deleted %d keys", i, counting.lists, counting.deletes)
		}
	}
	for i, r := range results {
		if !h.exists(r) {
			t.Fatalf("result %d (%s) dropped before a tick", i, r.Table)
		}
	}
	h.s.Tick(h.ctx)
	for i, r := range results {
		if kept := i >= 2; h.exists(r) != kept {
			t.Fatalf("after a tick, result %d (%s): exists=%v, want %v", i, r.Table, h.exists(r), kept)
		}
	}
}

// writeCountingKV counts the listings and deletes of a catalog.
type writeCountingKV struct {
	*MemKV
	lists, deletes int
}

func (c *writeCountingKV) Keys(ctx context.Context, prefix string) ([]string, error) {
	c.lists++
	return c.MemKV.Keys(ctx, prefix)
}

func (c *writeCountingKV) Delete(ctx context.Context, key string) error {
	c.deletes++
	return c.MemKV.Delete(ctx, key)
}

// A window job's end reads a few catalog entries, not one per result
// table kept, and lists the catalog's keys only once every KeepResults
// jobs: the oldest past KeepResults is found from the result tables
// registered and the ages read before; the results kept are the newest.
func TestWindowResultsPruneReadsLittle(t *testing.T) {
	const keep = 30
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 1000}, KeepResults: keep})
	counting := &countingKV{MemKV: h.catalog}
	h.startOver(counting)
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	var results []messages.ContainerRef
	most := 0
	counting.lists = 0
	const jobs = 3*keep + 20
	for i := range jobs {
		results = append(results, runWindowJob(h, func() { counting.gets = 0 }))
		if i > keep+1 { // past the first prune, which reads every result's age once
			most = max(most, counting.gets)
		}
		for j, r := range results {
			if kept := j >= len(results)-keep; h.exists(r) != kept {
				t.Fatalf("after job %d: result %d (%s): exists=%v, want %v", i, j, r.Table, h.exists(r), kept)
			}
		}
	}
	if most > 15 { // 43 when every entry was read
		t.Fatalf("a job's end read %d catalog entries with %d results kept", most, keep)
	}
	// Each window request lists its table's entries; the prunes list the
	// keys once at first and once every keep jobs after.
	if prunes := counting.lists - jobs; prunes > 1+jobs/keep {
		t.Fatalf("%d jobs listed the catalog's keys %d times for the prune; want at most %d", jobs, prunes, 1+jobs/keep)
	}
}

// A result table the scheduler knows of that is dropped by someone else is
// not written again by the prune, and a result table it never registered
// is pruned once the catalog's keys are listed again.
func TestWindowResultsPruneStaleSet(t *testing.T) {
	const keep = 5
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 1000}, KeepResults: keep})
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	var results []messages.ContainerRef
	for range keep {
		results = append(results, runWindowJob(h, nil))
	}
	// The oldest result's entry is deleted from under the scheduler.
	gone := results[0]
	if err := h.catalog.Delete(h.ctx, catalogKey(gone.Table, gone.Projection)); err != nil {
		t.Fatal(err)
	}
	// A result table made before (another scheduler's, say), older than
	// every other: the first prune after the next listing drops it.
	stray := messages.ContainerRef{Table: "t_window_900", Projection: "result", ID: "w00000900", Rows: 2}
	h.mkdir(stray)
	if _, err := h.s.catalog.Update(h.ctx, stray.Table, stray.Projection, func(st *ProjectionState) error {
		st.Live, st.ResultOf, st.Created = []messages.ContainerRef{stray}, "window.t.p.900", 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 * keep {
		results = append(results, runWindowJob(h, nil))
		if _, rev, err := h.s.catalog.Get(h.ctx, gone.Table, gone.Projection); err != nil || rev != 0 {
			t.Fatalf("a result table dropped by someone else is in the catalog again (revision %d, %v)", rev, err)
		}
	}
	if h.exists(stray) {
		t.Fatalf("result table %s, older than those kept, not pruned after the keys were listed again", stray.Table)
	}
	for j, r := range results[1:] {
		if kept := j >= len(results)-1-keep; h.exists(r) != kept {
			t.Fatalf("result %d (%s): exists=%v, want %v", j+1, r.Table, h.exists(r), kept)
		}
	}
}
