package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/messages"
)

// TestDropContainers: a container that went missing after its load is
// dropped from the catalog, its rows leave the table, and the refusals
// change nothing.
func TestDropContainers(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 4, 1000); err != nil {
		t.Fatal(err)
	}
	gone := messages.ContainerRef{Table: "t", Projection: "p", ID: "c0001"}
	if err := os.RemoveAll(filepath.Join(h.dir, "t", "p", gone.ID)); err != nil {
		t.Fatal(err)
	}
	drop := func(table string, ids ...string) (*messages.DropContainersReply, error) {
		return h.s.DropContainers(h.ctx, &messages.DropContainersRequest{Table: table, Projection: "p", IDs: ids})
	}
	for name, tc := range map[string]struct {
		table string
		ids   []string
		want  error
	}{
		"not live":      {"t", []string{"c0001", "c0099"}, ErrInvalid},
		"unknown table": {"nope", []string{"c0001"}, ErrUnknownTable},
		"bad name":      {"t", []string{"../c0001"}, ErrInvalid},
		"twice":         {"t", []string{"c0001", "c0001"}, ErrInvalid},
	} {
		if _, err := drop(tc.table, tc.ids...); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if st := h.state("t"); len(st.Live) != 4 || len(st.Dead) != 0 {
		t.Fatalf("a refused drop changed the catalog: %+v", st)
	}
	rep, err := drop("t", gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Dropped) != 1 || rep.Dropped[0].ID != gone.ID || rep.Dropped[0].Rows != 100 || rep.Live != 3 {
		t.Fatalf("reply %+v", rep)
	}
	st := h.state("t")
	if len(st.Live) != 3 || liveRows(st) != 300 || len(st.Dead) != 0 {
		t.Fatalf("catalog after the drop: %+v", st)
	}
	for _, c := range st.Live {
		if !h.exists(c) {
			t.Fatalf("container %s deleted", c.ID)
		}
	}
}

// TestDropContainerReadByJob: a container a pending job reads is refused,
// and dropped once the job is done with it.
func TestDropContainerReadByJob(t *testing.T) {
	h, j := loaded(t)
	_, err := h.s.DropContainers(h.ctx, &messages.DropContainersRequest{Table: "t", Projection: "p", IDs: []string{"c0002"}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("drop of a container the mergeout reads: %v", err)
	}
	h.intact()
	h.finish(j, 0)
	_, err = h.s.DropContainers(h.ctx, &messages.DropContainersRequest{Table: "t", Projection: "p", IDs: []string{j.Output}})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); len(st.Live) != 0 || len(st.Dead) != 0 || h.exists(messages.ContainerRef{Table: "t", Projection: "p", ID: j.Output}) {
		t.Fatalf("after dropping the merged container: %+v", st)
	}
}
