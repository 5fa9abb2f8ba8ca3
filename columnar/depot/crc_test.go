package depot

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20+77)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sum := func(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }
	cuts := []int{0, 1, 2, 3, 7, 8, 255, 4096, 65537, len(data) - 1, len(data)}
	for range 20 {
		cuts = append(cuts, rng.IntN(len(data)+1))
	}
	want := sum(data)
	for _, c := range cuts {
		a, b := data[:c], data[c:]
		if got := crcCombine(sum(a), sum(b), int64(len(b))); got != want {
			t.Errorf("cut at %d: combined %08x, the whole's CRC-32C is %08x", c, got, want)
		}
	}
	// Many segments, combined in order, as a fill's are.
	var got uint32
	for off := 0; off < len(data); {
		n := min(1+rng.IntN(300000), len(data)-off)
		got = crcCombine(got, sum(data[off:off+n]), int64(n))
		off += n
	}
	if got != want {
		t.Errorf("segments combined: %08x, want %08x", got, want)
	}
	if got := crcCombine(0, 0, 0); got != 0 {
		t.Errorf("two empty: %08x", got)
	}
}
