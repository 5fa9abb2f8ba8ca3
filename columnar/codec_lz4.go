package columnar

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// lz4Codec is Arrow's LZ4_FRAME: each buffer one LZ4 frame.
type lz4Codec struct{}

func (lz4Codec) name() string  { return "lz4" }
func (lz4Codec) arrowID() byte { return arrowLZ4Frame }

func (lz4Codec) newCompressor() (compressor, error) {
	c := &lz4Compressor{}
	c.writers.New = func() any {
		w := lz4.NewWriter(nil)
		// As arrow writes LZ4 frames: no checksums, 64 KiB blocks.
		w.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}
	return c, nil
}

func (lz4Codec) newDecompressor() decompressor { return lz4Decompressor{} }

// lz4Compressor writes frames with pooled LZ4 writers, one per buffer
// compressed at a time.
type lz4Compressor struct {
	writers sync.Pool // *lz4.Writer
}

func (c *lz4Compressor) appendCompressed(dst, src []byte) ([]byte, error) {
	w := c.writers.Get().(*lz4.Writer)
	defer c.writers.Put(w)
	out := appendWriter{b: dst}
	w.Reset(&out)
	if _, err := w.Write(src); err != nil {
		return dst, fmt.Errorf("lz4: %w", err)
	}
	if err := w.Close(); err != nil {
		return dst, fmt.Errorf("lz4: %w", err)
	}
	return out.b, nil
}

func (c *lz4Compressor) close() {}

// lz4Decompressor decodes frames itself, block by block with the lz4
// package's block decoder, so it needs no state and copies nothing.
type lz4Decompressor struct{}

func (lz4Decompressor) decompress(src, dst []byte) error { return lz4FrameDecode(src, dst) }

// lz4FrameDecode decodes one LZ4 frame into dst, which must be exactly the
// frame's content size.
func lz4FrameDecode(src, dst []byte) error {
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != 0x184D2204 {
		return fmt.Errorf("lz4: not an LZ4 frame")
	}
	flg := src[4]
	if flg>>6 != 1 {
		return fmt.Errorf("lz4: frame version %d", flg>>6)
	}
	indep := flg&0x20 != 0
	blockSum := flg&0x10 != 0
	p := 6
	if flg&0x08 != 0 { // content size
		if p+8 > len(src) {
			return fmt.Errorf("lz4: truncated frame header")
		}
		if cs := binary.LittleEndian.Uint64(src[p:]); cs != uint64(len(dst)) {
			return fmt.Errorf("lz4: frame content size %d, want %d", cs, len(dst))
		}
		p += 8
	}
	if flg&0x01 != 0 { // dictionary ID
		p += 4
	}
	p++ // header checksum
	out := 0
	for {
		if p+4 > len(src) {
			return fmt.Errorf("lz4: truncated frame")
		}
		size := int(binary.LittleEndian.Uint32(src[p:]))
		p += 4
		if size == 0 {
			break
		}
		stored := size&0x80000000 != 0
		size &= 0x7FFFFFFF
		if size > len(src)-p {
			return fmt.Errorf("lz4: block of %d bytes past the frame's end", size)
		}
		blk := src[p : p+size]
		p += size
		if blockSum {
			p += 4
		}
		if stored {
			if size > len(dst)-out {
				return fmt.Errorf("lz4: data longer than %d bytes", len(dst))
			}
			out += copy(dst[out:], blk)
			continue
		}
		var n int
		var err error
		if indep || out == 0 {
			n, err = lz4.UncompressBlock(blk, dst[out:])
		} else {
			n, err = lz4.UncompressBlockWithDict(blk, dst[out:], dst[max(0, out-64<<10):out])
		}
		if err != nil {
			return fmt.Errorf("lz4: %w", err)
		}
		out += n
	}
	if out != len(dst) {
		return fmt.Errorf("lz4: decoded %d bytes, want %d", out, len(dst))
	}
	return nil
}
