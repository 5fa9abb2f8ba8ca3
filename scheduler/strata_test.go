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
