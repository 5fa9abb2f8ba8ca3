package columnar

import (
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
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

// TestReuseBuffers reads every block of containers of many blocks, with
// NULLs and strings, uncompressed and compressed, once into fresh
// buffers and once reusing them: the same arrays, and a reader that
// reuses holds one block's buffer however many blocks it reads, and
// allocates none for an uncompressed block's bytes.
func TestReuseBuffers(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionLZ4} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			ms, err := Generate(dir, GenOptions{Columns: 8, Containers: 1, RowsPerContainer: 20000, BlockRows: 700, Seed: 7, Compression: comp, NullFraction: 0.2})
			if err != nil {
				t.Fatal(err)
			}
			allocs := &countingAllocator{Allocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
			budget := NewBudget(1<<30, allocs)
			c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{Allocator: budget})
			if err != nil {
				t.Fatal(err)
			}
			cols := make([]int, c.Schema().NumFields())
			for i := range cols {
				cols[i] = i
			}
			var largest int64 // the largest block of all the columns, as stored
			for _, f := range ms[0].Files {
				for _, b := range f.Blocks {
					largest = max(largest, b.Length)
				}
			}
			read := func(reuse bool, concurrency int) []string {
				allocs.n.Store(0)
				br, err := c.OpenColumns(cols)
				if err != nil {
					t.Fatal(err)
				}
				br.ReadConcurrently(concurrency)
				if reuse {
					br.ReuseBuffers()
				}
				var out []string
				for {
					rec, err := br.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					for j, col := range rec.Columns() {
						out = append(out, rec.ColumnName(j)+":"+col.String())
					}
					rec.Release()
					// Between blocks a reader that reuses holds a block of
					// each column (built with strata_poison, two: it
					// alternates between them).
					most := int64(len(cols)) * largest
					if poisonFreed {
						most *= 2
					}
					if held := budget.InUse(); reuse && held > most {
						t.Fatalf("reader holds %d bytes between blocks, more than %d (the largest block is %d bytes, %d columns)", held, most, largest, len(cols))
					}
				}
				if err := br.Close(); err != nil {
					t.Fatal(err)
				}
				if held := budget.InUse(); held != 0 {
					t.Fatalf("%d bytes still counted after Close", held)
				}
				// Uncompressed, a reader that reuses allocates a buffer a
				// column (and again as a larger block needs), and the
				// arrays' NULL bitmaps when a block has none.
				if n := allocs.n.Load(); reuse && comp == CompressionNone && n > 4*int64(len(cols)) {
					t.Errorf("reusing buffers, %d allocations for %d blocks of %d columns", n, len(out)/len(cols), len(cols))
				}
				return out
			}
			fresh := read(false, 1)
			if want := 8 * ((20000 + 699) / 700); len(fresh) != want {
				t.Fatalf("%d column blocks, want %d", len(fresh), want)
			}
			for _, concurrency := range []int{1, 3} {
				got := read(true, concurrency)
				if !slices.Equal(got, fresh) {
					t.Fatalf("reused buffers, concurrency %d: the blocks differ from those read into fresh buffers", concurrency)
				}
			}
		})
	}
}

// countingAllocator counts the buffers allocated through it.
type countingAllocator struct {
	memory.Allocator
	n atomic.Int64
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.n.Add(1)
	return a.Allocator.Allocate(size)
}
