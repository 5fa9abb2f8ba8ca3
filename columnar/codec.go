package columnar

import (
	"fmt"
	"strings"
)

// A codec compresses the buffers of record batch bodies, as Arrow IPC
// body compression (Message.fbs BodyCompression, method BUFFER): each
// buffer on its own, its uncompressed length in front. The writer and the
// block decoder know codecs only through this interface, and only by the
// registry below; adding a codec is a file implementing it, a Compression
// constant and its line in codecs. The interface is called once per buffer (two or three per
// block), never per value.
type codec interface {
	// name is the codec's spelling in the manifest's compression field.
	name() string
	// arrowID is the codec's Arrow IPC CompressionType, written in the
	// BodyCompression of every block. Arrow defines two, arrowLZ4Frame and
	// arrowZstd; a Writer refuses a codec with any other (see
	// checkArrowCodec), so that every column file stays readable by any
	// Arrow implementation.
	arrowID() byte
	// newCompressor returns the compressor one Writer shares among its
	// column files.
	newCompressor() (compressor, error)
	// newDecompressor returns the decompressor the readers of one
	// container share. It must be cheap: state that costs (tables,
	// windows) is made on first use.
	newDecompressor() decompressor
}

// compressor compresses buffers for the column files of one Writer. It is
// safe for concurrent use: WriteColumn may run concurrently for different
// columns.
type compressor interface {
	// appendCompressed appends src, compressed as one unit of the codec's
	// format (an LZ4 frame, a zstd frame), to dst.
	appendCompressed(dst, src []byte) ([]byte, error)
	// close releases the compressor's state; it is not used again.
	close()
}

// decompressor decompresses buffers for the readers of one container. It
// is safe for concurrent use.
type decompressor interface {
	// decompress decompresses src into dst, a buffer from the reader's
	// allocator exactly as long as the uncompressed length the body
	// records; src decoding to any other length is an error. Whatever src
	// holds, it must not allocate beyond its codec's bounded state, and
	// it retains neither src nor dst.
	decompress(src, dst []byte) error
}

// Compression selects the codec of the column files' record batch bodies.
type Compression uint8

const (
	CompressionLZ4  Compression = iota // LZ4 frame, the default
	CompressionZstd                    // Zstandard
	CompressionNone                    // uncompressed
)

// codecs is the registry: the codec of each Compression; nil for
// CompressionNone, whose bodies are stored as they are.
var codecs = [...]codec{
	CompressionLZ4:  lz4Codec{},
	CompressionZstd: zstdCodec{},
	CompressionNone: nil,
}

// noneName is the manifest spelling of CompressionNone.
const noneName = "none"

// Arrow IPC body compression codecs (Message.fbs CompressionType). Arrow
// defines these two and no others.
const (
	arrowLZ4Frame = 0
	arrowZstd     = 1
	arrowCodecs   = 2 // the number of codec ids Arrow defines
	codecNone     = -1
)

// arrowBodyCodec reports whether id is a body compression codec that Arrow
// defines, that is, one every Arrow reader can decompress.
func arrowBodyCodec(id byte) bool { return id < arrowCodecs }

// codec returns c's codec (nil for CompressionNone), or an error for a
// Compression not in the registry or whose codec has no Arrow id.
func (c Compression) codec() (codec, error) {
	if int(c) >= len(codecs) {
		return nil, fmt.Errorf("unknown compression %d", c)
	}
	cd := codecs[c]
	if cd != nil {
		if err := checkArrowCodec(cd); err != nil {
			return nil, err
		}
	}
	return cd, nil
}

// checkArrowCodec refuses a codec whose Arrow id Arrow does not define:
// Arrow readers could not decompress its column files.
func checkArrowCodec(cd codec) error {
	if !arrowBodyCodec(cd.arrowID()) {
		return fmt.Errorf("compression %s has Arrow codec id %d, which Arrow IPC does not define (only LZ4_FRAME and ZSTD): its files would not be readable by Arrow readers", cd.name(), cd.arrowID())
	}
	return nil
}

// String returns the manifest spelling: "lz4", "zstd" or "none".
func (c Compression) String() string {
	if int(c) < len(codecs) {
		if cd := codecs[c]; cd != nil {
			return cd.name()
		}
		return noneName
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression parses the manifest spelling of a Compression; the
// empty string is the default, LZ4.
func ParseCompression(s string) (Compression, error) {
	if s == "" {
		return CompressionLZ4, nil
	}
	for c := range codecs {
		if Compression(c).String() == s {
			return Compression(c), nil
		}
	}
	names := make([]string, len(codecs))
	for c := range codecs {
		names[c] = Compression(c).String()
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return 0, fmt.Errorf("columnar: unknown compression %q (want %s)", s, want)
}

// byArrowID is the registered codec of each Arrow codec id, or nil.
var byArrowID = func() (t [arrowCodecs]codec) {
	for _, cd := range codecs {
		if cd != nil && arrowBodyCodec(cd.arrowID()) {
			t[cd.arrowID()] = cd
		}
	}
	return t
}()

// knownArrowCodec reports whether a block's codec id names a registered
// codec.
func knownArrowCodec(id byte) bool { return id < arrowCodecs && byArrowID[id] != nil }

// decompressors holds a decompressor of each registered codec, indexed by
// Arrow codec id: the ones the readers of a container share.
type decompressors [arrowCodecs]decompressor

func makeDecompressors() decompressors {
	var d decompressors
	for id, cd := range byArrowID {
		if cd != nil {
			d[id] = cd.newDecompressor()
		}
	}
	return d
}
