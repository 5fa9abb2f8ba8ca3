package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
)

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
	f := &loadFlags{table: "imp", projection: "p", rows: 1000, blockRows: 256, csvPath: path, sortKey: "id"}
	// The first import writes c0000..c0002, the second adds c0003..c0005.
	for load, firstID := range []int{0, 3} {
		ms, err := importLoad(context.Background(), data, f, columnar.CompressionLZ4)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for i, m := range ms {
			if want := fmt.Sprintf("c%04d", firstID+i); m.ID != want {
				t.Fatalf("load %d: container %d named %s, want %s", load, i, m.ID, want)
			}
			total += m.Rows
			dir := columnar.ContainerDir(data, "imp", "p", m.ID)
			if err := columnar.Verify(dir); err != nil {
				t.Fatal(err)
			}
			if got, err := columnar.ReadManifest(dir); err != nil || got.ID != m.ID || got.BlockRows != 256 {
				t.Fatalf("%s: manifest %+v, %v", m.ID, got, err)
			}
			checkSortedInt64(t, dir)
		}
		if total != 2501 || len(ms) != 3 {
			t.Fatalf("load %d: %d rows in %d containers, want 2501 in 3", load, total, len(ms))
		}
	}
	checkNoTemp(t, data)
}

// checkNoTemp fails if anything dot-prefixed is left under dir.
func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".") {
			t.Errorf("%s left behind", path)
		}
		return err
	})
}

func TestImportCSVNulls(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(path, []byte("id,s\n3,NULL\n2,\n1,-\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		nulls []string
		want  int // NULLs in column s
	}{
		{nil, 2},
		{[]string{"-"}, 1},
		{[]string{"-", "NULL", ""}, 3},
	} {
		data := filepath.Join(t.TempDir(), "data")
		f := &loadFlags{table: "n", projection: "p", rows: 10, blockRows: 256, csvPath: path, sortKey: "id", nulls: tt.nulls}
		ms, err := importLoad(context.Background(), data, f, columnar.CompressionLZ4)
		if err != nil {
			t.Fatal(err)
		}
		c, err := columnar.Open(columnar.ContainerDir(data, "n", "p", ms[0].ID), columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.OpenColumn(1)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a.NullN() != tt.want {
			t.Errorf("--null %q: %d NULLs, want %d", tt.nulls, a.NullN(), tt.want)
		}
		a.Release()
		r.Close()
	}
}

func TestImportFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csvPath, []byte("a,b\n3,x\n1,y\n2,z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyPath := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(emptyPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	headerPath := filepath.Join(dir, "header.csv")
	if err := os.WriteFile(headerPath, []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		flags loadFlags
		check func(error) bool
	}{
		{"unknown sort column", context.Background(), loadFlags{csvPath: csvPath, sortKey: "nope"},
			func(err error) bool { return errors.Is(err, columnar.ErrSchemaMismatch) }},
		{"no sort key", context.Background(), loadFlags{csvPath: csvPath},
			func(err error) bool { return errors.Is(err, errUsage) }},
		{"bad sort key", context.Background(), loadFlags{csvPath: csvPath, sortKey: "a sideways"},
			func(err error) bool { return errors.Is(err, errUsage) }},
		{"csv and parquet", context.Background(), loadFlags{csvPath: csvPath, pqPath: csvPath, sortKey: "a"},
			func(err error) bool { return errors.Is(err, errUsage) }},
		{"missing file", context.Background(), loadFlags{csvPath: filepath.Join(dir, "nope.csv"), sortKey: "a"},
			func(err error) bool { return errors.Is(err, os.ErrNotExist) }},
		{"empty file", context.Background(), loadFlags{csvPath: emptyPath, sortKey: "a"},
			func(err error) bool { return err != nil }},
		{"header only", context.Background(), loadFlags{csvPath: headerPath, sortKey: "a"},
			func(err error) bool { return strings.Contains(err.Error(), "no rows") }},
		{"not parquet", context.Background(), loadFlags{pqPath: csvPath, sortKey: "a"},
			func(err error) bool { return err != nil }},
		{"interrupted", canceled, loadFlags{csvPath: csvPath, sortKey: "a"},
			func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			f := tt.flags
			f.table, f.projection, f.rows, f.blockRows = "imp", "p", 2, 256
			ms, err := importLoad(tt.ctx, data, &f, columnar.CompressionLZ4)
			if err == nil || !tt.check(err) {
				t.Fatalf("import = %d containers, %v", len(ms), err)
			}
			if entries, _ := os.ReadDir(filepath.Join(data, "imp", "p")); len(entries) != 0 {
				t.Fatalf("a failed import left %d entries behind", len(entries))
			}
		})
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
	if _, err := exportContainer(columnar.ContainerDir(dir, "g", "p", ms[0].ID), pq, "parquet", convert.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	f := &loadFlags{table: "g", projection: "p", rows: 2000, blockRows: columnar.DefaultBlockRows, pqPath: pq, sortKey: "k0 DESC"}
	out, err := importLoad(context.Background(), filepath.Join(dir, "data"), f, columnar.CompressionZstd)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Rows != 2000 || out[1].Rows != 1000 || len(out[0].Schema) != 15 {
		t.Fatalf("imported %d containers: %+v", len(out), out)
	}
	for _, m := range out {
		if m.Compression != "zstd" || !m.SortKey.Equal(columnar.SortKey{{Name: "k0", Desc: true, NullsFirst: true}}) {
			t.Fatalf("%s: compression %s, sort key %s", m.ID, m.Compression, m.SortKey)
		}
		if err := columnar.Verify(columnar.ContainerDir(filepath.Join(dir, "data"), "g", "p", m.ID)); err != nil {
			t.Fatal(err)
		}
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
	checkNoTemp(t, data)
}

func TestNextContainerNumber(t *testing.T) {
	for _, tt := range []struct {
		entries []string
		want    int
	}{
		{nil, 0},
		{[]string{"c0000", "c0001"}, 2},
		{[]string{"c0007", "c0002"}, 8},
		{[]string{"m-0001"}, 1},
		{[]string{".c0000.tmp-123"}, 0},
		{[]string{"c0003", ".c0009.tmp-1", "cx"}, 4},
		{[]string{"c12345"}, 12346},
	} {
		dir := t.TempDir()
		for _, e := range tt.entries {
			if err := os.Mkdir(filepath.Join(dir, e), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := nextContainerNumber(dir); err != nil || got != tt.want {
			t.Errorf("%v: next %d, %v; want %d", tt.entries, got, err, tt.want)
		}
	}
	if got, err := nextContainerNumber(filepath.Join(t.TempDir(), "none")); err != nil || got != 0 {
		t.Errorf("missing projection: next %d, %v", got, err)
	}
}
