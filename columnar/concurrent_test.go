package columnar

import (
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Columns written from several goroutines at once, then read from several
// goroutines sharing one Container (and its zstd decoder).
func TestConcurrentColumns(t *testing.T) {
	schema := allTypesSchema()
	want := randomRecord(memory.DefaultAllocator, schema, rand.New(rand.NewPCG(8, 8)), 3000)
	defer want.Release()
	dir := filepath.Join(t.TempDir(), "c")
	budget := NewBudget(0, nil)
	w, err := Create(dir, WriterOptions{Schema: schema, BlockRows: 512, Compression: CompressionZstd, Allocator: budget})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, schema.NumFields())
	for col := range schema.NumFields() {
		wg.Go(func() {
			for s := 0; s < 3000; s += 700 {
				a := array.NewSlice(want.Column(col), int64(s), int64(min(3000, s+700)))
				err := w.WriteColumn(col, a)
				a.Release()
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- w.FinishColumn(col)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir, OpenOptions{Allocator: budget})
	if err != nil {
		t.Fatal(err)
	}
	for col := range schema.NumFields() {
		wg.Go(func() {
			r, err := c.OpenColumn(col)
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Close()
			for b := range r.NumBlocks() {
				got, err := r.ReadBlock(b)
				if err != nil {
					t.Error(err)
					return
				}
				bm := c.Manifest().Blocks[b]
				exp := array.NewSlice(want.Column(col), bm.FirstRow, bm.FirstRow+int64(bm.Rows))
				if !array.Equal(got, exp) {
					t.Errorf("column %d block %d differs", col, b)
				}
				exp.Release()
				got.Release()
			}
		})
	}
	wg.Wait()
	if budget.InUse() != 0 {
		t.Errorf("%d bytes still counted", budget.InUse())
	}
}
