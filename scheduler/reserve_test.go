package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

func (h *harness) reserve(req messages.ReserveRequest) *messages.ReserveReply {
	h.t.Helper()
	req.Table, req.Projection = "t", "p"
	rep, err := h.s.Reserve(h.ctx, &req)
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

// TestReserveUnique: reservations never overlap, start past what the
// client has seen and what the catalog names, survive a restart, and a
// resend gets the same numbers.
func TestReserveUnique(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 3, 1000); err != nil { // c0000..c0002, no reservation
		t.Fatal(err)
	}
	a := h.reserve(messages.ReserveRequest{Count: 4, RequestID: "a"})
	b := h.reserve(messages.ReserveRequest{Count: 2, AtLeast: 5})
	if a.First != 3 || a.Count != 4 || b.First != 7 || b.Count != 2 {
		t.Fatalf("reservations %+v and %+v, want 3..6 and 7..8", a, b)
	}
	h.start()
	if again := h.reserve(messages.ReserveRequest{Count: 4, RequestID: "a"}); *again != *a {
		t.Fatalf("resent reservation %+v, first %+v", again, a)
	}
	if c := h.reserve(messages.ReserveRequest{Count: 1, AtLeast: 20}); c.First != 20 {
		t.Fatalf("reservation past the client's highest: %+v", c)
	}
	if d := h.reserve(messages.ReserveRequest{Count: 1}); d.First != 21 {
		t.Fatalf("next reservation %+v", d)
	}
}

// TestReserveRenewAndRelease: a renewal extends a reservation's lease;
// registering its containers releases it; an expired one cannot be
// renewed.
func TestReserveRenewAndRelease(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ReserveLease: time.Minute})
	r := h.reserve(messages.ReserveRequest{Count: 2})
	h.clock.Advance(50 * time.Second)
	renewed := h.reserve(messages.ReserveRequest{Renew: r.Reservation})
	if renewed.Expires <= r.Expires || renewed.First != r.First {
		t.Fatalf("renewed %+v, was %+v", renewed, r)
	}
	req := h.registerReq("load", r.First, 2)
	req.Reservations = []string{r.Reservation}
	if _, err := h.s.Register(h.ctx, req); err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); len(st.Reservations) != 0 || st.NextContainer != r.First+2 {
		t.Fatalf("after registering: reservations %+v, next %d", st.Reservations, st.NextContainer)
	}
	other := h.reserve(messages.ReserveRequest{Count: 1})
	h.clock.Advance(2 * time.Minute)
	if _, err := h.s.Reserve(h.ctx, &messages.ReserveRequest{Table: "t", Projection: "p", Renew: other.Reservation}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("renewal of an expired reservation: %v", err)
	}
}

// oldDir makes container directory id of t.p, modified two hours before
// the harness's clock.
func (h *harness) oldDir(id string) string {
	h.t.Helper()
	dir := filepath.Join(h.dir, "t", "p", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	old := h.clock.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		h.t.Fatal(err)
	}
	return dir
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestSweepSparesLiveLoads: the sweep that runs while the scheduler runs
// removes old directories the catalog does not name, but not those of a
// load that holds a reservation for them, however old their files (a slow
// load, a long upload), until the reservation expires unrenewed.
func TestSweepSparesLiveLoads(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ReserveLease: 10 * time.Minute})
	if err := h.load("t", 0, 1, 1000); err != nil {
		t.Fatal(err)
	}
	r := h.reserve(messages.ReserveRequest{Count: 2}) // c0001, c0002
	held := h.oldDir("c0001")
	orphan := h.oldDir("c0009")
	young := filepath.Join(h.dir, "t", "p", "c0010")
	if err := os.MkdirAll(young, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.s.SweepOrphans(h.ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(held) || exists(orphan) || !exists(young) {
		t.Fatalf("after a sweep: reserved kept %v, orphan kept %v, young kept %v", exists(held), exists(orphan), exists(young))
	}
	if !h.exists(messages.ContainerRef{Table: "t", Projection: "p", ID: "c0000"}) {
		t.Fatal("a live container was swept")
	}
	h.clock.Advance(11 * time.Minute) // the load died: no renewal
	if err := h.s.SweepOrphans(h.ctx); err != nil {
		t.Fatal(err)
	}
	if exists(held) {
		t.Fatalf("%s kept after its reservation %s expired", held, r.Reservation)
	}
}

// blockingStorage holds CheckContainer until released, so a sweep can run
// while a registration checks its containers.
type blockingStorage struct {
	*rootStorage
	checking chan struct{}
	release  chan struct{}
}

func (b *blockingStorage) CheckContainer(table, projection, id string) (ContainerInfo, error) {
	b.checking <- struct{}{}
	<-b.release
	return b.rootStorage.CheckContainer(table, projection, id)
}

// TestSweepSparesRegistering: an old container a registration is checking
// (a load without a reservation) is not swept from under it: the catalog
// would name a container whose files are gone.
func TestSweepSparesRegistering(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	bs := &blockingStorage{rootStorage: newRootStorage(t, h.dir), checking: make(chan struct{}), release: make(chan struct{})}
	h.opts.Data = bs
	h.start()
	close(bs.release) // the entry exists, so the sweep looks at t.p
	bs.checking = make(chan struct{}, 1)
	if err := h.load("t", 5, 1, 1000); err != nil {
		t.Fatal(err)
	}
	bs.checking, bs.release = make(chan struct{}), make(chan struct{})
	req := h.registerReq("", 0, 1)
	dir := filepath.Join(h.dir, "t", "p", "c0000")
	old := h.clock.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.s.Register(h.ctx, req)
		done <- err
	}()
	<-bs.checking
	if err := h.s.SweepOrphans(h.ctx); err != nil {
		t.Fatal(err)
	}
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !exists(dir) {
		t.Fatal("a container being registered was swept")
	}
	h.checkConsistent("t")
}
