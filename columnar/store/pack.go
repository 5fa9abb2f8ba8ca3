package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/strata-db/strata/columnar"
)

// PackName is the one object of an attempt written as a pack: the whole
// container, its manifest, an index and its column files (package doc,
// Format).
const PackName = "container.pack"

// packMagic begins every pack object.
const packMagic = "STRATACP"

const (
	packVersion = 1
	packHeadLen = 24 // magic, version, manifest length, column files, head CRC-32C
	// packHeadGuess is the bytes of a pack's beginning read to find its
	// head: the manifest of a container of a few hundred column files of
	// a block or two fits; a larger one costs one more read.
	packHeadGuess = 64 << 10
	// packMaxColumns bounds the column files a head may declare, so a
	// damaged count cannot make a reader allocate without bound.
	packMaxColumns = 1 << 20
	// packMaxManifest bounds the manifest length a head may declare.
	packMaxManifest = 1 << 30
)

// Container is a committed container resolved in a store (Resolve): its
// manifest and where each column file's bytes are.
type Container struct {
	Table, Projection, ID string
	Manifest              *columnar.Manifest
	// Prefix is the key prefix of the committed attempt
	// (<table>/<projection>/<id>/<attempt>/), or of the container itself
	// in the first layout.
	Prefix string
	// Pack is the key of the attempt's pack object, or "" when each
	// column file is an object of its own (Prefix + its name).
	Pack string
	// PackSize is the size the pack's head says the object has: the end
	// of its last column file.
	PackSize int64

	where    string  // store URL and container, for errors
	manifest []byte  // the manifest's bytes
	offsets  []int64 // in a pack: each column file's offset, in manifest order
	head     []byte  // in a pack: its head (package doc, Format)
	// headInCommit: head was read from the commit, not from the pack.
	headInCommit bool
	index        map[string]int
}

// Where names the container in errors: the store's URL and its key.
func (c *Container) Where() string { return c.where }

// ManifestBytes returns the manifest as the store holds it.
func (c *Container) ManifestBytes() []byte { return c.manifest }

// FileIndex returns the index in the manifest of the column file name,
// or -1.
func (c *Container) FileIndex(name string) int {
	if i, ok := c.index[name]; ok {
		return i
	}
	return -1
}

// File returns the key of the object holding column file i (in manifest
// order) and the offset of the file's first byte in it.
func (c *Container) File(i int) (key string, off int64) {
	if c.Pack != "" {
		return c.Pack, c.offsets[i]
	}
	return c.Prefix + c.Manifest.Files[i].Name, 0
}

// Range is a byte range of one object that holds column files First to
// Last (manifest order) back to back: one ranged GET reads them all.
type Range struct {
	Key         string
	Off, Len    int64
	First, Last int
}

// Ranges returns the reads that fetch the column files files (indices in
// the manifest, in any order): files adjacent in one object are read
// together, up to max bytes a read (at least one file a read; max <= 0 is
// no bound). Reads are in the order of their first file in files.
func (c *Container) Ranges(files []int, max int64) []Range {
	sorted := append([]int(nil), files...)
	sort.Ints(sorted)
	sorted = compactInts(sorted)
	var out []Range
	for _, i := range sorted {
		key, off := c.File(i)
		size := c.Manifest.Files[i].Size
		if n := len(out); n > 0 {
			r := &out[n-1]
			if c.Pack != "" && r.Key == key && r.Last == i-1 && r.Off+r.Len == off && (max <= 0 || r.Len+size <= max) {
				r.Len += size
				r.Last = i
				continue
			}
		}
		out = append(out, Range{Key: key, Off: off, Len: size, First: i, Last: i})
	}
	// In the order the caller asked for: by the position of each read's
	// earliest-asked file.
	pos := make(map[int]int, len(files))
	for p, i := range files {
		if _, ok := pos[i]; !ok {
			pos[i] = p
		}
	}
	first := func(r Range) int {
		best := len(files)
		for i := r.First; i <= r.Last; i++ {
			if p, ok := pos[i]; ok && p < best {
				best = p
			}
		}
		return best
	}
	sort.SliceStable(out, func(a, b int) bool { return first(out[a]) < first(out[b]) })
	return out
}

func compactInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Corrupt returns the error for damage found in column file i of the
// container at offset off of the file (its block, or its header or
// footer, named).
func (c *Container) Corrupt(i int, off int64, reason string, err error) *columnar.CorruptError {
	fm := &c.Manifest.Files[i]
	return &columnar.CorruptError{Container: c.where, File: fm.Name, Block: BlockAt(fm, off), Reason: reason, Err: err}
}

// BlockAt returns the index of the block of fm that holds offset off, or
// columnar.NoBlock for its header or footer.
func BlockAt(fm *columnar.FileMeta, off int64) int {
	i := sort.Search(len(fm.Blocks), func(i int) bool { return fm.Blocks[i].Offset+fm.Blocks[i].Length > off })
	if i < len(fm.Blocks) && fm.Blocks[i].Offset <= off {
		return i
	}
	return columnar.NoBlock
}

// packLayout returns the offsets of m's column files in a pack whose
// manifest is manifestLen bytes: back to back, in manifest order, after
// the head; and the pack's size.
func packLayout(m *columnar.Manifest, manifestLen int) ([]int64, int64) {
	off := int64(packHeadLen + manifestLen + 8*len(m.Files))
	offsets := make([]int64, len(m.Files))
	for i, fm := range m.Files {
		offsets[i] = off
		off += fm.Size
	}
	return offsets, off
}

// encodePackHead returns the head of the pack of m (manifest bytes
// manifest), and the column files' offsets and the pack's size.
func encodePackHead(m *columnar.Manifest, manifest []byte) ([]byte, []int64, int64) {
	offsets, size := packLayout(m, len(manifest))
	head := make([]byte, packHeadLen, packHeadLen+len(manifest)+8*len(offsets))
	copy(head, packMagic)
	binary.LittleEndian.PutUint32(head[8:], packVersion)
	binary.LittleEndian.PutUint32(head[12:], uint32(len(manifest)))
	binary.LittleEndian.PutUint32(head[16:], uint32(len(offsets)))
	head = append(head, manifest...)
	for _, off := range offsets {
		head = binary.LittleEndian.AppendUint64(head, uint64(off))
	}
	binary.LittleEndian.PutUint32(head[20:], packHeadCRC(head))
	return head, offsets, size
}

// packHeadCRC is the CRC-32C of a head: its first 20 bytes, then
// everything after the checksum's own 4.
func packHeadCRC(head []byte) uint32 {
	h := crc32.Checksum(head[:20], castagnoli)
	return crc32.Update(h, castagnoli, head[packHeadLen:])
}

// readPack reads the head of the pack object key (its manifest and
// index) into c: how a commit written before heads were in commits is
// resolved. No such object gives an error wrapping ErrNotExist. A head
// cut short, of another format, failing its CRC-32C or whose index does
// not fit its manifest gives a *columnar.CorruptError naming the
// container and the pack.
func (c *Container) readPack(ctx context.Context, st Store, key string) error {
	head, err := readRange(ctx, st, key, 0, packHeadGuess)
	if err != nil {
		return err
	}
	if n, ok := packHeadSize(head); ok && len(head) == packHeadGuess && n > packHeadGuess {
		rest, err := readRange(ctx, st, key, packHeadGuess, n-packHeadGuess)
		if err != nil {
			return err
		}
		head = append(head, rest...)
	}
	return c.takeHead(key, PackName, head, false)
}

// packHeadSize returns the length of the head that b begins with, from
// its fixed part; false if b is too short to hold that part or declares
// more than a head may (takeHead says which).
func packHeadSize(b []byte) (int64, bool) {
	if len(b) < packHeadLen {
		return 0, false
	}
	mlen := int64(binary.LittleEndian.Uint32(b[12:]))
	count := int64(binary.LittleEndian.Uint32(b[16:]))
	if mlen > packMaxManifest || count > packMaxColumns {
		return 0, false
	}
	return packHeadLen + mlen + 8*count, true
}

// takeHead checks head, the head of the pack object key as read from
// file (the pack, whose column files may follow it in head, or the
// commit, which must hold the head and nothing after it: whole), and
// takes its manifest and index into c. A head cut short, of another
// format, failing its CRC-32C or whose index does not fit its manifest
// gives a *columnar.CorruptError naming the container and file.
func (c *Container) takeHead(key, file string, head []byte, whole bool) error {
	corrupt := func(format string, args ...any) error {
		return &columnar.CorruptError{Container: c.where, File: file, Block: columnar.NoBlock, Reason: fmt.Sprintf(format, args...)}
	}
	if len(head) < packHeadLen {
		return corrupt("cut short: %d bytes, not even a head", len(head))
	}
	if string(head[:8]) != packMagic {
		return corrupt("not a pack (begins %q)", head[:8])
	}
	if v := binary.LittleEndian.Uint32(head[8:]); v != packVersion {
		return corrupt("pack version %d, this reader knows %d", v, packVersion)
	}
	headLen, ok := packHeadSize(head)
	if !ok {
		return corrupt("head says %d manifest bytes and %d column files", binary.LittleEndian.Uint32(head[12:]), binary.LittleEndian.Uint32(head[16:]))
	}
	if int64(len(head)) < headLen {
		return corrupt("cut short: %d bytes, its head is %d", len(head), headLen)
	}
	if whole && int64(len(head)) > headLen {
		return corrupt("%d bytes after the pack's head", int64(len(head))-headLen)
	}
	head = head[:headLen:headLen]
	if got, want := packHeadCRC(head), binary.LittleEndian.Uint32(head[20:]); got != want {
		return corrupt("head checksum %08x, the pack says %08x", got, want)
	}
	mlen := int64(binary.LittleEndian.Uint32(head[12:]))
	count := int64(binary.LittleEndian.Uint32(head[16:]))
	data := head[packHeadLen : packHeadLen+mlen]
	m, err := columnar.DecodeManifest(data)
	if err != nil {
		return &columnar.CorruptError{Container: c.where, File: file, Block: columnar.NoBlock, Reason: "invalid manifest", Err: err}
	}
	if int64(len(m.Files)) != count {
		return corrupt("head says %d column files, its manifest %d", count, len(m.Files))
	}
	offsets := make([]int64, count)
	end := headLen
	for i := range offsets {
		off := int64(binary.LittleEndian.Uint64(head[packHeadLen+mlen+8*int64(i):]))
		fm := &m.Files[i]
		if off < end || fm.Size < 0 || off > 1<<62-fm.Size {
			return corrupt("index puts column file %s at %d, before the end of the one before it (%d)", fm.Name, off, end)
		}
		offsets[i] = off
		end = off + fm.Size
	}
	c.Manifest, c.manifest, c.offsets, c.Pack, c.PackSize, c.head = m, data, offsets, key, end, head
	return nil
}

// readRange reads up to n bytes of key at off: fewer if the object ends
// first.
func readRange(ctx context.Context, st Store, key string, off, n int64) ([]byte, error) {
	r, err := st.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", key, st, err)
	}
	return data, nil
}

// packReader streams the pack of the local container in dir: its head,
// then each column file, checked as it is read against the manifest's
// size and CRC-32C, so a local file that is not what the manifest says
// fails the upload rather than being committed. Files are opened one at a
// time.
type packReader struct {
	dir  string
	m    *columnar.Manifest
	head *bytes.Reader
	next int      // the column file to open next
	cur  *os.File // the column file being read, or nil
	fm   *columnar.FileMeta
	n    int64 // bytes read of cur
	h    hash.Hash32
}

func newPackReader(dir string, m *columnar.Manifest, head []byte) *packReader {
	return &packReader{dir: dir, m: m, head: bytes.NewReader(head), h: crc32.New(castagnoli)}
}

func (p *packReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if p.head.Len() > 0 {
		return p.head.Read(b)
	}
	for {
		if p.cur == nil {
			if p.next == len(p.m.Files) {
				return 0, io.EOF
			}
			p.fm = &p.m.Files[p.next]
			p.next++
			f, err := os.Open(filepath.Join(p.dir, p.fm.Name))
			if err != nil {
				return 0, fmt.Errorf("pack %s: %w", p.dir, err)
			}
			p.cur, p.n = f, 0
			p.h.Reset()
		}
		buf := b
		if left := p.fm.Size - p.n; int64(len(buf)) > left {
			buf = buf[:left]
		}
		if len(buf) == 0 {
			// The manifest's size is read: the file must end here.
			var one [1]byte
			k, _ := p.cur.Read(one[:])
			if err := p.finish(k > 0); err != nil {
				return 0, err
			}
			continue
		}
		n, err := p.cur.Read(buf)
		p.n += int64(n)
		p.h.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			if p.n < p.fm.Size {
				return n, p.localCorrupt("%d bytes, manifest says %d", p.n, p.fm.Size)
			}
			err = nil
		}
		if err != nil {
			return n, fmt.Errorf("pack %s: %s: %w", p.dir, p.fm.Name, err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// finish closes the column file read whole (longer if more is set).
func (p *packReader) finish(more bool) error {
	p.cur.Close()
	p.cur = nil
	if more {
		return p.localCorrupt("longer than the manifest's %d bytes", p.fm.Size)
	}
	if got := p.h.Sum32(); got != p.fm.CRC {
		return p.localCorrupt("checksum %08x, manifest says %08x", got, p.fm.CRC)
	}
	return nil
}

func (p *packReader) localCorrupt(format string, args ...any) error {
	return &columnar.CorruptError{Container: p.dir, File: p.fm.Name, Block: columnar.NoBlock, Reason: fmt.Sprintf(format, args...)}
}

// Close closes the column file being read, if any.
func (p *packReader) Close() error {
	if p.cur != nil {
		p.cur.Close()
		p.cur = nil
	}
	return nil
}
