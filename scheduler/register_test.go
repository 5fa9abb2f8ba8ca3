package scheduler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/messages"
)

// keyedReq names containers first..first+n-1 of table t in a register
// request with the given ID, their manifests giving the primary key pk
// (none when empty).
func (h *harness) keyedReq(id string, first, n int, pk ...string) *messages.RegisterRequest {
	h.t.Helper()
	req := &messages.RegisterRequest{Table: "t", Projection: "p", RequestID: id}
	for i := first; i < first+n; i++ {
		c := messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprintf("c%04d", i), Rows: 100, Bytes: 1000}
		h.mkdirKeyed(c, pk)
		req.Containers = append(req.Containers, c)
	}
	return req
}

// mkdirKeyed writes container c's manifest with the primary key pk.
func (h *harness) mkdirKeyed(c messages.ContainerRef, pk []string) {
	h.t.Helper()
	h.mkdir(c)
	if len(pk) == 0 {
		return
	}
	stub := fmt.Sprintf(`{"table":%q,"projection":%q,"id":%q,"rows":%d,"bytes":%d,"primary_key":["%s"]}`,
		c.Table, c.Projection, c.ID, c.Rows, c.Bytes, strings.Join(pk, `","`))
	if err := os.WriteFile(filepath.Join(h.dir, c.Table, c.Projection, c.ID, "manifest.json"), []byte(stub), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// catalogOf returns the catalog API's reply for table t, projection p.
func (h *harness) catalogOf() messages.ProjectionCatalog {
	h.t.Helper()
	rep, err := h.s.Catalog(h.ctx, &messages.CatalogRequest{Table: "t"})
	if err != nil || len(rep.Projections) != 1 {
		h.t.Fatalf("catalog of t: %+v, %v", rep, err)
	}
	return rep.Projections[0]
}

// refusedAs checks err is a recorded-kind refusal: invalid, with a message
// holding want.
func refusedAs(t *testing.T, what string, err error, want string) {
	t.Helper()
	e := APIError(err)
	if e == nil || e.Code != "invalid" || !strings.Contains(e.Message, want) {
		t.Fatalf("%s: %v (%+v), want an invalid-request refusal saying %q", what, err, e, want)
	}
}

// TestRegisterKeyedLoad: the first load into a projection sets its
// primary key from the manifests; the catalog keeps it across a restart
// and the catalog API returns it; a second load into the keyed table is
// refused, and the refusal is recorded, so a resend gets it again even
// once the table has no live container.
func TestRegisterKeyedLoad(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	rep, err := h.s.Register(h.ctx, h.keyedReq("load-1", 0, 3, "aid"))
	if err != nil || rep.Live != 3 {
		t.Fatalf("keyed load: %+v, %v", rep, err)
	}
	if st := h.state("t"); !slices.Equal(st.PrimaryKey, []string{"aid"}) {
		t.Fatalf("primary key in the catalog: %v, want [aid]", st.PrimaryKey)
	}
	h.start() // from the stored entry
	if pc := h.catalogOf(); !slices.Equal(pc.PrimaryKey, []string{"aid"}) || len(pc.Live) != 3 {
		t.Fatalf("catalog reply after a restart: key %v, %d live; want [aid], 3", pc.PrimaryKey, len(pc.Live))
	}

	second := h.keyedReq("load-2", 3, 1, "aid")
	_, err = h.s.Register(h.ctx, second)
	refusedAs(t, "a second keyed load", err, "table t has a primary key (aid); send its changes with strata changes")
	if st := h.state("t"); len(st.Live) != 3 || st.request(requestRegister, "load-2") == nil {
		t.Fatalf("after the refusal: live %+v, recorded %v; want 3 live and the refusal recorded", st.Live, st.request(requestRegister, "load-2") != nil)
	}
	if _, err := h.s.DropContainers(h.ctx, &messages.DropContainersRequest{Table: "t", Projection: "p", IDs: []string{"c0000", "c0001", "c0002"}}); err != nil {
		t.Fatal(err)
	}
	_, err = h.s.Register(h.ctx, second)
	refusedAs(t, "the second keyed load sent again once the table is empty", err, "send its changes with strata changes")
	if st := h.state("t"); len(st.Live) != 0 {
		t.Fatalf("the resend registered %+v", st.Live)
	}

	// Empty again, the keyed table takes a load of its own key, not an
	// unkeyed one or one of another key.
	_, err = h.s.Register(h.ctx, h.keyedReq("load-3", 4, 1))
	refusedAs(t, "an unkeyed load into a keyed table", err, "table t has a primary key (aid) and the load's containers have none; load with --primary-key aid")
	_, err = h.s.Register(h.ctx, h.keyedReq("load-4", 5, 1, "aid", "bid"))
	refusedAs(t, "a load of another key", err, "table t has the primary key (aid), the load's containers (aid, bid)")
	if rep, err := h.s.Register(h.ctx, h.keyedReq("load-5", 6, 2, "aid")); err != nil || rep.Live != 2 {
		t.Fatalf("a keyed load into the emptied keyed table: %+v, %v", rep, err)
	}
}

// TestRegisterKeyRefusals: a load whose containers disagree on the key,
// and a keyed load into an append-only table with live containers, are
// refused, register nothing and leave the key as it was; each refusal is
// recorded.
func TestRegisterKeyRefusals(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	mixed := h.keyedReq("mixed", 0, 2, "a")
	h.mkdirKeyed(mixed.Containers[1], []string{"a", "b"})
	_, err := h.s.Register(h.ctx, mixed)
	refusedAs(t, "containers disagreeing on the key", err, "the load's containers disagree on the primary key: c0000 has (a), c0001 has (a, b)")
	unkeyed := h.keyedReq("mixed-2", 2, 2)
	h.mkdirKeyed(unkeyed.Containers[0], []string{"a"})
	_, err = h.s.Register(h.ctx, unkeyed)
	refusedAs(t, "a keyed and an unkeyed container", err, "c0002 has (a), c0003 has none")
	if st := h.state("t"); len(st.Live) != 0 || len(st.PrimaryKey) != 0 || st.request(requestRegister, "mixed") == nil {
		t.Fatalf("after refusals: live %+v, key %v", st.Live, st.PrimaryKey)
	}

	if _, err := h.s.Register(h.ctx, h.keyedReq("plain", 10, 2)); err != nil {
		t.Fatal(err)
	}
	keyed := h.keyedReq("keyed", 12, 1, "a")
	_, err = h.s.Register(h.ctx, keyed)
	refusedAs(t, "a keyed load into an append-only table", err, "table t has no primary key (it is append-only, with 2 live containers)")
	_, err = h.s.Register(h.ctx, keyed)
	refusedAs(t, "the same, sent again", err, "append-only")
	if pc := h.catalogOf(); len(pc.PrimaryKey) != 0 || len(pc.Live) != 2 {
		t.Fatalf("after the refusal: key %v, %d live", pc.PrimaryKey, len(pc.Live))
	}
	// Without a request ID the refusal is the same, only not recorded.
	keyed.RequestID = ""
	if _, err := h.s.Register(h.ctx, keyed); !errors.Is(err, ErrInvalid) {
		t.Fatalf("without an ID: %v, want ErrInvalid", err)
	}
}

// TestCatalogReplyApplied: the catalog API returns the WAL positions
// applied to a keyed table as its entry holds them.
func TestCatalogReplyApplied(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}})
	if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 1, "id")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.catalog.Update(h.ctx, "t", "p", func(st *ProjectionState) error {
		st.Applied = map[string]uint64{"wal-a": 42, "wal-b": 7}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.start()
	pc := h.catalogOf()
	if !slices.Equal(pc.PrimaryKey, []string{"id"}) || len(pc.Applied) != 2 || pc.Applied["wal-a"] != 42 || pc.Applied["wal-b"] != 7 {
		t.Fatalf("catalog reply: key %v, applied %v", pc.PrimaryKey, pc.Applied)
	}
}
