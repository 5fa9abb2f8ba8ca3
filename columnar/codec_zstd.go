package columnar

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdCodec is Arrow's ZSTD: each buffer one zstd frame.
type zstdCodec struct{}

func (zstdCodec) name() string  { return "zstd" }
func (zstdCodec) arrowID() byte { return arrowZstd }

func (zstdCodec) newCompressor() (compressor, error) {
	// EncodeAll runs on as many buffers at once as the encoder's
	// concurrency, and the encoder holds state (about a megabyte) for
	// each: enough for columns written in parallel, not one per core of a
	// large machine.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), maxZstdConcurrency)))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return zstdCompressor{enc}, nil
}

func (zstdCodec) newDecompressor() decompressor { return &zstdDecompressor{} }

// maxZstdConcurrency bounds the buffers a Writer compresses with zstd at
// once.
const maxZstdConcurrency = 4

// zstdCompressor is one encoder shared by a Writer's columns (EncodeAll is
// safe for concurrent use).
type zstdCompressor struct{ enc *zstd.Encoder }

func (c zstdCompressor) appendCompressed(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst), nil
}

func (c zstdCompressor) close() { c.enc.Close() }

// zstdDecompressor is a zstd decoder shared by the readers of a container,
// made on first use.
type zstdDecompressor struct {
	once sync.Once
	dec  *zstd.Decoder
	err  error
}

// zstdMaxMemory bounds what one zstd buffer may decode to.
const zstdMaxMemory = 1 << 30

func (z *zstdDecompressor) decompress(src, dst []byte) error {
	z.once.Do(func() {
		z.dec, z.err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(zstdMaxMemory))
	})
	if z.err != nil {
		return z.err
	}
	out, err := z.dec.DecodeAll(src, dst[:0])
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	if len(out) != len(dst) {
		return fmt.Errorf("zstd: decoded %d bytes, want %d", len(out), len(dst))
	}
	if len(dst) > 0 && &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}
