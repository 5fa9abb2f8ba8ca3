package columnar

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// damageBlock damages the last buffer of block 1 of column file col so that
// it cannot decode (a compressed buffer's length prefix is made wrong; in
// an uncompressed string column the offsets point past the data) and then
// rewrites the manifest's checksums to match, so that the block passes its
// checksum and fails only when decoded, after its first buffers are made.
func damageBlock(t *testing.T, dir string, col int) {
	t.Helper()
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	fm := &m.Files[col]
	path := filepath.Join(dir, fm.Name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := &fm.Blocks[1]
	blk := data[b.Offset : b.Offset+b.Length]
	meta, body, err := splitMessage(blk)
	if err != nil {
		t.Fatal(err)
	}
	l, err := parseBatchLayout(meta)
	if err != nil {
		t.Fatal(err)
	}
	buf := l.buffers[l.nbufs-1]
	if l.codec != codecNone {
		prefix := body[buf[0]:]
		size := int64(binary.LittleEndian.Uint64(prefix))
		if size == -1 {
			size = 1 // stored: now claims to be compressed
		}
		binary.LittleEndian.PutUint64(prefix, uint64(size-1))
	} else if l.nbufs == 3 {
		offsets := body[l.buffers[1][0]:]
		binary.LittleEndian.PutUint32(offsets[4*m.Blocks[1].Rows:], 1<<30) // the end offset
	} else {
		t.Fatalf("column %d: nothing to damage in an uncompressed fixed-width block", col)
	}
	b.CRC = crc32.Checksum(blk, castagnoli)
	fm.CRC = crc32.Checksum(data, castagnoli)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), enc, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeErrorReleasesBudget reads a container whose block fails to
// decode through a Budget and checks that, once the arrays read are
// released and the readers closed, nothing is left counted.
func TestDecodeErrorReleasesBudget(t *testing.T) {
	for _, comp := range []Compression{CompressionLZ4, CompressionZstd, CompressionNone} {
		t.Run(comp.String(), func(t *testing.T) {
			data := t.TempDir()
			ms, err := Generate(data, GenOptions{Columns: 4, Containers: 1, RowsPerContainer: 1000, BlockRows: 256, Seed: 5, Compression: comp})
			if err != nil {
				t.Fatal(err)
			}
			dir := ContainerDir(data, "t", "p", ms[0].ID)
			cols := []int{0, 1, 2, 3}
			if comp == CompressionNone {
				cols = []int{1} // the string column
			}
			for _, col := range cols {
				damageBlock(t, dir, col)
			}
			budget := NewBudget(0, nil)
			c, err := Open(dir, OpenOptions{Allocator: budget})
			if err != nil {
				t.Fatal(err)
			}
			br, err := c.OpenColumns(cols)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := br.Next()
			if err != nil {
				t.Fatalf("block 0 is intact: %v", err)
			}
			rec.Release()
			if _, err := br.Next(); err == nil {
				t.Fatal("a damaged block decoded")
			} else {
				wantCorrupt(t, err, ms[0].Files[cols[0]].Name, 1)
			}
			// Each column on its own, so that every type's decoder fails.
			for _, col := range cols {
				cr, err := c.OpenColumn(col)
				if err != nil {
					t.Fatal(err)
				}
				if arr, err := cr.ReadBlock(1); err == nil {
					arr.Release()
					t.Errorf("column %d: a damaged block decoded", col)
				}
				if err := cr.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
			c.Close()
			if n := budget.InUse(); n != 0 {
				t.Fatalf("%d bytes still counted after Close", n)
			}
			if budget.Peak() == 0 {
				t.Fatal("the budget counted nothing: the readers did not use it")
			}
		})
	}
}
