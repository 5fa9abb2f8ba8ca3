package columnar

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden (only when the format version changes)")

// goldenOpts made testdata/golden/t/p/c0000: a container of every type,
// zstd and LZ4 both appear across the test suite, this one is LZ4.
var goldenOpts = GenOptions{Columns: 16, KeyColumns: 3, Containers: 1, RowsPerContainer: 300, BlockRows: 128, Seed: 2026}

// TestGoldenContainer reads a container committed to the repository: the
// format this package writes today must stay readable, and the generator
// must still make the same rows from the same seed.
func TestGoldenContainer(t *testing.T) {
	golden := filepath.Join("testdata", "golden")
	if *updateGolden {
		os.RemoveAll(golden)
		if _, err := Generate(golden, goldenOpts); err != nil {
			t.Fatal(err)
		}
	}
	dir := ContainerDir(golden, "t", "p", "c0000")
	if err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	old, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := t.TempDir()
	if _, err := Generate(fresh, goldenOpts); err != nil {
		t.Fatal(err)
	}
	now, err := Open(ContainerDir(fresh, "t", "p", "c0000"), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !old.Schema().Equal(now.Schema()) || !old.SortKey().Equal(now.SortKey()) || old.Rows() != now.Rows() {
		t.Fatalf("golden container's schema, key or rows differ from a fresh one")
	}
	for col := range old.Schema().NumFields() {
		a, b := readColumn(t, old, col), readColumn(t, now, col)
		if !array.ApproxEqual(a, b, array.WithNaNsEqual(true)) {
			t.Errorf("column %s of the golden container differs from a fresh one", old.Schema().Field(col).Name)
		}
		a.Release()
		b.Release()
	}
}
