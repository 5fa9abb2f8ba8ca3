package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/strata-db/strata/messages"
)

// floorHook is a ChangeFloor that counts its calls.
type floorHook struct {
	mu    sync.Mutex
	floor int64
	err   error
	calls int
}

func (f *floorHook) get(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.floor, f.err
}

func (f *floorHook) called() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// finishKeyed plays a merger that folded job j's inputs into rows rows,
// its output's manifest naming the primary key pk, and returns the
// scheduler's answer to the done claim.
func (h *harness) finishKeyed(j *messages.MergeoutJob, rows int64, pk ...string) error {
	h.t.Helper()
	out := messages.ContainerRef{Table: j.Table, Projection: j.Projection, ID: j.Output, Rows: rows, Bytes: 500}
	h.mkdirKeyed(out, pk)
	return h.claim(&messages.JobEvent{JobID: j.JobID, Operation: messages.OperationMergeout, Type: messages.EventDone,
		Output: &out, RowsTotal: rows, Bytes: 500, PeakBytes: 1 << 20})
}

// requestAll asks for a mergeout of every free container of table t and
// returns the job published for it.
func (h *harness) requestAll() *messages.MergeoutJob {
	h.t.Helper()
	rep, err := h.s.RequestMergeout(h.ctx, &messages.MergeoutRequest{Table: "t"})
	if err != nil || len(rep.Jobs) != 1 {
		h.t.Fatalf("mergeout of t: %+v, %v", rep, err)
	}
	for _, j := range h.pub.mergeouts {
		if j.JobID == rep.Jobs[0].JobID {
			return j
		}
	}
	h.t.Fatalf("job %s not published", rep.Jobs[0].JobID)
	return nil
}

// TestKeyedMergeoutOutputRows: a keyed table's mergeout folds, so its
// output may hold fewer rows than its inputs, never more, and keeps the
// primary key; an append-only table's output still holds exactly its
// inputs' rows.
func TestKeyedMergeoutOutputRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pk     []string // of the table
		outPK  []string // of the output's manifest
		rows   int64    // of the output; the inputs hold 300
		accept bool
	}{
		{"keyed fewer", []string{"id"}, []string{"id"}, 120, true},
		{"keyed none left", []string{"id"}, []string{"id"}, 0, true},
		{"keyed all", []string{"id"}, []string{"id"}, 300, true},
		{"keyed more", []string{"id"}, []string{"id"}, 301, false},
		{"keyed output without its key", []string{"id"}, nil, 120, false},
		{"keyed output of another key", []string{"id"}, []string{"other"}, 120, false},
		{"append-only fewer", nil, nil, 299, false},
		{"append-only all", nil, nil, 300, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
			if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 3, tc.pk...)); err != nil {
				t.Fatal(err)
			}
			j := h.requestAll()
			err := h.finishKeyed(j, tc.rows, tc.outPK...)
			st := h.state("t")
			if tc.accept {
				if err != nil {
					t.Fatalf("done claim with %d rows: %v", tc.rows, err)
				}
				if len(st.Live) != 1 || st.Live[0].ID != j.Output || st.Live[0].Rows != tc.rows {
					t.Fatalf("live after done: %+v, want the output of %d rows alone", st.Live, tc.rows)
				}
			} else {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("done claim with %d rows, key %v: %v, want it rejected", tc.rows, tc.outPK, err)
				}
				if len(st.Live) != 3 || len(st.Pending) != 0 {
					t.Fatalf("after the rejected claim: %d live, %d pending; want the 3 inputs live, the job failed", len(st.Live), len(st.Pending))
				}
			}
			h.checkConsistent("t")
		})
	}
}

// TestDropMarkersThroughOnlyForFullKeyedMerge: a mergeout gets the change
// floor as DropMarkersThrough only when it merges every live container of
// a keyed projection; strata's partial mergeouts, a request while another
// mergeout holds some containers, an append-only table, a failing or
// missing hook all keep every marker (0). The floor is kept with the job
// in the catalog.
func TestDropMarkersThroughOnlyForFullKeyedMerge(t *testing.T) {
	hook := &floorHook{floor: 4242}
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 4}, ChangeFloor: hook.get})
	// The first load: a large container (stratum 2) and four small ones
	// (stratum 0), which are a strata mergeout, not of every container.
	big := messages.ContainerRef{Table: "t", Projection: "p", ID: "c0100", Rows: 5000, Bytes: 64 << 20}
	h.mkdirKeyed(big, []string{"id"})
	load := h.keyedReq("load", 0, 4, "id")
	load.Containers = append(load.Containers, big)
	if _, err := h.s.Register(h.ctx, load); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 1 {
		t.Fatalf("%d mergeouts after the load, want the strata one", len(h.pub.mergeouts))
	}
	stratum := h.pub.mergeouts[0]
	if len(stratum.Inputs) != 4 || stratum.DropMarkersThrough != 0 || hook.called() != 0 {
		t.Fatalf("strata mergeout of %d inputs: drop_markers_through %d, hook called %d times; want 4, 0, 0",
			len(stratum.Inputs), stratum.DropMarkersThrough, hook.called())
	}
	// Requested while the strata mergeout holds four: the big one and a
	// batch of changes applied since, not every container.
	if _, err := h.s.Apply(h.ctx, h.applyReq("w1-9", "w1", 9)); err != nil {
		t.Fatal(err)
	}
	partial := h.requestAll()
	if len(partial.Inputs) != 2 || partial.DropMarkersThrough != 0 {
		t.Fatalf("requested mergeout beside a running one: %d inputs, drop_markers_through %d; want 2, 0",
			len(partial.Inputs), partial.DropMarkersThrough)
	}
	if err := h.finishKeyed(stratum, 350, "id"); err != nil {
		t.Fatal(err)
	}
	if err := h.finishKeyed(partial, 5010, "id"); err != nil {
		t.Fatal(err)
	}
	// Every live container now: the floor.
	full := h.requestAll()
	if live := h.state("t").Live; len(full.Inputs) != len(live) || full.DropMarkersThrough != 4242 || hook.called() != 1 {
		t.Fatalf("mergeout of every container (%d of %d live): drop_markers_through %d, hook called %d times; want 4242, once",
			len(full.Inputs), len(live), full.DropMarkersThrough, hook.called())
	}
	// The floor is in the job's body: a restarted scheduler has it.
	h.start()
	st := h.state("t")
	if len(st.Pending) != 1 {
		t.Fatalf("%d pending after restart, want the full mergeout", len(st.Pending))
	}
	body, err := NewCatalog(h.catalog).Job(h.ctx, "t", "p", &st.Pending[0])
	if err != nil {
		t.Fatal(err)
	}
	if mj, ok := body.(*mergeoutJob); !ok || mj.w.DropMarkersThrough != 4242 {
		t.Fatalf("job body after restart: %+v, want drop_markers_through 4242", body)
	}
	if err := h.finishKeyed(full, 5000, "id"); err != nil {
		t.Fatal(err)
	}

	// A failing hook, or none: every marker kept.
	for name, hookFn := range map[string]func(context.Context) (int64, error){
		"failing":  (&floorHook{err: fmt.Errorf("consumer info: %w", context.DeadlineExceeded)}).get,
		"negative": (&floorHook{floor: -3}).get,
		"unset":    nil,
	} {
		h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ChangeFloor: hookFn})
		if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 3, "id")); err != nil {
			t.Fatal(err)
		}
		if j := h.requestAll(); j.DropMarkersThrough != 0 {
			t.Errorf("%s hook: drop_markers_through %d, want 0", name, j.DropMarkersThrough)
		}
	}
	// An append-only table: never asked.
	plainHook := &floorHook{floor: 7}
	hp := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ChangeFloor: plainHook.get})
	if _, err := hp.s.Register(hp.ctx, hp.keyedReq("load", 0, 3)); err != nil {
		t.Fatal(err)
	}
	if j := hp.requestAll(); j.DropMarkersThrough != 0 || plainHook.called() != 0 {
		t.Errorf("append-only table: drop_markers_through %d, hook called %d times; want 0, never", j.DropMarkersThrough, plainHook.called())
	}
}

// TestRequestedMergeoutRefoldsOneContainer: a keyed table folded into one
// container through a floor keeps the markers and versions of the changes
// above it; once the floor has risen past what the fold froze, a requested
// mergeout folds that one container again (the rows it can drop now), and
// not before. An append-only table's one container is never rewritten.
func TestRequestedMergeoutRefoldsOneContainer(t *testing.T) {
	hook := &floorHook{floor: 100}
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ChangeFloor: hook.get})
	if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 2, "id")); err != nil {
		t.Fatal(err)
	}
	full := h.requestAll()
	if full.DropMarkersThrough != 100 {
		t.Fatalf("full mergeout: drop_markers_through %d, want 100", full.DropMarkersThrough)
	}
	if err := h.finishKeyed(full, 40, "id"); err != nil {
		t.Fatal(err)
	}
	if live := h.state("t").Live; len(live) != 1 {
		t.Fatalf("%d live after the fold, want 1", len(live))
	}
	rep, err := h.s.RequestMergeout(h.ctx, &messages.MergeoutRequest{Table: "t"})
	if err != nil || len(rep.Jobs) != 0 {
		t.Fatalf("mergeout at the floor the container was folded through: %+v, %v; want no job", rep, err)
	}
	hook.mu.Lock()
	hook.floor = 250
	hook.mu.Unlock()
	again := h.requestAll()
	if len(again.Inputs) != 1 || again.Inputs[0].ID != full.Output || again.DropMarkersThrough != 250 {
		t.Fatalf("mergeout after the floor rose: inputs %v, drop_markers_through %d; want [%s], 250", again.Inputs, again.DropMarkersThrough, full.Output)
	}
	if got := h.state("t").FrozenThrough; got != 250 {
		t.Errorf("frozen_through %d after the refold was added, want 250", got)
	}

	plainHook := &floorHook{floor: 7}
	hp := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ChangeFloor: plainHook.get})
	if _, err := hp.s.Register(hp.ctx, hp.keyedReq("load", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if rep, err := hp.s.RequestMergeout(hp.ctx, &messages.MergeoutRequest{Table: "t"}); err != nil || len(rep.Jobs) != 0 {
		t.Errorf("append-only table of one container: %+v, %v; want no job", rep, err)
	}
}
