package walwriter

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestDeltaTable(t *testing.T) {
	base := Row{int64Value(7), int64Value(100), []byte("hello world, this is text"), nil, []byte{}}
	cases := []struct {
		name    string
		new     Row
		maxSize int // bytes the delta may take
	}{
		{"unchanged", cloneRow(base), 2},
		{"one int", Row{base[0], int64Value(101), base[2], base[3], base[4]}, 8},
		{"text middle", Row{base[0], base[1], []byte("hello world, that is text"), base[3], base[4]}, 10},
		{"null to value", Row{base[0], base[1], base[2], []byte("x"), base[4]}, 6},
		{"value to null", Row{base[0], base[1], nil, base[3], base[4]}, 4},
		{"empty to value", Row{base[0], base[1], base[2], base[3], []byte("new")}, 7},
		{"text moved", Row{base[0], base[1], []byte("this is text, hello world"), base[3], base[4]}, 20},
	}
	var e deltaEncoder
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.appendDelta(nil, base, c.new)
			if len(d) > c.maxSize {
				t.Errorf("delta of %d bytes, want at most %d: %x", len(d), c.maxSize, d)
			}
			got, err := applyDelta(base, d, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRow(got, c.new) {
				t.Fatalf("got %q, want %q", got, c.new)
			}
		})
	}
}

// randomValue returns nil, an empty value or random bytes drawn from a
// small alphabet so that edits find common prefixes, suffixes and copies.
func randomValue(rng *rand.Rand) []byte {
	switch rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(120))
	for i := range b {
		b[i] = "abcd"[rng.IntN(4)]
	}
	return b
}

// mutate derives a new value from v: unchanged, replaced, or edited.
func mutate(rng *rand.Rand, v []byte) []byte {
	switch rng.IntN(5) {
	case 0:
		return v
	case 1:
		return randomValue(rng)
	}
	b := bytes.Clone(v)
	if b == nil {
		b = []byte{}
	}
	for range rng.IntN(4) + 1 {
		pos := 0
		if len(b) > 0 {
			pos = rng.IntN(len(b) + 1)
		}
		switch rng.IntN(3) {
		case 0: // insert
			b = append(b[:pos], append(randomValue(rng)[:0:0], append([]byte("XYZ"), b[pos:]...)...)...)
		case 1: // delete
			end := min(len(b), pos+rng.IntN(10))
			b = append(b[:pos], b[end:]...)
		case 2: // overwrite
			if pos < len(b) {
				b[pos] = 'Q'
			}
		}
	}
	return b
}

func TestDeltaRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	var e deltaEncoder
	for i := range 20000 {
		n := 1 + rng.IntN(10)
		old := make(Row, n)
		for j := range old {
			old[j] = randomValue(rng)
		}
		new := make(Row, n)
		for j := range new {
			new[j] = mutate(rng, old[j])
		}
		d := e.appendDelta(nil, old, new)
		got, err := applyDelta(old, d, 1<<20)
		if err != nil {
			t.Fatalf("case %d: apply: %v", i, err)
		}
		if !sameRow(got, new) {
			t.Fatalf("case %d: old %q new %q: got %q", i, old, new, got)
		}
	}
}

func FuzzDelta(f *testing.F) {
	var e deltaEncoder
	base := Row{int64Value(1), []byte("some text here"), nil, []byte{}}
	f.Add(appendRow(nil, base), e.appendDelta(nil, base, Row{int64Value(2), []byte("some more text here"), []byte("x"), nil}))
	f.Add(appendRow(nil, base), []byte{0, 0})
	f.Add(appendRow(nil, base), []byte{1, 0, 2, 3, 1, 2, 5, 9, 0})
	f.Fuzz(func(t *testing.T, oldImage, delta []byte) {
		old, err := decodeRow(oldImage, 4)
		if err != nil {
			return
		}
		got, err := applyDelta(old, delta, 1<<16)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to a delta giving the same row.
		d := e.appendDelta(nil, old, got)
		again, err := applyDelta(old, d, 1<<16)
		if err != nil || !sameRow(again, got) {
			t.Fatalf("re-encoded delta: %v, %q vs %q", err, again, got)
		}
	})
}

func TestRowImageRoundTrip(t *testing.T) {
	row := Row{int64Value(-5), nil, []byte{}, []byte("text")}
	img := appendRow(nil, row)
	if len(img) != rowImageLen(row) {
		t.Fatalf("image %d bytes, rowImageLen says %d", len(img), rowImageLen(row))
	}
	want := []byte{9, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb, 0, 1, 5, 't', 'e', 'x', 't'}
	if !bytes.Equal(img, want) {
		t.Fatalf("image %x, want %x", img, want)
	}
	got, err := decodeRow(img, 4)
	if err != nil || !sameRow(got, row) {
		t.Fatalf("decode: %q, %v", got, err)
	}
	if _, err := decodeRow(img, 5); err == nil {
		t.Fatal("decoding with too many columns succeeded")
	}
}

func BenchmarkDelta(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	old := accountRow(1, rng)
	oneInt := cloneRow(old)
	oneInt[3] = int64Value(12345)
	oneText := cloneRow(old)
	oneText[5] = []byte("abcdefghijklmnopqrstuvwxyz0123")
	for _, c := range []struct {
		name string
		new  Row
	}{{"one_int", oneInt}, {"one_text", oneText}} {
		b.Run(c.name, func(b *testing.B) {
			var e deltaEncoder
			var d []byte
			for b.Loop() {
				d = e.appendDelta(d[:0], old, c.new)
				if _, err := applyDelta(old, d, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(d)), "delta-bytes")
			b.ReportMetric(float64(rowImageLen(c.new)), "image-bytes")
		})
	}
}

// BenchmarkDeltaEncode measures the encoder alone: the writer computes a
// delta for every update whose key is cached, whether or not it wins.
func BenchmarkDeltaEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	old := accountRow(1, rng)
	oneInt := cloneRow(old)
	oneInt[3] = int64Value(12345)
	edited := cloneRow(old)
	copy(edited[7][40:], "an edit in the middle")
	all := accountRow(2, rng)
	for _, c := range []struct {
		name string
		new  Row
	}{{"one_int", oneInt}, {"edit_text", edited}, {"all", all}} {
		b.Run(c.name, func(b *testing.B) {
			var e deltaEncoder
			var d []byte
			for b.Loop() {
				d = e.appendDelta(d[:0], old, c.new)
			}
			b.ReportMetric(float64(len(d)), "delta-bytes")
			b.ReportMetric(float64(rowImageLen(c.new)), "image-bytes")
		})
	}
}
