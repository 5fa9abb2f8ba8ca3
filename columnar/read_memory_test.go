package columnar

import (
	"fmt"
	"io"
	"testing"
)

// TestReadBytesBoundsReader checks that FileBlock.ReadBytes bounds the
// memory a reader holds while its caller holds a block: the bound the
// engines plan a read with. A reader that reuses its buffers holds more
// built with the strata_poison tag (the last block's buffer, poisoned
// until the next read), which the engines' grant checks in that build
// would otherwise meet as a peak over the grant.
func TestReadBytesBoundsReader(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionLZ4, CompressionZstd} {
		for _, reused := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reused=%v", comp, reused), func(t *testing.T) {
				dir := t.TempDir()
				ms, err := Generate(dir, GenOptions{Columns: 6, Containers: 1, RowsPerContainer: 5000, BlockRows: 700, Seed: 9, Compression: comp})
				if err != nil {
					t.Fatal(err)
				}
				budget := NewBudget(0, nil)
				c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{Allocator: budget})
				if err != nil {
					t.Fatal(err)
				}
				m := c.Manifest()
				cols := make([]int, len(m.Files))
				var bound int64 // the most ReadBytes of a block, summed over the columns
				for col := range cols {
					cols[col] = col
					var most int64
					for _, fb := range m.Files[col].Blocks {
						most = max(most, fb.ReadBytes(reused))
					}
					bound += most
				}
				br, err := c.OpenColumns(cols)
				if err != nil {
					t.Fatal(err)
				}
				defer br.Close()
				if reused {
					br.ReuseBuffers()
				}
				var blocks int
				for ; ; blocks++ {
					rec, err := br.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if held := budget.InUse(); held > bound {
						t.Fatalf("block %d: the reader and its block hold %d bytes, more than ReadBytes's %d", blocks, held, bound)
					}
					rec.Release()
				}
				if blocks < 5 {
					t.Fatalf("read %d blocks, want several", blocks)
				}
			})
		}
	}
}
