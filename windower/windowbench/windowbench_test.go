package windowbench_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

// TestQueriesParse checks every query of the suite: a unique name, a known
// table, SQL strata's parser accepts once its table is put in, and as many
// outputs as select items.
func TestQueriesParse(t *testing.T) {
	seen := map[string]bool{}
	for _, q := range windowbench.Queries() {
		if q.Name == "" || seen[q.Name] {
			t.Errorf("query name %q empty or repeated", q.Name)
		}
		seen[q.Name] = true
		if q.Table != windowbench.TableByID && q.Table != windowbench.TableByA && q.Table != windowbench.TableSeries {
			t.Errorf("%s: unknown table %q", q.Name, q.Table)
		}
		if (q.Table == windowbench.TableSeries) != q.Spill {
			t.Errorf("%s: table %s, spill %v: the series is the spilling case's table", q.Name, q.Table, q.Spill)
		}
		text := q.Text()
		if strings.Contains(text, "{{") {
			t.Errorf("%s: unexpanded placeholder: %s", q.Name, text)
		}
		wq, err := sqlparse.Parse(text)
		if err != nil {
			t.Errorf("%s: %v", q.Name, err)
			continue
		}
		if len(wq.Select) != len(q.Outputs) {
			t.Errorf("%s: %d select items, %d outputs", q.Name, len(wq.Select), len(q.Outputs))
		}
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, b := windowbench.Generate(5000, 50, 3), windowbench.Generate(5000, 50, 3)
	for i := range a.N {
		if a.A[i] != b.A[i] || a.G[i] != b.G[i] || a.T[i] != b.T[i] || a.S[i] != b.S[i] || a.SNull[i] != b.SNull[i] || a.K[i] != b.K[i] {
			t.Fatalf("row %d differs between two tables of one seed", i)
		}
		if a.G[i] < 0 || a.G[i] >= 50 {
			t.Fatalf("row %d: g = %d, want [0, 50)", i, a.G[i])
		}
	}
}

func TestWriteContainer(t *testing.T) {
	w := windowbench.Generate(10000, 10, 1)
	dir := filepath.Join(t.TempDir(), "w_by_a")
	m, err := w.WriteContainer(dir, columnar.WriterOptions{Table: "w", Projection: "by_a", ID: "c1", BlockRows: 4096,
		SortKey: columnar.SortKey{{Name: "a"}}}, w.OrderBy(w.A))
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != int64(w.N) {
		t.Fatalf("%d rows written, want %d", m.Rows, w.N)
	}
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.SortKey(); len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("sort key %v, want a", got)
	}
	if !c.Schema().Equal(windowbench.Schema()) {
		t.Fatalf("schema %v, want %v", c.Schema(), windowbench.Schema())
	}
}

func TestWriteSeries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "big")
	m, err := windowbench.WriteSeries(dir, columnar.WriterOptions{Table: "big", Projection: "p", ID: "c0"}, 70000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 70000 {
		t.Fatalf("%d rows written, want 70000", m.Rows)
	}
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Schema().Equal(windowbench.SeriesSchema()) {
		t.Fatalf("schema %v", c.Schema())
	}
}
