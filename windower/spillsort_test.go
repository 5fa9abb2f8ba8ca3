package windower

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/windower/sqlparse"
)

// TestSpillGroupWithoutKeysFirst is the reproduction of sorted runs
// written without a sort key: a window group without PARTITION BY or
// ORDER BY (OVER ()) before another group sorted its spilled input in
// runs with an empty sort key and gave them to the merger, which refuses
// them ("merger: inputs do not match: .../stage-1/run-000000 has no sort
// key"). Such runs are in no order; they are concatenated instead.
func TestSpillGroupWithoutKeysFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ref := shapeTable(rng, 20000)
	dirs := writeShape(t, t.TempDir(), ref, shape{n: ref.n, containers: 3, blockRows: 256})
	const w1 = `count(*) OVER (PARTITION BY g, s ORDER BY c DESC NULLS LAST RANGE BETWEEN CURRENT ROW AND INTERVAL '0 months 0 days 5400000000 microseconds' FOLLOWING EXCLUDE CURRENT ROW) AS w1`
	for _, sql := range []string{
		// As the differential test over keyed tables found it.
		`SELECT id, count(*) FILTER (WHERE x > 2) OVER () AS w0, ` + w1 + ` FROM t WHERE u IS NOT NULL`,
		`SELECT id, count(*) OVER () AS w0, ` + w1 + ` FROM t`,
		`SELECT id, u, sum(x) OVER () AS w0, ` + w1 + `, min(u) OVER () AS w2 FROM t WHERE x > 0`,
		// The group without keys last, and with an ORDER BY stage after it.
		`SELECT id, ` + w1 + `, count(*) FILTER (WHERE x > 2) OVER () AS w0 FROM t WHERE u IS NOT NULL`,
		`SELECT id, count(*) OVER () AS w0, max(s) OVER () AS w2 FROM t ORDER BY id DESC`,
	} {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		want := shapeWant(t, ref, q, nil)
		for _, threads := range []int{1, 4} {
			res, err := Run(context.Background(), q, dirs, Options{Grant: MinGrant, Threads: threads, TempDir: t.TempDir()})
			if err != nil {
				t.Fatalf("threads %d: %s: %v", threads, sql, err)
			}
			got, _ := readResult(t, res, 0)
			st := res.Stats()
			res.Close()
			if st.SpilledBytes == 0 {
				t.Fatalf("threads %d: %s: nothing spilled", threads, sql)
			}
			if st.PeakBytes > MinGrant {
				t.Errorf("threads %d: %s: peak %d bytes over the %d-byte grant", threads, sql, st.PeakBytes, int64(MinGrant))
			}
			for c, it := range q.Select {
				if len(got[c]) != len(want[c]) {
					t.Fatalf("threads %d: %s: column %s: %d rows, want %d", threads, sql, it.Alias, len(got[c]), len(want[c]))
				}
				for id, w := range want[c] {
					if g, ok := got[c][id]; !ok || !sameValue(g, w) {
						t.Fatalf("threads %d: %s: column %s: row id %d: got %+v, want %+v", threads, sql, it.Alias, id, short(g), short(w))
					}
				}
			}
		}
	}
}

// TestRowsWithinStrings cuts a block where a chunk's strings pass their
// room: a block of long strings taken whole held 1.7 times the strings a
// chunk was planned for, and a range-bucket stage passed its grant
// (seed 120, iteration 421 of the shapes test).
func TestRowsWithinStrings(t *testing.T) {
	mem := memory.NewGoAllocator()
	s := array.NewStringBuilder(mem)
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	n := array.NewInt64Builder(mem)
	for i := range 100 {
		s.Append(strings.Repeat("s", 10)) // 10 bytes a row
		if i%10 == 9 {
			b.Append(make([]byte, 1000))
		} else {
			b.AppendNull()
		}
		n.Append(int64(i))
	}
	cols := []arrow.Array{s.NewArray(), b.NewArray(), n.NewArray()}
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(schema, cols, 100)
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	for _, tc := range []struct {
		off, take, room int64
		atLeastOne      bool
		want            int64
	}{
		{0, 100, 1 << 30, false, 100}, // room for all
		{0, 100, 90, false, 9},        // rows 0-8: 90 bytes; row 9 carries 1010
		{0, 100, 1099, false, 9},      // row 9 would make 1100
		{0, 100, 1100, false, 10},     //
		{9, 50, 5, false, 0},          // not one row fits
		{9, 50, 5, true, 1},           // but the chunk is empty: one row
		{10, 5, 1 << 30, false, 5},    // no more than take
		{50, 50, 3 * 1010, false, 29}, // rows 50-78: 29*10 + 2*1000 (rows 59, 69); row 79 carries 1000 more
	} {
		if got := rowsWithinStrings(rec, tc.off, tc.take, tc.room, tc.atLeastOne); got != tc.want {
			t.Errorf("rows from %d, at most %d, within %d bytes: %d, want %d", tc.off, tc.take, tc.room, got, tc.want)
		}
	}
}
