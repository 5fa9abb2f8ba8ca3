package scheduler

import (
	"errors"
	"testing"

	"github.com/strata-db/strata/messages"
)

// applyReq asks to make container id live with WAL w's position to.
func (h *harness) applyReq(id, w string, to uint64) *messages.ApplyRequest {
	h.t.Helper()
	c := messages.ContainerRef{Table: "t", Projection: "p", ID: id, Rows: 10, Bytes: 100}
	h.mkdirKeyed(c, []string{"id"})
	return &messages.ApplyRequest{Table: "t", Projection: "p", Container: c, WAL: w, To: to, RequestID: "apply-" + id}
}

// TestApplyExactlyOnce: a batch of changes becomes live with its WAL
// position in one write; the same batch again (its reply lost, or the
// walwriter restarted and wrote it again under another request ID) and an
// older one change nothing; another WAL's positions are its own; a table
// without a key, or a container of another key, is refused.
func TestApplyExactlyOnce(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if _, err := h.s.Apply(h.ctx, h.applyReq("w1-5", "w1", 5)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("apply to a table not loaded: %v, want an invalid request", err)
	}
	if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 2, "id")); err != nil {
		t.Fatal(err)
	}
	rep, err := h.s.Apply(h.ctx, h.applyReq("w1-5", "w1", 5))
	if err != nil || rep.Repeat || rep.Applied != 5 {
		t.Fatalf("first apply: %+v, %v", rep, err)
	}
	again := h.applyReq("w1-5", "w1", 5)
	again.RequestID = "other-id"
	if rep, err := h.s.Apply(h.ctx, again); err != nil || !rep.Repeat || rep.Applied != 5 {
		t.Fatalf("the batch again: %+v, %v", rep, err)
	}
	if rep, err := h.s.Apply(h.ctx, h.applyReq("w1-3", "w1", 3)); err != nil || !rep.Repeat {
		t.Fatalf("an older batch: %+v, %v", rep, err)
	}
	if rep, err := h.s.Apply(h.ctx, h.applyReq("w2-3", "w2", 3)); err != nil || rep.Repeat || rep.Applied != 3 {
		t.Fatalf("another WAL's batch: %+v, %v", rep, err)
	}
	h.start() // a restarted scheduler knows the positions from the catalog
	if rep, err := h.s.Apply(h.ctx, h.applyReq("w1-5b", "w1", 5)); err != nil || !rep.Repeat {
		t.Fatalf("after a restart: %+v, %v", rep, err)
	}
	st := h.state("t")
	var ids []string
	for _, c := range st.Live {
		ids = append(ids, c.ID)
	}
	if len(st.Live) != 4 || st.Applied["w1"] != 5 || st.Applied["w2"] != 3 {
		t.Fatalf("live %v, applied %v; want the load's 2 and w1-5, w2-3; w1 at 5, w2 at 3", ids, st.Applied)
	}
	bad := h.applyReq("w1-9", "w1", 9)
	h.mkdirKeyed(bad.Container, []string{"other"})
	if _, err := h.s.Apply(h.ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a container of another key: %v, want an invalid request", err)
	}
	if st := h.state("t"); st.Applied["w1"] != 5 || len(st.Live) != 4 {
		t.Fatalf("after the refusal: applied %v, %d live", st.Applied, len(st.Live))
	}
}
