package columnar

import (
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

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
	return nil
}
