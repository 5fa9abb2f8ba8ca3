package store_test

import (
	"errors"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
)

// A container read from a store by ranges reads as it does on disk, and
// counts every block and byte it fetched; damage in the store is a
// CorruptError naming the file and block.
func TestSourceReadsByRanges(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			local := t.TempDir()
			ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 4, Containers: 1, RowsPerContainer: 3000, BlockRows: 700, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			m := ms[0]
			dir := columnar.ContainerDir(local, "t", "p", m.ID)
			if _, err := store.Upload(t.Context(), st, dir, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			src, _, err := store.OpenSource(t.Context(), st, "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			remote, err := columnar.OpenSource(src, columnar.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			disk, err := columnar.Open(dir, columnar.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for col := range len(m.Files) {
				a, err := remote.OpenColumn(col)
				if err != nil {
					t.Fatal(err)
				}
				b, err := disk.OpenColumn(col)
				if err != nil {
					t.Fatal(err)
				}
				for blk := range a.NumBlocks() {
					x, err := a.ReadBlock(blk)
					if err != nil {
						t.Fatalf("column %d block %d: %v", col, blk, err)
					}
					y, err := b.ReadBlock(blk)
					if err != nil {
						t.Fatal(err)
					}
					if x.String() != y.String() {
						t.Fatalf("column %d block %d differs from the disk's", col, blk)
					}
					x.Release()
					y.Release()
				}
				a.Close()
				b.Close()
			}
			blocks, bytes := src.Fetched()
			var want int64
			for _, fm := range m.Files {
				last := fm.Blocks[len(fm.Blocks)-1]
				want += last.Offset + last.Length // header and blocks, not the footer
			}
			if blocks != int64(len(m.Files)*len(m.Blocks)) || bytes != want {
				t.Errorf("fetched %d blocks %d bytes, want %d blocks %d bytes", blocks, bytes, len(m.Files)*len(m.Blocks), want)
			}

			// A damaged block in the store: the object of column 1 with a
			// byte of its block 2 flipped.
			fm := m.Files[1]
			rewritePack(t, st, "t", "p", m.ID, func(c *store.Container, data []byte) []byte {
				_, off := c.File(1)
				data[off+fm.Blocks[2].Offset+fm.Blocks[2].Length/2] ^= 0xff
				return data
			})
			r, err := remote.OpenColumn(1)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.ReadBlock(2)
			var ce *columnar.CorruptError
			if !errors.As(err, &ce) || ce.File != fm.Name || ce.Block != 2 {
				t.Errorf("damaged block: %v; want a CorruptError naming %s block 2", err, fm.Name)
			}
			// A container not in the store.
			if _, _, err := store.OpenSource(t.Context(), st, "t", "p", "nope"); !errors.Is(err, columnar.ErrNotFound) {
				t.Errorf("missing container: %v", err)
			}
		})
	}
}
