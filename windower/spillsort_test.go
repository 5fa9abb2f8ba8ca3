package windower

import (
	"context"
	"math/rand/v2"
	"testing"

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
