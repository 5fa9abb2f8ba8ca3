package main

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/messages"
)

func TestPercentileRank(t *testing.T) {
	// 1..100 ms: the nearest-rank p-th percentile is p ms.
	lat := make([]uint32, 100)
	for i := range lat {
		lat[i] = uint32(100-i) * 1000 // unsorted: summarize sorts
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(lat), func(i, j int) { lat[i], lat[j] = lat[j], lat[i] })
	s := summarizeLatencies(lat)
	want := latencySummary{P50: 50, P90: 90, P99: 99, Max: 100, Mean: 50.5}
	if s != want {
		t.Fatalf("summary of 1..100ms = %+v, want %+v", s, want)
	}
	for _, c := range []struct {
		vals []uint32
		p    float64
		want uint32
	}{
		{[]uint32{7}, 50, 7},
		{[]uint32{7}, 99, 7},
		{[]uint32{1, 2}, 50, 1},
		{[]uint32{1, 2}, 51, 2},
		{[]uint32{1, 2, 3}, 99, 3},
		{[]uint32{1, 2, 3}, 0, 1},
		{[]uint32{10, 20, 30, 40, 50, 60, 70, 80, 90, 1000}, 90, 90},
		{[]uint32{10, 20, 30, 40, 50, 60, 70, 80, 90, 1000}, 91, 1000},
	} {
		if got := percentileRank(c.vals, c.p); got != c.want {
			t.Errorf("percentileRank(%v, %v) = %d, want %d", c.vals, c.p, got, c.want)
		}
	}
	if s := summarizeLatencies(nil); s != (latencySummary{}) {
		t.Errorf("summary of no latencies = %+v, want zeros", s)
	}
}

func TestChangeLatencies(t *testing.T) {
	// The stream held 100 messages before the run; the run's events got
	// 101..106, and 104 is another publisher's (acked to no one here).
	p := &pubTimes{base: 100}
	acks := []struct {
		seq uint64
		at  uint32 // published at, µs
	}{
		{102, 2000}, {101, 1000}, {103, 2500}, {106, 9000}, {105, 4000},
	}
	for _, a := range acks {
		if err := p.record(a.seq, a.at, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.t) != 6 || p.t[3] != 0 {
		t.Fatalf("publish times by offset = %v, want 6 with offset 3 (sequence 104) unset", p.t)
	}
	if err := p.record(100, 5, 1); err == nil || !strings.Contains(err.Error(), "not after 100") {
		t.Errorf("record of sequence 100 (before the run): err = %v", err)
	}
	// Polls: the floor at 102 at 1.5ms (before 103 was published: its
	// latency counts from its publish), 105 at 5ms; 106 never seen.
	obs := []floorObs{{at: 1500, floor: 102}, {at: 5000, floor: 105}}
	lat, notVisible := changeLatencies(p, obs)
	want := []uint32{500, 0, 2500, 1000} // 101: 1.5ms-1ms; 102: seen at 1.5ms, published at 2ms, clamped to 0; 103; 105
	if !slices.Equal(lat, want) || notVisible != 1 {
		t.Fatalf("latencies = %v, %d not visible; want %v, 1", lat, notVisible, want)
	}
	if p.t != nil {
		t.Error("changeLatencies left the spent publish times")
	}
}

func TestChangeLatenciesMany(t *testing.T) {
	// 100k events a ms apart from 1ms on, each visible at the next poll
	// on a 1s grid: latencies spread evenly over 0..999ms.
	p := &pubTimes{base: 7}
	const n = 100000
	for i := range n {
		if err := p.record(8+uint64(i), uint32(i+1)*1000, 1); err != nil {
			t.Fatal(err)
		}
	}
	var obs []floorObs
	for s := uint32(1); s <= 101; s++ {
		// At s seconds, events published through s seconds are visible:
		// event i (sequence 8+i) was published at (i+1) ms.
		obs = append(obs, floorObs{at: s * 1e6, floor: 7 + uint64(min(s*1000, n))})
	}
	lat, notVisible := changeLatencies(p, obs)
	if len(lat) != n || notVisible != 0 {
		t.Fatalf("%d latencies, %d not visible; want %d, 0", len(lat), notVisible, n)
	}
	s := summarizeLatencies(lat)
	if s.P50 != 499 || s.P90 != 899 || s.P99 != 989 || s.Max != 999 {
		t.Fatalf("summary = %+v, want p50 499, p90 899, p99 989, max 999 (ms): each of 0..999 a hundred times", s)
	}
}

// TestChangeLatenciesBatches: a batch's events each count, with the
// batch's latency, in the latencies, the events not visible and the
// steady rate.
func TestChangeLatenciesBatches(t *testing.T) {
	p := &pubTimes{base: 10}
	for _, a := range []struct {
		seq    uint64
		at     uint32
		events int
	}{{11, 1000, 3}, {12, 2000, 1}, {13, 3000, 5}} {
		if err := p.record(a.seq, a.at, a.events); err != nil {
			t.Fatal(err)
		}
	}
	through := p.eventsThrough()
	if got := []uint64{through(10), through(11), through(12), through(13), through(99)}; !slices.Equal(got, []uint64{0, 3, 4, 9, 9}) {
		t.Errorf("events through sequences 10..13, 99 = %v, want 0 3 4 9 9", got)
	}
	obs := []floorObs{{at: 1000000, floor: 11}, {at: 2500000, floor: 12}}
	if got := steadyRate(obs, 0, 3000000, through); got != 1/1.5 {
		t.Errorf("steadyRate = %v events/s, want 1 event in 1.5s", got)
	}
	lat, notVisible := changeLatencies(p, obs)
	want := []uint32{999000, 999000, 999000, 2498000}
	if !slices.Equal(lat, want) || notVisible != 5 {
		t.Fatalf("latencies = %v, %d not visible; want %v, 5", lat, notVisible, want)
	}
}

func TestSteadyRate(t *testing.T) {
	obs := []floorObs{{at: 500000, floor: 10}, {at: 1100000, floor: 1000}, {at: 2100000, floor: 3000}, {at: 3100000, floor: 5000}, {at: 4000000, floor: 9000}}
	// From the first poll at or past 1s (1.1s, 1000) to the last at or
	// before 3.5s (3.1s, 5000): 4000 in 2s.
	one := func(seq uint64) uint64 { return seq }
	if got := steadyRate(obs, 1e6, 3500000, one); got != 2000 {
		t.Errorf("steadyRate = %v, want 2000", got)
	}
	if got := steadyRate(obs, 1e6, 1500000, one); got != 0 {
		t.Errorf("steadyRate over less than a second = %v, want 0", got)
	}
}

func TestAccountStateRows(t *testing.T) {
	types := []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowText}
	rows := [][]any{{int64(1), int64(1), int64(0), "  filler  "}, {int64(2), int64(1), nil, "  filler  "}, {int64(3), int64(1), int64(-4), "x"}}
	st := &accountState{name: "pgbench_accounts", types: types, keyTypes: types[:1], n: 4, bits: 64,
		has: make([]bool, 4), null: make([]bool, 4), balance: make([]int64, 4), suffixID: make([]uint32, 4), poff: make([]uint32, 5)}
	ids := map[string]uint32{}
	for _, r := range rows {
		i := r[0].(int64) - 1
		pre, _ := messages.EncodeRow(types[:2], r[:2])
		suf, _ := messages.EncodeRow(types[3:], r[3:])
		id, ok := ids[string(suf)]
		if !ok {
			id = uint32(len(st.suffixes))
			ids[string(suf)] = id
			st.suffixes = append(st.suffixes, suf)
		}
		st.prefix = append(st.prefix, pre...)
		st.has[i], st.suffixID[i] = true, id
		if b, ok := r[2].(int64); ok {
			st.balance[i] = b
		} else {
			st.null[i] = true
		}
	}
	st.poff = []uint32{0, 18, 36, 54, 54}
	if len(st.suffixes) != 2 {
		t.Fatalf("%d suffixes, want 2 (the filler interned)", len(st.suffixes))
	}
	for _, c := range []struct {
		i, delta int64
		old, new []any
	}{
		{0, 5, rows[0], []any{int64(1), int64(1), int64(5), "  filler  "}},
		{0, -7, []any{int64(1), int64(1), int64(5), "  filler  "}, []any{int64(1), int64(1), int64(-2), "  filler  "}},
		{1, 9, rows[1], rows[1]}, // NULL + delta is NULL
		{2, 4, rows[2], []any{int64(3), int64(1), int64(0), "x"}},
	} {
		ev, ok, err := st.update("e", c.i, c.delta)
		if err != nil || !ok {
			t.Fatalf("update(%d): %v, %v", c.i, ok, err)
		}
		wantOld, _ := messages.EncodeRow(types, c.old)
		wantNew, _ := messages.EncodeRow(types, c.new)
		wantKey, _ := messages.EncodeRow(types[:1], []any{c.i + 1})
		if !slices.Equal(ev.OldRow, wantOld) || !slices.Equal(ev.NewRow, wantNew) || !slices.Equal(ev.Key, wantKey) {
			t.Errorf("update(%d, %d): old %x new %x key %x; want %x %x %x", c.i, c.delta, ev.OldRow, ev.NewRow, ev.Key, wantOld, wantNew, wantKey)
		}
		if err := ev.Validate(); err != nil {
			t.Errorf("update(%d): %v", c.i, err)
		}
	}
	if _, ok, _ := st.update("e", 3, 1); ok {
		t.Error("update of an account without a row made an event")
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
strata_changes_applied_total{worker="w1",table="a"} 10
strata_changes_applied_total{worker="w1",table="b"} 5
strata_change_apply_duration_seconds_sum{worker="w1"} 0.25
weird{label="has } brace"} 3
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"process_cpu_seconds_total": 12.5, "strata_changes_applied_total": 15, "strata_change_apply_duration_seconds_sum": 0.25, "weird": 3} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
	if got := metricsURL("127.0.0.1:9104"); got != "http://127.0.0.1:9104/metrics" {
		t.Errorf("metricsURL = %s", got)
	}
	if got := metricsURL("http://h:1/m"); got != "http://h:1/m" {
		t.Errorf("metricsURL of a URL = %s", got)
	}
}
