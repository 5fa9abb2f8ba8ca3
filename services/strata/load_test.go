package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/strata-db/strata/columnar"
)

func TestParseSortKey(t *testing.T) {
	tests := []struct {
		in   string
		want columnar.SortKey
		bad  bool
	}{
		{in: "a", want: columnar.SortKey{{Name: "a"}}},
		{in: "a, b desc", want: columnar.SortKey{{Name: "a"}, {Name: "b", Desc: true, NullsFirst: true}}},
		{in: "a ASC NULLS FIRST,b DESC NULLS LAST", want: columnar.SortKey{{Name: "a", NullsFirst: true}, {Name: "b", Desc: true}}},
		{in: "a,", bad: true},
		{in: "a sideways", bad: true},
	}
	for _, tt := range tests {
		got, err := parseSortKey(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("%q: accepted", tt.in)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%q = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestImportCSV(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,name,score\n")
	for i := range 2500 {
		// ids descend, so every container must be re-sorted.
		fmt.Fprintf(&b, "%d,n%d,%d.5\n", 2500-i, i%7, i)
	}
	b.WriteString(",nullid,1.0\n")
	path := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	key, _ := parseSortKey("id")
	var progress int
	ms, err := importFile(context.Background(), data, importOptions{path: path, kind: "csv", table: "imp", projection: "p",
		sortKey: key, rowsPerContainer: 1000, firstID: 3, blockRows: 256}, func(int, int64) { progress++ })
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for i, m := range ms {
		if want := fmt.Sprintf("c%04d", 3+i); m.ID != want {
			t.Fatalf("container %d named %s, want %s", i, m.ID, want)
		}
		total += m.Rows
		dir := columnar.ContainerDir(data, "imp", "p", m.ID)
		if err := columnar.Verify(dir); err != nil {
			t.Fatal(err)
		}
		checkSortedInt64(t, dir)
	}
	if total != 2501 || progress != len(ms) || len(ms) < 3 {
		t.Fatalf("%d rows in %d containers (%d progress calls), want 2501", total, len(ms), progress)
	}
	if _, err := importFile(context.Background(), data, importOptions{path: path, kind: "csv", table: "imp", projection: "q",
		sortKey: columnar.SortKey{{Name: "nope"}}, rowsPerContainer: 1000}, func(int, int64) {}); err == nil || !strings.Contains(err.Error(), "not in the input") {
		t.Fatalf("unknown sort column: %v", err)
	}
}

// checkSortedInt64 checks column 0 (int64, NULLS LAST) is ascending.
func checkSortedInt64(t *testing.T, dir string) {
	t.Helper()
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br, err := c.OpenColumns([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var prev int64 = -1 << 63
	sawNull := false
	for {
		rec, err := br.Next()
		if err != nil {
			break
		}
		col := rec.Column(0).(*array.Int64)
		for i := range col.Len() {
			if col.IsNull(i) {
				sawNull = true
				continue
			}
			if sawNull || col.Value(i) < prev {
				t.Fatalf("%s: row out of order at value %d after %d (null seen %v)", dir, col.Value(i), prev, sawNull)
			}
			prev = col.Value(i)
		}
		rec.Release()
	}
}

func TestImportParquetRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ms, err := columnar.Generate(dir, columnar.GenOptions{Table: "g", Projection: "p", Columns: 15, Containers: 1, RowsPerContainer: 3000})
	if err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "g.parquet")
	if _, err := exportContainer(columnar.ContainerDir(dir, "g", "p", ms[0].ID), pq, "parquet"); err != nil {
		t.Fatal(err)
	}
	key, _ := parseSortKey("k0 DESC")
	out, err := importFile(context.Background(), filepath.Join(dir, "data"), importOptions{path: pq, kind: "parquet", table: "g", projection: "p",
		sortKey: key, rowsPerContainer: 2000}, func(int, int64) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Rows != 2000 || out[1].Rows != 1000 || len(out[0].Schema) != 15 {
		t.Fatalf("imported %d containers: %+v", len(out), out)
	}
}

func TestGenerateAddsToAProjection(t *testing.T) {
	data := t.TempDir()
	opts := columnar.GenOptions{Table: "g", Projection: "p", Columns: 4, Containers: 2, RowsPerContainer: 100, Seed: 1}
	first, err := generate(context.Background(), data, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := generate(context.Background(), data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].ID != "c0000" || first[1].ID != "c0001" || second[0].ID != "c0002" || second[1].ID != "c0003" {
		t.Fatalf("ids %s %s then %s %s", first[0].ID, first[1].ID, second[0].ID, second[1].ID)
	}
	for _, id := range []string{"c0000", "c0001", "c0002", "c0003"} {
		dir := columnar.ContainerDir(data, "g", "p", id)
		if err := columnar.Verify(dir); err != nil {
			t.Fatal(err)
		}
		m, err := columnar.ReadManifest(dir)
		if err != nil || m.ID != id {
			t.Fatalf("%s: manifest names %v, %v", id, m.ID, err)
		}
	}
	entries, _ := os.ReadDir(data)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".load-") {
			t.Fatalf("staging directory %s left behind", e.Name())
		}
	}
}
