package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/messages"
)

// changesReq asks to make live a container of rows changes of versions
// minV to maxV (its stub manifest's change statistics), of WAL w reaching
// position to.
func (h *harness) changesReq(id, w string, to uint64, rows, minV, maxV int64) *messages.ApplyRequest {
	h.t.Helper()
	c := messages.ContainerRef{Table: "t", Projection: "p", ID: id, Rows: rows, Bytes: 100}
	h.mkdir(c)
	stub := fmt.Sprintf(`{"table":"t","projection":"p","id":%q,"rows":%d,"bytes":100,"primary_key":["id"],`+
		`"changes":{"min_version":%d,"max_version":%d,"markers":0}}`, id, rows, minV, maxV)
	if err := os.WriteFile(filepath.Join(h.dir, "t", "p", id, "manifest.json"), []byte(stub), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return &messages.ApplyRequest{Table: "t", Projection: "p", Container: c, WAL: w, To: to, RequestID: "apply-" + id}
}

// TestApplyRefusedAtOrBelowFrozen: a full mergeout of a keyed table
// freezes through the change floor, recorded on the entry as
// frozen_through in the write that adds the job (and again in the one
// that makes its output live); from then on an apply whose changes reach
// down to the floor is refused with code "frozen" and the floor, and
// nothing of it goes live; one above the floor goes live, during the
// mergeout and after. The applies log keeps both.
func TestApplyRefusedAtOrBelowFrozen(t *testing.T) {
	hook := &floorHook{floor: 500}
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100, PurgeFraction: -1}, ChangeFloor: hook.get})
	if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 2, "id")); err != nil {
		t.Fatal(err)
	}
	// Before any fold a change of any version goes live.
	if _, err := h.s.Apply(h.ctx, h.changesReq("w1-10", "w1", 10, 40, 3, 480)); err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); st.FrozenThrough != 0 || st.ChangedRows != 40 {
		t.Fatalf("before a fold: frozen_through %d, changed_rows %d; want 0, 40", st.FrozenThrough, st.ChangedRows)
	}
	full := h.requestAll()
	if full.DropMarkersThrough != 500 {
		t.Fatalf("full mergeout: drop_markers_through %d, want the floor 500", full.DropMarkersThrough)
	}
	if st := h.state("t"); st.FrozenThrough != 500 {
		t.Fatalf("with the full mergeout added: frozen_through %d, want 500", st.FrozenThrough)
	}
	// While it runs: a late change at the floor (dead-lettered, replayed
	// from a WAL) is refused; one above it goes live.
	for _, tc := range []struct {
		id     string
		to     uint64
		minV   int64
		refuse bool
	}{
		{"w2-20", 20, 500, true},
		{"w2-21", 21, 12, true},
		{"w1-30", 30, 501, false},
	} {
		rep, err := h.s.Apply(h.ctx, h.changesReq(tc.id, strings.SplitN(tc.id, "-", 2)[0], tc.to, 5, tc.minV, 600))
		if !tc.refuse {
			if err != nil || rep.Repeat {
				t.Fatalf("apply %s (from version %d): %+v, %v", tc.id, tc.minV, rep, err)
			}
			continue
		}
		var fe *FrozenError
		if !errors.Is(err, ErrFrozen) || !errors.As(err, &fe) || fe.FrozenThrough != 500 || fe.MinVersion != tc.minV {
			t.Fatalf("apply %s from version %d: %v, want a FrozenError at 500", tc.id, tc.minV, err)
		}
		if e := APIError(err); e.Code != messages.ErrCodeFrozen || !e.Definite() {
			t.Fatalf("refusal as an API error: %+v, want code %q, definite", e, messages.ErrCodeFrozen)
		}
	}
	st := h.state("t")
	if st.liveIndex("w2-20") >= 0 || st.liveIndex("w2-21") >= 0 || st.liveIndex("w1-30") < 0 || st.Applied["w2"] != 0 || st.Applied["w1"] != 30 {
		t.Fatalf("after the applies: live %v, applied %v; want w1-30 live, nothing of w2", st.Live, st.Applied)
	}
	// A container without change statistics cannot be checked: refused.
	bare := h.applyReq("w3-5", "w3", 5)
	var fe *FrozenError
	if _, err := h.s.Apply(h.ctx, bare); !errors.As(err, &fe) || !fe.Unknown {
		t.Fatalf("apply without change statistics: %v, want refused as unknown", err)
	}
	// The fold goes live: the floor stays; the changes left are those
	// applied while it ran.
	if err := h.finishKeyed(full, 190, "id"); err != nil {
		t.Fatal(err)
	}
	st = h.state("t")
	if st.FrozenThrough != 500 || st.ChangedRows != 5 || len(st.Live) != 2 {
		t.Fatalf("after the fold: frozen_through %d, changed_rows %d, %d live; want 500, 5, 2", st.FrozenThrough, st.ChangedRows, len(st.Live))
	}
	h.start() // the floor is in the catalog
	if _, err := h.s.Apply(h.ctx, h.changesReq("w2-40", "w2", 40, 5, 499, 700)); !errors.Is(err, ErrFrozen) {
		t.Fatalf("after a restart, a change below the floor: %v, want refused", err)
	}
	if _, err := h.s.Apply(h.ctx, h.changesReq("w2-41", "w2", 41, 5, 501, 700)); err != nil {
		t.Fatalf("after a restart, a change above the floor: %v", err)
	}
	// The applies log (this scheduler's, since the restart), newest first.
	rep, err := h.s.Operations(&messages.OperationsRequest{Applies: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Applies) != 2 || rep.Applies[0].Container != "w2-41" || rep.Applies[0].Refused != "" ||
		rep.Applies[1].Container != "w2-40" || !strings.Contains(rep.Applies[1].Refused, "frozen") ||
		rep.Applies[0].MinVersion != 501 || rep.Applies[0].To != 41 || rep.Applies[0].Rows != 5 || rep.Applies[0].Live != 3 {
		t.Fatalf("applies log: %+v", rep.Applies)
	}
	h.checkConsistent("t")
}

// TestFrozenThroughOnlyGrows: a full mergeout whose floor is lower than
// the entry's (a floor read before an earlier fold's, say) leaves it.
func TestFrozenThroughOnlyGrows(t *testing.T) {
	hook := &floorHook{floor: 900}
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100, PurgeFraction: -1}, ChangeFloor: hook.get})
	if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 2, "id")); err != nil {
		t.Fatal(err)
	}
	if err := h.finishKeyed(h.requestAll(), 150, "id"); err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	hook.floor = 700
	hook.mu.Unlock()
	if _, err := h.s.Apply(h.ctx, h.changesReq("w1-3", "w1", 3, 5, 901, 950)); err != nil {
		t.Fatal(err)
	}
	j := h.requestAll()
	if err := h.finishKeyed(j, 152, "id"); err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); st.FrozenThrough != 900 || st.ChangedRows != 0 {
		t.Fatalf("frozen_through %d, changed_rows %d; want 900, 0", st.FrozenThrough, st.ChangedRows)
	}
}

// TestCatalogFrozenFields: frozen_through and changed_rows are stored,
// absent when 0 (an entry of before reads as 0), and refused negative.
func TestCatalogFrozenFields(t *testing.T) {
	st := &ProjectionState{Table: "t", Projection: "p", PrimaryKey: []string{"id"}, FrozenThrough: 77, ChangedRows: 12, Readers: map[string]int{}}
	data, err := encodeEntry(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"frozen_through":77`) || !strings.Contains(string(data), `"changed_rows":12`) {
		t.Fatalf("encoded entry %s", data)
	}
	back, err := DecodeEntry(data)
	if err != nil || back.FrozenThrough != 77 || back.ChangedRows != 12 {
		t.Fatalf("decoded: %+v, %v", back, err)
	}
	st.FrozenThrough, st.ChangedRows = 0, 0
	data, _ = encodeEntry(st)
	if strings.Contains(string(data), "frozen_through") || strings.Contains(string(data), "changed_rows") {
		t.Fatalf("zero fields written: %s", data)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for field, v := range map[string]int{"frozen_through": -1, "changed_rows": -5} {
		m[field] = v
		bad, _ := json.Marshal(m)
		if _, err := DecodeEntry(bad); err == nil {
			t.Errorf("%s %d: decoded, want refused", field, v)
		}
		delete(m, field)
	}
}
