package columnar

import (
	"bytes"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Verify checks a container: the manifest, and for every column file its
// size, whole-file CRC-32C, header CRC, every block's CRC-32C, and that
// every block decodes to the rows the manifest says. The first problem is
// returned as a *CorruptError naming the container, file and block.
func Verify(dir string) error {
	c, err := Open(dir, OpenOptions{Allocator: memory.NewGoAllocator()})
	if err != nil {
		return err
	}
	for col := range c.m.Files {
		if err := verifyFile(c, col); err != nil {
			return err
		}
	}
	if len(c.keyIdx) > 0 {
		return verifyOrder(c)
	}
	return nil
}

// verifyOrder checks that every row is in sort-key order and that each
// block's first and last keys are the ones the manifest records.
func verifyOrder(c *Container) error {
	enc, err := NewKeyEncoder(c.schema, c.m.SortKey)
	if err != nil {
		return corruptf(c.dir, ManifestName, NoBlock, err, "sort key")
	}
	br, err := c.OpenKeyColumns()
	if err != nil {
		return err
	}
	defer br.Close()
	var kb KeyBatch
	var prev []byte
	for b := range br.NumBlocks() {
		rec, err := br.ReadBlock(b)
		if err != nil {
			return err
		}
		err = enc.EncodeBatch(&kb, rec.Columns(), 0, int(rec.NumRows()))
		rec.Release()
		if err != nil {
			return corruptf(c.dir, c.m.Files[c.keyIdx[0]].Name, b, err, "encode keys")
		}
		bm := &c.m.Blocks[b]
		if !bytes.Equal(kb.Key(0), bm.MinKey) || !bytes.Equal(kb.Key(kb.Len()-1), bm.MaxKey) {
			return corruptf(c.dir, ManifestName, b, nil, "block %d min/max keys differ from its rows", b)
		}
		for i := range kb.Len() {
			k := kb.Key(i)
			if prev != nil && bytes.Compare(prev, k) > 0 {
				return corruptf(c.dir, c.m.Files[c.keyIdx[0]].Name, b, ErrNotSorted, "row %d of the block is out of sort-key order", i)
			}
			prev = append(prev[:0], k...)
		}
	}
	return nil
}

func verifyFile(c *Container, col int) error {
	fm := &c.m.Files[col]
	f, err := os.Open(filepath.Join(c.dir, fm.Name))
	if err != nil {
		return corruptf(c.dir, fm.Name, NoBlock, err, "open")
	}
	crc := crc32.New(castagnoli)
	n, err := io.Copy(crc, f)
	f.Close()
	if err != nil {
		return corruptf(c.dir, fm.Name, NoBlock, err, "read")
	}
	if n != fm.Size {
		return corruptf(c.dir, fm.Name, NoBlock, nil, "file is %d bytes, manifest says %d", n, fm.Size)
	}
	// Blocks first, so a damaged block is named rather than reported as a
	// whole-file mismatch.
	r, err := c.OpenColumn(col)
	if err != nil {
		return err
	}
	defer r.Close()
	for b := range r.NumBlocks() {
		arr, err := r.ReadBlock(b)
		if err != nil {
			return err
		}
		arr.Release()
	}
	if got := crc.Sum32(); got != fm.CRC {
		return corruptf(c.dir, fm.Name, NoBlock, nil, "file checksum %08x, manifest says %08x (footer damaged)", got, fm.CRC)
	}
	return verifyArrowFile(c, col)
}

// verifyArrowFile checks the file is the Arrow IPC file the manifest
// describes, as any Arrow reader sees it: its schema is the column's and
// its footer lists the manifest's blocks.
func verifyArrowFile(c *Container, col int) error {
	fm := &c.m.Files[col]
	f, err := os.Open(filepath.Join(c.dir, fm.Name))
	if err != nil {
		return corruptf(c.dir, fm.Name, NoBlock, err, "open")
	}
	defer f.Close()
	fr, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return corruptf(c.dir, fm.Name, NoBlock, err, "not a readable Arrow IPC file")
	}
	defer fr.Close()
	want := arrow.NewSchema([]arrow.Field{c.schema.Field(col)}, nil)
	if !fr.Schema().Equal(want) {
		return corruptf(c.dir, fm.Name, NoBlock, nil, "file schema %s, manifest says %s", fr.Schema(), want)
	}
	if fr.NumRecords() != len(fm.Blocks) {
		return corruptf(c.dir, fm.Name, NoBlock, nil, "file footer lists %d blocks, manifest %d", fr.NumRecords(), len(fm.Blocks))
	}
	return nil
}
