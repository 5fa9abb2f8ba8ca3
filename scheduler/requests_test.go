package scheduler

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// registerReq names containers first..first+n-1 of table t (their
// directories made) in a register request with the given ID.
func (h *harness) registerReq(id string, first, n int) *messages.RegisterRequest {
	h.t.Helper()
	req := &messages.RegisterRequest{Table: "t", Projection: "p", RequestID: id}
	for i := first; i < first+n; i++ {
		c := messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprintf("c%04d", i), Rows: 100, Bytes: 1000}
		h.mkdir(c)
		req.Containers = append(req.Containers, c)
	}
	return req
}

// TestRegisterSentAgainAfterMerge: a registration whose reply was lost is
// sent again after its containers were merged away. Answered without its
// ID, the resend made the merged inputs live again beside the merge's
// output (every row twice); with it, the resend gets the first answer,
// also from a restarted scheduler, and changes nothing.
func TestRegisterSentAgainAfterMerge(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 4}})
	req := h.registerReq("load-1", 0, 4)
	first, err := h.s.Register(h.ctx, req)
	if err != nil || first.Live != 4 || first.Repeat {
		t.Fatalf("first register: %+v, %v", first, err)
	}
	if len(h.pub.mergeouts) != 1 {
		t.Fatalf("%d mergeouts started, want 1", len(h.pub.mergeouts))
	}
	h.finish(h.pub.mergeouts[0], 1<<20)
	// The merge's inputs are retired but their directories are still there
	// (as they are while a reader holds them), so a check would pass.
	for _, c := range req.Containers {
		h.mkdir(c)
	}
	for _, restart := range []bool{false, true} {
		if restart {
			h.start()
		}
		again, err := h.s.Register(h.ctx, req)
		if err != nil || !again.Repeat || again.Live != 4 {
			t.Fatalf("resent (restart %v): %+v, %v", restart, again, err)
		}
		if st := h.state("t"); len(st.Live) != 1 || st.Live[0].ID != h.pub.mergeouts[0].Output {
			t.Fatalf("resent (restart %v): live %+v, want the merge's output alone", restart, st.Live)
		}
	}
	// Without an ID the same containers are registered anew: that is what
	// a request without one asks for.
	req.RequestID = ""
	if rep, err := h.s.Register(h.ctx, req); err != nil || rep.Repeat || rep.Live != 5 {
		t.Fatalf("without an ID: %+v, %v", rep, err)
	}
}

// TestRegisterRefusalRecorded: a load refused for passing the container
// limit is refused again when sent again, even once there is room, so a
// client that removed its files on the refusal never has them registered
// by a resend that was still on its way.
func TestRegisterRefusalRecorded(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100, MaxContainers: 4}})
	if _, err := h.s.Register(h.ctx, h.registerReq("a", 0, 3)); err != nil {
		t.Fatal(err)
	}
	req := h.registerReq("b", 3, 2)
	_, err := h.s.Register(h.ctx, req)
	if !errors.Is(err, ErrTooManyContainers) {
		t.Fatalf("load past the limit: %v", err)
	}
	if _, err := h.s.DropContainers(h.ctx, &messages.DropContainersRequest{Table: "t", Projection: "p", IDs: []string{"c0000", "c0001"}}); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.Register(h.ctx, req)
	if e := APIError(err); e == nil || e.Code != messages.ErrCodeTooManyContainers {
		t.Fatalf("resent refused load: %v (%+v)", err, e)
	}
	if st := h.state("t"); len(st.Live) != 1 {
		t.Fatalf("live after the resent refusal: %+v", st.Live)
	}
	// A new request with room is taken.
	req.RequestID = "c"
	if rep, err := h.s.Register(h.ctx, req); err != nil || rep.Live != 3 {
		t.Fatalf("new request with room: %+v, %v", rep, err)
	}
}

// TestRegisterResentWhileRunning: requests with one ID arriving together
// are carried out once; every one gets the answer.
func TestRegisterResentWhileRunning(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	req := h.registerReq("load-1", 0, 16)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := h.s.Register(h.ctx, req)
			if err == nil && rep.Live != 16 {
				err = fmt.Errorf("live %d", rep.Live)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st := h.state("t")
	if len(st.Live) != 16 || len(st.Requests) != 1 {
		t.Fatalf("%d live, %d request records", len(st.Live), len(st.Requests))
	}
	h.checkConsistent("t")
}

// TestDropSentAgain: a drop sent again gets the first answer, also after
// a restart, instead of "not live".
func TestDropSentAgain(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 3, 1000); err != nil {
		t.Fatal(err)
	}
	req := &messages.DropContainersRequest{Table: "t", Projection: "p", IDs: []string{"c0001"}, RequestID: "drop-1"}
	first, err := h.s.DropContainers(h.ctx, req)
	if err != nil || len(first.Dropped) != 1 || first.Live != 2 {
		t.Fatalf("drop: %+v, %v", first, err)
	}
	h.start()
	again, err := h.s.DropContainers(h.ctx, req)
	if err != nil || !again.Repeat || len(again.Dropped) != 1 || again.Dropped[0].ID != "c0001" || again.Live != 2 {
		t.Fatalf("drop sent again: %+v, %v", again, err)
	}
	req.RequestID = ""
	if _, err := h.s.DropContainers(h.ctx, req); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a new drop of a container not live: %v", err)
	}
}

// TestMergeoutRequestSentAgain: a mergeout request sent again gets the
// jobs the first started, not an empty answer (its containers are taken).
func TestMergeoutRequestSentAgain(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if err := h.load("t", 0, 5, 1000); err != nil {
		t.Fatal(err)
	}
	req := &messages.MergeoutRequest{Table: "t", RequestID: "m-1"}
	first, err := h.s.RequestMergeout(h.ctx, req)
	if err != nil || len(first.Jobs) != 1 {
		t.Fatalf("mergeout: %+v, %v", first, err)
	}
	h.start()
	again, err := h.s.RequestMergeout(h.ctx, req)
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0].JobID != first.Jobs[0].JobID || again.Jobs[0].Inputs != 5 {
		t.Fatalf("sent again: %+v, %v", again, err)
	}
	if st := h.state("t"); len(st.Pending) != 1 {
		t.Fatalf("pending %+v", st.Pending)
	}
}

// TestCreatePoolSentAgain: the request that created a pool is answered
// as done when sent again; another request for the same name is refused.
func TestCreatePoolSentAgain(t *testing.T) {
	h := newHarness(t, Options{})
	cfg := messages.PoolConfig{Name: "etl", MemorySize: 1 << 30, MaxMemorySize: 1 << 30, PlannedConcurrency: 2}
	req := &messages.CreatePoolRequest{Pool: cfg, RequestID: "pool-1"}
	if _, err := h.s.CreatePool(h.ctx, req); err != nil {
		t.Fatal(err)
	}
	h.start()
	if _, err := h.s.CreatePool(h.ctx, req); err != nil {
		t.Fatalf("sent again: %v", err)
	}
	if _, err := h.s.AlterPool(h.ctx, &messages.AlterPoolRequest{Name: "etl", Priority: new(int)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.CreatePool(h.ctx, req); err != nil {
		t.Fatalf("sent again after an alter: %v", err)
	}
	for _, id := range []string{"pool-2", ""} {
		other := &messages.CreatePoolRequest{Pool: cfg, RequestID: id}
		if _, err := h.s.CreatePool(h.ctx, other); !errors.Is(err, ErrPoolExists) {
			t.Fatalf("request %q for an existing pool: %v", id, err)
		}
	}
}

// TestRequestRecordsBounded: an entry keeps the newest maxRequestRecords
// answers, none older than requestRecordTTL, and they survive the entry's
// other writes.
func TestRequestRecordsBounded(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 1000, MaxContainers: 1000}})
	for i := range maxRequestRecords + 6 {
		if _, err := h.s.Register(h.ctx, h.registerReq(fmt.Sprintf("r%d", i), i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	st := h.state("t")
	if len(st.Requests) != maxRequestRecords || st.Requests[0].ID != "r6" {
		t.Fatalf("%d records, oldest %s", len(st.Requests), st.Requests[0].ID)
	}
	h.clock.Advance(requestRecordTTL + time.Minute)
	if _, err := h.s.Register(h.ctx, h.registerReq("late", 500, 1)); err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); len(st.Requests) != 1 || st.Requests[0].ID != "late" {
		t.Fatalf("after a day: %+v", st.Requests)
	}
}
