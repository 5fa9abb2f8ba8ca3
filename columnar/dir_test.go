package columnar

import (
	"slices"
	"testing"
)

// TestListTempDirs: List names the committed containers only, and
// TempDirs finds the temporary directory of an unfinished write.
func TestListTempDirs(t *testing.T) {
	data := t.TempDir()
	if ids, err := List(data, "t", "p"); err != nil || len(ids) != 0 {
		t.Fatalf("empty: %v %v", ids, err)
	}
	if _, err := Generate(data, GenOptions{Columns: 2, Containers: 3, RowsPerContainer: 10}); err != nil {
		t.Fatal(err)
	}
	w, err := Create(ContainerDir(data, "t", "p", "c9999"), WriterOptions{Schema: allTypesSchema()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if tmps, err := TempDirs(ContainerDir(data, "t", "p", "c9999")); err != nil || len(tmps) != 1 {
		t.Fatalf("temp dirs of c9999: %v %v", tmps, err)
	}
	if tmps, err := TempDirs(ContainerDir(data, "t", "p", "c0000")); err != nil || len(tmps) != 0 {
		t.Fatalf("temp dirs of c0000: %v %v", tmps, err)
	}
	ids, err := List(data, "t", "p")
	if err != nil || !slices.Equal(ids, []string{"c0000", "c0001", "c0002"}) {
		t.Fatalf("list: %v %v", ids, err)
	}
}
