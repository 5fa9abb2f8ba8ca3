package columnar

import (
	"bytes"
	"strings"
	"testing"
)

// TestCodecRegistry checks what the registry promises: every codec carries
// an Arrow codec id Arrow defines, no two share an id or a name, and every
// Compression's name parses back to it.
func TestCodecRegistry(t *testing.T) {
	ids := map[byte]string{}
	names := map[string]bool{}
	for c := range codecs {
		comp := Compression(c)
		name := comp.String()
		if names[name] {
			t.Errorf("compression %d: name %q used twice", c, name)
		}
		names[name] = true
		if got, err := ParseCompression(name); err != nil || got != comp {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v", name, got, err, comp)
		}
		cd, err := comp.codec()
		if err != nil {
			t.Errorf("compression %s: %v", name, err)
			continue
		}
		if cd == nil {
			if comp != CompressionNone {
				t.Errorf("compression %s has no codec", name)
			}
			continue
		}
		if !arrowBodyCodec(cd.arrowID()) {
			t.Errorf("codec %s: Arrow id %d is not LZ4_FRAME or ZSTD", name, cd.arrowID())
		}
		if other, ok := ids[cd.arrowID()]; ok {
			t.Errorf("codecs %s and %s share Arrow id %d", other, name, cd.arrowID())
		}
		ids[cd.arrowID()] = name
		if !knownArrowCodec(cd.arrowID()) {
			t.Errorf("codec %s: Arrow id %d unknown to the decoder", name, cd.arrowID())
		}
	}
	if _, err := Compression(len(codecs)).codec(); err == nil {
		t.Error("a compression beyond the registry was accepted")
	}
	if _, err := Create(t.TempDir()+"/c", WriterOptions{Schema: allTypesSchema(), Compression: Compression(len(codecs))}); err == nil {
		t.Error("Create accepted a compression beyond the registry")
	}
}

// foreignCodec stands for a codec Arrow does not define (say, Snappy).
type foreignCodec struct{ lz4Codec }

func (foreignCodec) name() string  { return "snappy" }
func (foreignCodec) arrowID() byte { return arrowCodecs }

func TestCodecWithoutArrowIDRefused(t *testing.T) {
	err := checkArrowCodec(foreignCodec{})
	if err == nil || !strings.Contains(err.Error(), "Arrow") {
		t.Fatalf("checkArrowCodec(snappy) = %v, want a refusal", err)
	}
	if knownArrowCodec(arrowCodecs) {
		t.Fatal("the decoder knows an Arrow id Arrow does not define")
	}
}

// TestCodecRoundTrip compresses and decompresses buffers of several sizes
// with every codec, and checks decompression into a buffer of the wrong
// length fails.
func TestCodecRoundTrip(t *testing.T) {
	for _, cd := range byArrowID {
		if cd == nil {
			continue
		}
		comp, err := cd.newCompressor()
		if err != nil {
			t.Fatal(err)
		}
		dec := cd.newDecompressor()
		for _, n := range []int{0, 1, 100, 64 << 10, 200 << 10} {
			src := bytes.Repeat([]byte("strata codec "), n/13+1)[:n]
			enc, err := comp.appendCompressed([]byte("prefix"), src)
			if err != nil {
				t.Fatalf("%s: compress %d bytes: %v", cd.name(), n, err)
			}
			if string(enc[:6]) != "prefix" {
				t.Fatalf("%s: appendCompressed did not append", cd.name())
			}
			dst := make([]byte, n)
			if err := dec.decompress(enc[6:], dst); err != nil || !bytes.Equal(dst, src) {
				t.Fatalf("%s: %d bytes: round trip failed (%v)", cd.name(), n, err)
			}
			if err := dec.decompress(enc[6:], make([]byte, n+1)); err == nil {
				t.Errorf("%s: %d bytes decompressed into %d without error", cd.name(), n, n+1)
			}
		}
		comp.close()
	}
}
