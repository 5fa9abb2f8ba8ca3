package depot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/strata-db/strata/columnar"
)

// packName is the pack file of a container the depot fetched: its
// manifest, which column files it holds, and their bytes (package doc,
// Format).
const packName = "depot.pack"

// packMagic begins every pack file.
const packMagic = "STRATAPK"

const (
	packVersion    = 1
	packHeaderLen  = 24   // magic, version, manifest length, manifest CRC-32C, column files
	packAlign      = 4096 // the first column file's offset is a multiple of this
	packMaxColumns = 1 << 20
)

// pack is the open pack file of a container: where each of its column
// files is, and which the file says it holds. Its methods other than
// close are safe for concurrent use (positioned reads and writes).
type pack struct {
	f     *os.File
	path  string
	count int     // column files
	base  []int64 // offset of each column file, in manifest order
	flags int64   // offset of the presence bytes, one a column file
}

func newPack(f *os.File, path string, m *columnar.Manifest, manifestLen int) *pack {
	p := &pack{f: f, path: path, count: len(m.Files), base: make([]int64, len(m.Files))}
	p.flags = packHeaderLen + int64(manifestLen)
	off := (p.flags + int64(len(m.Files)) + packAlign - 1) / packAlign * packAlign
	for i, fm := range m.Files {
		p.base[i] = off
		off += fm.Size
	}
	return p
}

// createPack creates the pack file of a container in dir (which must not
// hold one) with its header: the manifest, and no column file held. It
// is neither synced nor renamed into place: a crash may leave a header
// cut short or wrong, which openPack refuses (the manifest's CRC-32C), so
// the container is fetched again.
func createPack(dir string, m *columnar.Manifest, manifest []byte) (*pack, error) {
	path := filepath.Join(dir, packName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	p := newPack(f, path, m, len(manifest))
	hdr := make([]byte, p.flags+int64(p.count))
	copy(hdr, packMagic)
	binary.LittleEndian.PutUint32(hdr[8:], packVersion)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(manifest)))
	binary.LittleEndian.PutUint32(hdr[16:], crc32.Checksum(manifest, castagnoli))
	binary.LittleEndian.PutUint32(hdr[20:], uint32(p.count))
	copy(hdr[packHeaderLen:], manifest)
	if _, err := f.WriteAt(hdr, 0); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return p, nil
}

// errNoPack is openPack's error for a directory without a pack file.
var errNoPack = errors.New("no pack file")

// openPack opens the pack file in dir and returns it, the manifest's
// bytes, and the column files its presence bytes say it holds whose
// ranges are within the file's size.
func openPack(dir string) (*pack, []byte, *columnar.Manifest, []bool, error) {
	path := filepath.Join(dir, packName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, nil, errNoPack
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	p, data, m, held, err := readPack(f, path)
	if err != nil {
		f.Close()
		return nil, nil, nil, nil, fmt.Errorf("pack %s: %w", path, err)
	}
	return p, data, m, held, nil
}

func readPack(f *os.File, path string) (*pack, []byte, *columnar.Manifest, []bool, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	hdr := make([]byte, packHeaderLen)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("header: %w", err)
	}
	if string(hdr[:8]) != packMagic {
		return nil, nil, nil, nil, errors.New("not a pack file")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != packVersion {
		return nil, nil, nil, nil, fmt.Errorf("version %d, want %d", v, packVersion)
	}
	mlen := int64(binary.LittleEndian.Uint32(hdr[12:]))
	count := int64(binary.LittleEndian.Uint32(hdr[20:]))
	if count > packMaxColumns || packHeaderLen+mlen+count > info.Size() {
		return nil, nil, nil, nil, fmt.Errorf("header says %d manifest bytes and %d column files; the file has %d bytes", mlen, count, info.Size())
	}
	rest := make([]byte, mlen+count)
	if _, err := f.ReadAt(rest, packHeaderLen); err != nil {
		return nil, nil, nil, nil, err
	}
	data := rest[:mlen:mlen]
	if got, want := crc32.Checksum(data, castagnoli), binary.LittleEndian.Uint32(hdr[16:]); got != want {
		return nil, nil, nil, nil, fmt.Errorf("manifest checksum %08x, header says %08x", got, want)
	}
	m, err := columnar.DecodeManifest(data)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if int64(len(m.Files)) != count {
		return nil, nil, nil, nil, fmt.Errorf("header says %d column files, manifest %d", count, len(m.Files))
	}
	p := newPack(f, path, m, len(data))
	held := make([]bool, count)
	for i, fm := range m.Files {
		held[i] = rest[mlen+int64(i)] == 1 && p.base[i]+fm.Size <= info.Size()
	}
	return p, data, m, held, nil
}

// setHeld writes whether column file i is held into its presence byte.
// Not synced: a byte a crash left saying held over bytes that are not is
// found by the check of every column taken in at Open.
func (p *pack) setHeld(i int, held bool) error {
	b := []byte{0}
	if held {
		b[0] = 1
	}
	_, err := p.f.WriteAt(b, p.flags+int64(i))
	return err
}

// size is the pack file's size now.
func (p *pack) size() (int64, error) {
	info, err := p.f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// checkColumn reads column file i (fm) whole from the pack and compares it
// with the manifest's CRC-32C.
func (p *pack) checkColumn(i int, fm *columnar.FileMeta) bool {
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(p.f, p.base[i], fm.Size))
	return err == nil && n == fm.Size && h.Sum32() == fm.CRC
}

// packFile is one reader's handle on a column file held in a pack: the
// range of the pack file it occupies.
type packFile struct {
	p    *pack
	base int64
	size int64
}

// ReadAt reads len(p) bytes at off of the column file: a read past the end
// of a pack cut short is a short read with io.EOF.
func (pf *packFile) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(b)) > pf.size {
		return 0, fmt.Errorf("read %s: range [%d, %d) outside its column file's %d bytes", pf.p.path, off, off+int64(len(b)), pf.size)
	}
	return pf.p.f.ReadAt(b, pf.base+off)
}

func (pf *packFile) Local(off, length int64) bool { return true }
func (pf *packFile) Size() int64                  { return pf.size }

// Close does nothing: the pack file is the depot's, closed when the
// container leaves it.
func (pf *packFile) Close() error { return nil }
