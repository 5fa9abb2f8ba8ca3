package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/messages"
)

// loaded loads 4 containers of table t (a mergeout of all four is pending)
// and returns its job.
func loaded(t *testing.T) (*harness, *messages.MergeoutJob) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 4}})
	if err := h.load("t", 0, 4, 1000); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 1 {
		t.Fatalf("%d mergeouts published", len(h.pub.mergeouts))
	}
	return h, h.pub.mergeouts[0]
}

func (h *harness) rejected(ev *messages.JobEvent) {
	h.t.Helper()
	if err := h.s.HandleEvent(h.ctx, ev); !errors.Is(err, ErrRejected) {
		h.t.Fatalf("claim %+v: %v, want it rejected", ev, err)
	}
}

// intact asserts the four loaded containers are still live and on disk.
func (h *harness) intact() {
	h.t.Helper()
	st := h.state("t")
	if len(st.Live) != 4 || liveRows(st) != 400 || len(st.Dead) != 0 {
		h.t.Fatalf("catalog after a refused claim: %+v", st)
	}
	for _, c := range st.Live {
		if !h.exists(c) {
			h.t.Fatalf("container %s deleted", c.ID)
		}
	}
}

func TestForgedDoneFromStranger(t *testing.T) {
	h, j := loaded(t)
	forged := &messages.JobEvent{JobID: j.JobID, Operation: "mergeout", Type: messages.EventDone, Worker: "attacker"}
	h.rejected(forged) // no worker has accepted the job
	h.intact()
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1})
	h.rejected(forged) // another worker holds it
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventFailed, Worker: "attacker", Reason: "x"})
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventProgress, Worker: "attacker"})
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventDone}) // no worker
	h.intact()
	if st := h.state("t"); len(st.Pending) != 1 || st.Pending[0].Worker != "merger-1" {
		t.Fatalf("pending after forged claims: %+v", st.Pending)
	}
	// The real worker still finishes it.
	h.finish(j, 0)
	if st := h.state("t"); len(st.Live) != 1 || liveRows(st) != 400 {
		t.Fatalf("after the real done: %+v", st)
	}
}

func TestDoneForJobNotInFlight(t *testing.T) {
	h, _ := loaded(t)
	h.rejected(&messages.JobEvent{JobID: "mergeout.t.p.99", Type: messages.EventDone, Worker: "merger-1"})
	h.rejected(&messages.JobEvent{JobID: "mergeout.victim.p.1", Type: messages.EventDone, Worker: "attacker"})
	h.intact()
}

func TestDoneWhoseOutputDoesNotVerify(t *testing.T) {
	for name, write := range map[string]func(h *harness, j *messages.MergeoutJob){
		"missing": func(*harness, *messages.MergeoutJob) {},
		"rows": func(h *harness, j *messages.MergeoutJob) {
			h.mkdir(messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output, Rows: 399})
		},
		"other name": func(h *harness, j *messages.MergeoutJob) {
			h.mkdir(messages.ContainerRef{Table: "t", Projection: "p", ID: "c0000", Rows: 400})
		},
		"garbage": func(h *harness, j *messages.MergeoutJob) {
			dir := filepath.Join(h.dir, "t", "p", j.Output)
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, j := loaded(t)
			write(h, j)
			h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1})
			out := &messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output, Rows: 400}
			h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "merger-1", Output: out, RowsTotal: 400})
			h.intact()
			// The job failed: its inputs are free and its grant released.
			if st := h.state("t"); len(st.Pending) != 0 {
				t.Fatalf("job still pending: %+v", st.Pending)
			}
			ops, _ := h.s.Operations(&messages.OperationsRequest{JobID: j.JobID})
			if ops.Operations[0].Status != messages.StatusFailed {
				t.Fatalf("operation %+v", ops.Operations[0])
			}
		})
	}
}

func TestRedeliveryMovesTheClaim(t *testing.T) {
	h, j := loaded(t)
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1})
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-2", Delivery: 2})
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1}) // stale
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "attacker", Delivery: 2})
	h.start() // the holder survives a restart
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "merger-1"})
	h.intact()
	h.mkdir(messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output, Rows: 400})
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "merger-2", Delivery: 2})
	if st := h.state("t"); len(st.Live) != 1 || st.Live[0].ID != j.Output || liveRows(st) != 400 {
		t.Fatalf("after merger-2's done: %+v", st)
	}
	// A late claim of the settled job changes nothing.
	if err := h.s.HandleEvent(h.ctx, &messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "merger-1"}); err != nil {
		t.Fatal(err)
	}
}

// TestForgedWindowOutput: the result is the container the job named, in
// the table the job named; an event's Output is never used, so it can make
// no other table a result table nor send the prune outside the data dir.
func TestForgedWindowOutput(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, KeepResults: 1})
	if err := h.load("keep", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(h.dir), "outside", "victim")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644)
	for i, forged := range []messages.ContainerRef{
		{Table: "keep", Projection: "p", ID: "c0000", Rows: 100},
		{Table: "t", Projection: "p", ID: "c0001", Rows: 100},
		{Table: "keep", Projection: "p", ID: "c0001"},
	} {
		if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
			Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}}); err != nil {
			t.Fatal(err)
		}
		w := h.pub.windows[i]
		h.mkdir(messages.ContainerRef{Table: w.ResultTable, Projection: messages.ResultProjection, ID: w.Output, Rows: 7})
		h.clock.Advance(1e9)
		h.event(&messages.JobEvent{JobID: w.JobID, Operation: "window", Type: messages.EventDone, Output: &forged})
		st, _, _ := NewCatalog(h.catalog).Get(h.ctx, w.ResultTable, messages.ResultProjection)
		if len(st.Live) != 1 || st.Live[0].ID != w.Output || st.Live[0].Rows != 7 || st.ResultOf != w.JobID {
			t.Fatalf("result %d: %+v", i, st)
		}
	}
	// A traversal in an event's Output is refused before anything else.
	if err := h.s.HandleEvent(h.ctx, &messages.JobEvent{JobID: "window.t.p.9", Type: messages.EventDone, Worker: "merger-1",
		Output: &messages.ContainerRef{Table: "t", Projection: "p", ID: "../../../../outside/victim"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("traversal in Output: %v", err)
	}
	for _, table := range []string{"keep", "t"} {
		st := h.state(table)
		if len(st.Live) != 2 || st.ResultOf != "" {
			t.Fatalf("table %s after forged window outputs: %+v", table, st)
		}
		for _, c := range st.Live {
			if !h.exists(c) {
				t.Fatalf("%s/%s deleted", table, c.ID)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Fatalf("outside the data dir: %v", err)
	}
}

// TestMaxDeliveriesFailureFromAnotherWorker: the worker that reports a job
// whose deliveries ran out need not be the one that held the last one.
func TestMaxDeliveriesFailureFromAnotherWorker(t *testing.T) {
	h, j := loaded(t)
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 5})
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventFailed, Worker: "merger-2", Delivery: 4, Reason: "stale"})
	h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventFailed, Worker: "merger-2", Delivery: 5, Retryable: true})
	h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventFailed, Worker: "merger-2", Delivery: 5, Reason: "maximum deliveries"})
	if st := h.state("t"); len(st.Pending) != 0 || len(st.Live) != 4 {
		t.Fatalf("after the max-deliveries failure: %+v", st)
	}
	h.intact()
}

// TestRegisterTakesRowsFromManifests: a load registers only committed
// containers, with the rows their manifests hold.
func TestRegisterTakesRowsFromManifests(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	h.mkdir(messages.ContainerRef{Table: "t", Projection: "p", ID: "c1", Rows: 10})
	if _, err := h.s.Register(h.ctx, &messages.RegisterRequest{Table: "t", Projection: "p",
		Containers: []messages.ContainerRef{{Table: "t", Projection: "p", ID: "c1", Rows: 999999}}}); err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); len(st.Live) != 1 || st.Live[0].Rows != 10 {
		t.Fatalf("catalog %+v", st)
	}
	if _, err := h.s.Register(h.ctx, &messages.RegisterRequest{Table: "t", Projection: "p",
		Containers: []messages.ContainerRef{{Table: "t", Projection: "p", ID: "missing"}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("register of a missing container: %v", err)
	}
}

// TestDoneBeforeItsAccepted: a scheduler that dies holding an accepted
// event unacked gets it back only after the EVENTS consumer's AckWait, so
// the worker's done (or a later delivery's done) can come first. The
// later claim implies the acceptance; refusing it left the job running
// with its grant held for good.
func TestDoneBeforeItsAccepted(t *testing.T) {
	t.Run("no holder", func(t *testing.T) {
		h, j := loaded(t)
		h.mkdir(messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output, Rows: 400})
		if err := h.s.HandleEvent(h.ctx, &messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "merger-1", Delivery: 1}); err != nil {
			t.Fatalf("done with no accepted seen yet: %v", err)
		}
		if st := h.state("t"); len(st.Live) != 1 || st.Live[0].ID != j.Output || len(st.Pending) != 0 {
			t.Fatalf("after the done: %+v", st)
		}
		// The accepted event, redelivered at last, changes nothing.
		if err := h.s.HandleEvent(h.ctx, &messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("later delivery", func(t *testing.T) {
		h, j := loaded(t)
		h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 1})
		h.mkdir(messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output, Rows: 400})
		// merger-2's accepted of delivery 2 is still on its way.
		if err := h.s.HandleEvent(h.ctx, &messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "merger-2", Delivery: 2}); err != nil {
			t.Fatalf("done of a later delivery: %v", err)
		}
		if st := h.state("t"); len(st.Live) != 1 || len(st.Pending) != 0 {
			t.Fatalf("after the done: %+v", st)
		}
	})
	t.Run("same delivery other worker", func(t *testing.T) {
		h, j := loaded(t)
		h.event(&messages.JobEvent{JobID: j.JobID, Type: messages.EventAccepted, Worker: "merger-1", Delivery: 2})
		h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "attacker", Delivery: 2})
		h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventDone, Worker: "attacker", Delivery: 1})
		h.rejected(&messages.JobEvent{JobID: j.JobID, Type: messages.EventProgress, Worker: "attacker", Delivery: 1})
		h.intact()
	})
}
