package main

import (
	"context"
	"math/big"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/strata-db/strata/internal/heaplimit"
	"github.com/strata-db/strata/windower/windowbench"
)

func TestCanonical(t *testing.T) {
	ts := time.Date(2024, 1, 1, 0, 0, 1, 0, time.UTC)
	tests := []struct {
		name string
		in   any
		want value
	}{
		{"nil", nil, value{}},
		{"int64", int64(-7), intValue(-7)},
		{"int32", int32(7), intValue(7)},
		{"bool", true, intValue(1)},
		{"float", 2.5, floatValue(2.5)},
		{"timestamp", ts, intValue(ts.UnixMicro())},
		{"hugeint", big.NewInt(1 << 40), intValue(1 << 40)},
		{"numeric integer", pgtype.Numeric{Int: big.NewInt(12), Exp: 2, Valid: true}, intValue(1200)},
		{"numeric fraction", pgtype.Numeric{Int: big.NewInt(125), Exp: -2, Valid: true}, floatValue(1.25)},
		{"numeric null", pgtype.Numeric{}, value{}},
		{"decimal", decimalText("3.75"), floatValue(3.75)},
		{"text", "3.75", stringValue("3.75")},
		{"empty text", "", stringValue("")},
		{"utf-8 text", "Zürich 東京 🙂", stringValue("Zürich 東京 🙂")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canonical(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("canonical(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
	if _, err := canonical(struct{}{}); err == nil {
		t.Fatal("canonical(struct{}{}): no error")
	}
}

// decimalText stands for a driver's decimal type, which prints itself.
type decimalText string

func (d decimalText) String() string { return string(d) }

func TestSameValue(t *testing.T) {
	tests := []struct {
		a, b value
		want bool
	}{
		{intValue(3), intValue(3), true},
		{intValue(3), intValue(4), false},
		{intValue(3), floatValue(3), true}, // sum as numeric vs bigint
		{floatValue(1.0 / 3), floatValue(0.3333333333333333), true},
		{floatValue(1000000.0), floatValue(1000000.0001), true}, // within 1e-9 relative
		{floatValue(1.0), floatValue(1.001), false},
		{value{}, value{}, true},
		{value{}, intValue(0), false},
		{stringValue("café"), stringValue("café"), true},
		{stringValue("café"), stringValue("cafe"), false},
		{stringValue(""), value{}, false}, // the empty string is not NULL
		{stringValue("3"), intValue(3), false},
	}
	for _, tc := range tests {
		if got := sameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("sameValue(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func resultOf(cols int, rows ...[]value) *resultSet {
	rs := newResultSet(cols)
	for _, r := range rows {
		rs.append(r)
	}
	return rs
}

func TestDiffResults(t *testing.T) {
	a := resultOf(2, []value{intValue(2), intValue(20)}, []value{intValue(1), value{}}, []value{intValue(3), floatValue(0.5)})
	b := resultOf(2, []value{intValue(3), floatValue(0.5)}, []value{intValue(1), value{}}, []value{intValue(2), intValue(20)})
	a.sortRows()
	b.sortRows()
	if m := diffResults(a, b); m != nil {
		t.Fatalf("same rows in another order differ: %s", m)
	}
	if got := a.row(0); got[0] != intValue(1) || got[1].kind != kindNull {
		t.Fatalf("sorted first row = %v", formatRow(got))
	}

	c := resultOf(2, []value{intValue(1), value{}}, []value{intValue(2), intValue(21)}, []value{intValue(3), floatValue(0.5)})
	m := diffResults(a, c)
	if m == nil || m.Row != 1 || !strings.Contains(m.String(), "(2, 20) vs (2, 21)") {
		t.Fatalf("diff = %v, want row 1 (2, 20) vs (2, 21)", m)
	}

	short := resultOf(2, []value{intValue(1), value{}})
	m = diffResults(a, short)
	if m == nil || !strings.Contains(m.String(), "3 rows vs 1") {
		t.Fatalf("diff = %v, want a row count difference", m)
	}
	if m := diffResults(a, resultOf(3)); m == nil || m.Row != -1 {
		t.Fatalf("diff = %v, want a column count difference", m)
	}
}

func TestStringResults(t *testing.T) {
	a := resultOf(2, []value{stringValue("b"), intValue(1)}, []value{value{}, intValue(2)},
		[]value{stringValue(""), intValue(3)}, []value{stringValue("ab"), intValue(4)})
	a.sortRows()
	var order []string
	for i := range a.rows() {
		order = append(order, a.row(i)[0].String())
	}
	if got, want := strings.Join(order, " "), `NULL "" "ab" "b"`; got != want {
		t.Fatalf("sorted strings %s, want %s", got, want)
	}
	b := resultOf(2, []value{value{}, intValue(2)}, []value{stringValue(""), intValue(3)},
		[]value{stringValue("ab"), intValue(4)}, []value{stringValue("bb"), intValue(1)})
	m := diffResults(a, b)
	if m == nil || m.Row != 3 || !strings.Contains(m.String(), `("b", 1) vs ("bb", 1)`) {
		t.Fatalf("diff = %v, want row 3 (\"b\", 1) vs (\"bb\", 1)", m)
	}
	long := stringValue(strings.Repeat("é", 100))
	if s := long.String(); !strings.HasSuffix(s, "... (200 bytes)") || len(s) > 120 {
		t.Fatalf("long string shown as %s", s)
	}
}

// TestWindowTableStrings checks the string columns every system loads:
// deterministic, with NULLs, empty, multi-byte and long values, and in
// every format the peers load (Arrow for strata and Parquet, the values
// COPY sends to PostgreSQL).
func TestWindowTableStrings(t *testing.T) {
	w := windowbench.Generate(20000, 50, 7)
	again := windowbench.Generate(20000, 50, 7)
	var nulls, empty, multibyte, long int
	for i := range w.N {
		if w.S[i] != again.S[i] || w.SNull[i] != again.SNull[i] {
			t.Fatalf("row %d: not deterministic", i)
		}
		switch s := w.S[i]; {
		case w.SNull[i]:
			nulls++
		case s == "":
			empty++
		case len(s) > 40:
			long++
		}
		if len(w.S[i]) != utf8.RuneCountInString(w.S[i]) {
			multibyte++
		}
	}
	for name, got := range map[string]int{"NULL": nulls, "empty": empty, "multi-byte": multibyte, "long": long} {
		if got < w.N/100 {
			t.Errorf("%d %s strings of %d", got, name, w.N)
		}
	}
	recs := w.Records(memory.DefaultAllocator, w.OrderBy(w.ID), 4096)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	i := 0
	for _, r := range recs {
		col := r.Column(6).(*array.String)
		for j := range col.Len() {
			if col.IsNull(j) != w.SNull[i] || col.Value(j) != w.S[i] {
				t.Fatalf("record row %d: %q (null %v), want %q (null %v)", i, col.Value(j), col.IsNull(j), w.S[i], w.SNull[i])
			}
			if k := r.Column(7).(*array.String); k.IsNull(j) || k.Value(j) != w.K[i] || len(w.K[i]) != len(w.K[0]) {
				t.Fatalf("record row %d: k %q, want %q of fixed width", i, k.Value(j), w.K[i])
			}
			i++
		}
	}
}

func TestParseWALStats(t *testing.T) {
	b, err := os.ReadFile("testdata/pg_waldump_stats.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseWALStats(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"Transaction/COMMIT": 680, "Heap2/PRUNE": 618858, "Heap/UPDATE": 1038105, "Heap/HOT_UPDATE": 1239856,
		"Heap/LOCK": 5863262, "Heap/UPDATE+INIT": 40020, "Btree/INSERT_LEAF": 200000,
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d types, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := parseWALStats("pg_waldump: error: could not find file\n"); err == nil {
		t.Fatal("no error for output without statistics")
	}
}

func TestTimedTextConsumesEveryOutput(t *testing.T) {
	for _, q := range windowQueries() {
		text := timedText(q)
		if !strings.Contains(text, "FROM ("+q.Text()+") q") {
			t.Errorf("%s: timed text does not wrap the query: %s", q.Name, text)
		}
		for _, c := range q.Outputs {
			if !strings.Contains(text, "max("+c+")") {
				t.Errorf("%s: output %s not consumed: %s", q.Name, c, text)
			}
		}
		if strings.Contains(q.Text(), "{{") {
			t.Errorf("%s: unexpanded placeholder: %s", q.Name, q.Text())
		}
	}
}

func TestWALUpdatesCarryTheirRows(t *testing.T) {
	rows := generateWALRows(50, 1)
	for _, w := range walWorkloads() {
		ups := generateWALUpdates(rows, w, 200, 2)
		cur := append([]walRow(nil), rows...)
		for i, u := range ups {
			old := cur[u.key]
			changed := map[int]bool{}
			for _, c := range u.columns {
				changed[c] = true
			}
			if u.row.id != old.id {
				t.Fatalf("%s update %d: key changed", w.Name, i)
			}
			for c := range 4 {
				if !changed[c] && u.row.ints[c] != old.ints[c] {
					t.Fatalf("%s update %d: column i%d changed without being set", w.Name, i, c+1)
				}
			}
			if !changed[4] && u.row.s1 != old.s1 || !changed[5] && u.row.s2 != old.s2 || !changed[6] && u.row.s3 != old.s3 {
				t.Fatalf("%s update %d: a text column changed without being set", w.Name, i)
			}
			if got := len(u.values()); got != len(u.columns)+1 {
				t.Fatalf("%s update %d: %d values for %d columns", w.Name, i, got, len(u.columns))
			}
			cur[u.key] = u.row
		}
	}
	if got := updateStatement([]int{0, 4}); got != "UPDATE u SET i1 = $2, s1 = $3 WHERE id = $1" {
		t.Fatalf("updateStatement = %q", got)
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{formatBytes(32 * mib), "32MiB"},
		{formatBytes(8 * gib), "8GiB"},
		{formatCount(1_000_000), "1M"},
		{formatCount(8192), "8192"},
		{formatRatio(3.456), "3.46x"},
		{formatRatio(0), "-"},
		{ratioText(measure{Seconds: 20, TimedOut: true}, measure{Seconds: 0.1, Runs: 1}), "> 200.0x"},
		{formatSeconds(measure{Err: "duckdb: Out of Memory Error: x"}), "out of memory"},
		{formatSeconds(measure{Skipped: "no"}), "skipped"},
		{strataNote(measure{Note: "peak 20MiB", CollectSeconds: 0.0023}), "peak 20MiB, the collection after it 2.3ms"},
		{strataNote(measure{CollectSeconds: 0.0023}), "the collection after it 2.3ms"},
		{strataNote(measure{Note: "peak 20MiB"}), "peak 20MiB"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestBestOfUnderGrant: strata's runs are timed under the collector its
// worker would set for the grant, and a peer's (grant 0) and what follows
// under the collector as it was.
func TestBestOfUnderGrant(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	before := debug.SetMemoryLimit(-1)
	grant := int64(256 << 20)
	var during []int64
	var sink [][]byte
	run := func(context.Context) error {
		during = append(during, debug.SetMemoryLimit(-1))
		// As a job whose garbage the worker collects after it.
		for range 2 * heaplimit.CollectAbove >> 20 {
			sink = append(sink, make([]byte, 1<<20))
		}
		sink = nil
		return nil
	}
	m := bestOfUnderGrant(context.Background(), grant, 2, false, 0, run)
	if m.Runs != 2 {
		t.Fatalf("bestOfUnderGrant: %+v, want 2 runs", m)
	}
	if m.CollectSeconds <= 0 || m.CollectSeconds > m.Seconds {
		t.Errorf("the fastest run's collection took %gs of its %gs: want a part of it", m.CollectSeconds, m.Seconds)
	}
	for i, l := range during {
		if l < heaplimit.Limit(grant) || l == before {
			t.Errorf("run %d under memory limit %d: want the limit for a %d-byte grant (at least %d)", i, l, grant, heaplimit.Limit(grant))
		}
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("memory limit %d after the runs, want %d as before", got, before)
	}
	during = nil
	if m := bestOfUnderGrant(context.Background(), 0, 1, false, 0, run); m.CollectSeconds != 0 {
		t.Errorf("a peer's run (grant 0) has a collection of %gs, want none", m.CollectSeconds)
	}
	if len(during) != 1 || during[0] != before {
		t.Errorf("a peer's run (grant 0) under memory limit %v, want %d", during, before)
	}
	// With GOGC in the environment the worker leaves the collector alone
	// and collects nothing after a job: no collection is reported.
	t.Setenv("GOGC", "100")
	if m := bestOfUnderGrant(context.Background(), grant, 1, false, 0, run); m.CollectSeconds != 0 {
		t.Errorf("under the environment's collector a collection of %gs, want none", m.CollectSeconds)
	}
}

// TestMachine: the host line carries the measured cost of a page fault,
// and leaves it out where it was not measured (results of older runs).
func TestMachine(t *testing.T) {
	m := machine{CPU: "AMD EPYC", Cores: 2, MemoryGiB: 23.5}
	if got, want := m.String(), "AMD EPYC, 2 cores, 23.5 GiB"; got != want {
		t.Errorf("unmeasured: %q, want %q", got, want)
	}
	m.FaultMicros = 11.84
	if got, want := m.String(), "AMD EPYC, 2 cores, 23.5 GiB, 11.8µs a page fault"; got != want {
		t.Errorf("measured: %q, want %q", got, want)
	}
	// A fault costs more than nothing and less than a millisecond on any
	// host the suites can run on.
	if us := faultMicros(); us <= 0 || us > 1000 {
		t.Errorf("faultMicros() = %gµs a page", us)
	}
}

// bestOf runs a short case more than its runs when asked, and a longer one
// or one not asked for exactly its runs.
func TestBestOfShortRuns(t *testing.T) {
	sleeper := func(d time.Duration, n *int) func(context.Context) error {
		return func(context.Context) error { *n++; time.Sleep(d); return nil }
	}
	var quick, slow, plain int
	if m := bestOf(context.Background(), 3, true, 0, sleeper(time.Millisecond, &quick)); m.Runs != quick || quick <= 3 || quick > shortRunsMost {
		t.Errorf("a 1ms case ran %d times (measure %d runs), want more than 3 and at most %d", quick, m.Runs, shortRunsMost)
	}
	if bestOf(context.Background(), 3, true, 0, sleeper(shortRun+5*time.Millisecond, &slow)); slow != 3 {
		t.Errorf("a case over %s ran %d times, want 3", shortRun, slow)
	}
	if bestOf(context.Background(), 3, false, 0, sleeper(time.Millisecond, &plain)); plain != 3 {
		t.Errorf("a 1ms case not asked to run more ran %d times, want 3", plain)
	}
}
