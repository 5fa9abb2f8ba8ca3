package columnar

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestListRemove(t *testing.T) {
	data := t.TempDir()
	if ids, err := List(data, "t", "p"); err != nil || len(ids) != 0 {
		t.Fatalf("empty: %v %v", ids, err)
	}
	if _, err := Generate(data, GenOptions{Columns: 2, Containers: 3, RowsPerContainer: 10}); err != nil {
		t.Fatal(err)
	}
	// An unfinished write is not listed, and RemoveTemp deletes it.
	w, err := Create(ContainerDir(data, "t", "p", "c9999"), WriterOptions{Schema: allTypesSchema()})
	if err != nil {
		t.Fatal(err)
	}
	_ = w
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
	if err := Remove(ContainerDir(data, "t", "p", "c0001")); err != nil {
		t.Fatal(err)
	}
	if err := Remove(ContainerDir(data, "t", "p", "c0001")); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if err := RemoveTemp(data, "t", "p"); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(data, "t", "p"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"c0000", "c0002"}) {
		t.Fatalf("left: %v", names)
	}
}
