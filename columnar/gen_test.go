package columnar

import (
	"testing"
)

// TestGenerateFirstID checks that FirstID names the containers without
// changing their rows, and that a second Generate into the same projection
// with the next numbers adds to it.
func TestGenerateFirstID(t *testing.T) {
	data := t.TempDir()
	opts := GenOptions{Columns: 3, Containers: 2, RowsPerContainer: 50, Seed: 7}
	first, err := Generate(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.FirstID = 2
	second, err := Generate(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"c0000", "c0001"} {
		if first[i].ID != want {
			t.Fatalf("first load: container %d is %s, want %s", i, first[i].ID, want)
		}
	}
	for i, want := range []string{"c0002", "c0003"} {
		m, err := ReadManifest(ContainerDir(data, "t", "p", want))
		if err != nil || second[i].ID != want || m.ID != want {
			t.Fatalf("second load: container %d is %s (manifest %v, %v), want %s", i, second[i].ID, m, err, want)
		}
		if m.Files[1].CRC != first[i].Files[1].CRC {
			t.Fatalf("%s: rows depend on the container's number", want)
		}
	}
	if got := ContainerID(12345); got != "c12345" {
		t.Fatalf("ContainerID(12345) = %s", got)
	}
	opts.FirstID = -1
	if _, err := Generate(data, opts); err == nil {
		t.Fatal("negative FirstID accepted")
	}
}
