package scheduler

import (
	"fmt"
	"testing"

	"github.com/strata-db/strata/messages"
)

func refs(prefix string, n int, bytes int64) []messages.ContainerRef {
	out := make([]messages.ContainerRef, n)
	for i := range out {
		out[i] = messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprintf("%s%04d", prefix, i), Bytes: bytes + int64(i)}
	}
	return out
}

func TestStratum(t *testing.T) {
	o := StrataOptions{Capacity: 4, BaseBytes: 100} // ratio 4: [0,100) [100,400) [400,1600) ...
	for _, tt := range []struct {
		bytes int64
		want  int
	}{{0, 0}, {99, 0}, {100, 1}, {399, 1}, {400, 2}, {1599, 2}, {1600, 3}, {6400, 4}} {
		if got := o.Stratum(tt.bytes); got != tt.want {
			t.Errorf("Stratum(%d) = %d, want %d", tt.bytes, got, tt.want)
		}
	}
}

func TestSelectStrata(t *testing.T) {
	o := StrataOptions{Capacity: 4, BaseBytes: 100}
	tests := []struct {
		name string
		live []messages.ContainerRef
		busy []string
		want []int // stratum of each selection, in order
	}{
		{"below capacity", refs("a", 3, 10), nil, nil},
		{"exactly capacity", refs("a", 4, 10), nil, []int{0}},
		{"two full strata", append(refs("a", 4, 10), refs("b", 5, 150)...), nil, []int{0, 1}},
		{"twice capacity", refs("a", 9, 10), nil, []int{0, 0}},
		{"mixed sizes do not fill a stratum", append(refs("a", 2, 10), refs("b", 2, 500)...), nil, nil},
		{"busy containers excluded", refs("a", 5, 10), []string{"a0000", "a0001"}, nil},
		{"busy leaves enough", refs("a", 6, 10), []string{"a0000", "a0001"}, []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy := map[string]bool{}
			for _, b := range tt.busy {
				busy[b] = true
			}
			sel := SelectStrata(tt.live, busy, o)
			if len(sel) != len(tt.want) {
				t.Fatalf("got %d selections %+v, want strata %v", len(sel), sel, tt.want)
			}
			used := map[string]bool{}
			for i, s := range sel {
				if s.Stratum != tt.want[i] || len(s.Inputs) != 4 {
					t.Fatalf("selection %d: stratum %d with %d inputs, want stratum %d with 4", i, s.Stratum, len(s.Inputs), tt.want[i])
				}
				for _, in := range s.Inputs {
					if busy[in.ID] || used[in.ID] {
						t.Fatalf("input %s is busy or chosen twice", in.ID)
					}
					used[in.ID] = true
					if o.Stratum(in.Bytes) != s.Stratum {
						t.Fatalf("input %s of %d bytes is not in stratum %d", in.ID, in.Bytes, s.Stratum)
					}
				}
			}
		})
	}
}

func TestSelectStrataSmallestFirst(t *testing.T) {
	live := refs("a", 5, 10)
	live[0].Bytes = 90 // largest of stratum 0
	sel := SelectStrata(live, nil, StrataOptions{Capacity: 4, BaseBytes: 100})
	for _, in := range sel[0].Inputs {
		if in.ID == "a0000" {
			t.Fatal("the largest container was chosen over smaller ones")
		}
	}
}

func TestSelectAll(t *testing.T) {
	live := refs("a", 10, 10)
	sel, ok := SelectAll(live, map[string]bool{"a0003": true}, StrataOptions{MaxInputs: 5})
	if !ok || len(sel.Inputs) != 5 {
		t.Fatalf("SelectAll = %+v, %v", sel, ok)
	}
	for _, in := range sel.Inputs {
		if in.ID == "a0003" {
			t.Fatal("busy input chosen")
		}
	}
	if _, ok := SelectAll(refs("a", 1, 10), nil, StrataOptions{}); ok {
		t.Fatal("a single container selected for merging")
	}
}

func BenchmarkSelectStrata(b *testing.B) {
	live := make([]messages.ContainerRef, 0, 1024)
	for i := range 1024 {
		live = append(live, messages.ContainerRef{ID: fmt.Sprint("c", i), Bytes: int64(1) << (10 + i%20)})
	}
	b.ReportAllocs()
	for b.Loop() {
		SelectStrata(live, nil, StrataOptions{})
	}
	b.ReportMetric(float64(len(live)), "containers/op")
}

// TestSelectPurge: the purge rule merges every live container once the
// changes reach PurgeFraction of the rows, and only when no job reads
// any of them (a full fold); never with purging off, without changes, or
// for a single container.
func TestSelectPurge(t *testing.T) {
	live := []messages.ContainerRef{
		{ID: "base", Rows: 1000, Bytes: 10 << 20},
		{ID: "w-1", Rows: 300, Bytes: 4 << 10},
		{ID: "w-2", Rows: 200, Bytes: 3 << 10},
	}
	for _, tc := range []struct {
		name     string
		live     []messages.ContainerRef
		busy     map[string]bool
		changed  int64
		fraction float64
		want     bool
	}{
		{"below", live, nil, 749, 0, false},
		{"at the default half", live, nil, 750, 0, true},
		{"above", live, nil, 1500, 0, true},
		{"a lower fraction", live, nil, 150, 0.1, true},
		{"just below a lower fraction", live, nil, 149, 0.1, false},
		{"purging off", live, nil, 1500, -1, false},
		{"no changes counted", live, nil, 0, 0, false},
		{"a container read by a job", live, map[string]bool{"w-2": true}, 1500, 0, false},
		{"one container", live[:1], nil, 1500, 0, false},
	} {
		sel, ok := SelectPurge(tc.live, tc.busy, tc.changed, StrataOptions{PurgeFraction: tc.fraction})
		if ok != tc.want {
			t.Errorf("%s: selected %v, want %v", tc.name, ok, tc.want)
			continue
		}
		if ok && len(sel.Inputs) != len(tc.live) {
			t.Errorf("%s: %d inputs, want every live container (%d)", tc.name, len(sel.Inputs), len(tc.live))
		}
	}
}

// TestPurgeMergesMostlyChangedTable: batches of changes applied to a keyed
// table start, once their rows reach half the table's, a mergeout of
// every container with the change floor (a full fold); none while it
// runs; after it the count starts again from the changes applied
// meanwhile; a partial fold takes off the rows it folded away.
func TestPurgeMergesMostlyChangedTable(t *testing.T) {
	hook := &floorHook{floor: 100}
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 100}, ChangeFloor: hook.get})
	if _, err := h.s.Register(h.ctx, h.keyedReq("load", 0, 2, "id")); err != nil { // 200 rows
		t.Fatal(err)
	}
	// 40 rows a batch: 200 changed of 400 rows after the fifth.
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("w1-%d", i)
		if _, err := h.s.Apply(h.ctx, h.changesReq(id, "w1", uint64(i), 40, int64(100+i), int64(100+i))); err != nil {
			t.Fatal(err)
		}
		if got := len(h.pub.mergeouts); (i < 5 && got != 0) || (i == 5 && got != 1) {
			t.Fatalf("after batch %d (%d changed rows): %d mergeouts", i, h.state("t").ChangedRows, got)
		}
	}
	purge := h.pub.mergeouts[0]
	if len(purge.Inputs) != 7 || purge.DropMarkersThrough != 100 {
		t.Fatalf("purge: %d inputs, drop_markers_through %d; want every one of the 7, 100", len(purge.Inputs), purge.DropMarkersThrough)
	}
	// Applied while it runs, enough for another purge: none started.
	if _, err := h.s.Apply(h.ctx, h.changesReq("w1-6", "w1", 6, 300, 106, 106)); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 1 {
		t.Fatalf("%d mergeouts while the purge runs, want 1", len(h.pub.mergeouts))
	}
	// The purge folds 400 rows into 200; what was applied meanwhile
	// (300 rows, 60% of 500) is purged next.
	if err := h.finishKeyed(purge, 200, "id"); err != nil {
		t.Fatal(err)
	}
	if len(h.pub.mergeouts) != 2 || len(h.pub.mergeouts[1].Inputs) != 2 {
		t.Fatalf("after the purge: %d mergeouts (changed rows %d), want a second one of the 2 live", len(h.pub.mergeouts), h.state("t").ChangedRows)
	}
	if err := h.finishKeyed(h.pub.mergeouts[1], 400, "id"); err != nil {
		t.Fatal(err)
	}
	if st := h.state("t"); st.ChangedRows != 0 || st.FrozenThrough != 100 || len(st.Live) != 1 {
		t.Fatalf("after both: changed rows %d, frozen through %d, %d live", st.ChangedRows, st.FrozenThrough, len(st.Live))
	}
	// A partial fold takes off what it folded away.
	st := &ProjectionState{PrimaryKey: []string{"id"}, ChangedRows: 50,
		Live: []messages.ContainerRef{{ID: "a", Rows: 30}, {ID: "b", Rows: 20}}}
	(&mergeoutJob{messages.MergeoutJob{Inputs: st.Live, Output: "m"}}).settle(st, messages.ContainerRef{ID: "m", Rows: 35})
	if st.ChangedRows != 35 {
		t.Errorf("after a partial fold of 50 rows into 35: changed rows %d, want 35", st.ChangedRows)
	}
}
