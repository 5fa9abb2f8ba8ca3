package columnar

import (
	"errors"
	"io"
	"testing"
)

// TestBatchReaderReadConcurrently reads every column of a container of
// many blocks one column after another and on several goroutines: the
// same batches either way.
func TestBatchReaderReadConcurrently(t *testing.T) {
	dir := t.TempDir()
	ms, err := Generate(dir, GenOptions{Columns: 12, KeyColumns: 2, Containers: 1, RowsPerContainer: 5000, BlockRows: 512, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]int, c.Schema().NumFields())
	for i := range cols {
		cols[i] = i
	}
	read := func(concurrency int) []string {
		br, err := c.OpenColumns(cols)
		if err != nil {
			t.Fatal(err)
		}
		defer br.Close()
		br.ReadConcurrently(concurrency)
		var out []string
		for {
			rec, err := br.Next()
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			for j, col := range rec.Columns() {
				out = append(out, rec.ColumnName(j)+":"+col.String())
			}
			rec.Release()
		}
	}
	serial := read(1)
	if len(serial) != 12*10 {
		t.Fatalf("%d column blocks, want %d", len(serial), 12*10)
	}
	for _, n := range []int{2, 5, 64} {
		got := read(n)
		if len(got) != len(serial) {
			t.Fatalf("concurrency %d: %d column blocks, want %d", n, len(got), len(serial))
		}
		for i := range got {
			if got[i] != serial[i] {
				t.Fatalf("concurrency %d: column block %d differs", n, i)
			}
		}
	}
}
