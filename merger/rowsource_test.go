package merger

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

func writeRuns(t testing.TB, inputs int, memLimit int64, dir string, runs []run) *rowSource {
	t.Helper()
	w, err := newRowSourceWriter(inputs, memLimit, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if err := w.append(r.input, r.count); err != nil {
			t.Fatal(err)
		}
	}
	s, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readRuns decodes a stream and coalesces adjacent runs of one input.
func readRuns(s *rowSource) ([]run, error) {
	r, err := s.newReader(nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	var out []run
	for {
		in, c, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if n := len(out); n > 0 && out[n-1].input == in {
			out[n-1].count += c
		} else {
			out = append(out, run{in, c})
		}
	}
}

func coalesce(runs []run) []run {
	var out []run
	for _, r := range runs {
		if r.count == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].input == r.input {
			out[n-1].count += r.count
		} else {
			out = append(out, r)
		}
	}
	return out
}

func TestRowSourceRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name     string
		inputs   int
		runs     int
		memLimit int64
		spilled  bool
	}{
		{"empty", 3, 0, 1 << 20, false},
		{"one input", 1, 10, 1 << 20, false},
		{"in memory", 64, 50_000, 64 << 20, false},
		{"spilled", 64, 300_000, 256 << 10, true},
		{"spill from start", 1000, 100_000, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			runs := make([]run, tc.runs)
			for i := range runs {
				runs[i] = run{rng.IntN(tc.inputs), int64(rng.IntN(3))}
				if rng.IntN(100) == 0 {
					runs[i].count = int64(rng.Uint32())
				}
			}
			s := writeRuns(t, tc.inputs, tc.memLimit, dir, runs)
			if s.spilled != tc.spilled {
				t.Errorf("spilled = %v, want %v (size %d)", s.spilled, tc.spilled, s.size)
			}
			// Two readers at once over the same stream.
			for range 2 {
				got, err := readRuns(s)
				if err != nil {
					t.Fatal(err)
				}
				want := coalesce(runs)
				if len(got) != len(want) {
					t.Fatalf("%d runs, want %d", len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("run %d = %+v, want %+v", i, got[i], want[i])
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("spill files left behind: %v", ents)
			}
		})
	}
}

func TestRowSourceCorrupt(t *testing.T) {
	s := writeRuns(t, 4, 1<<20, t.TempDir(), []run{{0, 5}, {3, 2}, {1, 7}})
	good := append([]byte(nil), s.mem...)
	s.Close()
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0x40
		if _, err := readRuns(newRowSourceFromBytes(b, 4)); !errors.Is(err, ErrRowSourceCorrupt) {
			t.Errorf("flip byte %d: err = %v, want ErrRowSourceCorrupt", i, err)
		}
	}
	for n := 1; n < len(good); n++ {
		if _, err := readRuns(newRowSourceFromBytes(good[:n], 4)); err == nil {
			// A cut on a chunk boundary is a shorter valid stream only at the header.
			if n != len(rowSourceMagic) {
				t.Errorf("truncated to %d bytes: no error", n)
			}
		}
	}
	// Inputs out of range for the merge reading it.
	if _, err := readRuns(newRowSourceFromBytes(good, 3)); !errors.Is(err, ErrRowSourceCorrupt) {
		t.Errorf("input out of range: err = %v", err)
	}
}

func FuzzRowSourceDecode(f *testing.F) {
	s := writeRuns(f, 8, 1<<20, f.TempDir(), []run{{0, 5}, {7, 1}, {1, 1 << 40}})
	f.Add(append([]byte(nil), s.mem...), uint8(8))
	f.Add([]byte(rowSourceMagic), uint8(1))
	f.Add([]byte("SRS1\x00"), uint8(1))
	s.Close()
	f.Fuzz(func(t *testing.T, b []byte, inputs uint8) {
		if inputs == 0 {
			inputs = 1
		}
		runs, err := readRuns(newRowSourceFromBytes(b, int(inputs)))
		if err != nil && !errors.Is(err, ErrRowSourceCorrupt) {
			t.Fatalf("unexpected error class: %v", err)
		}
		for _, r := range runs {
			if r.input < 0 || r.input >= int(inputs) || r.count <= 0 {
				t.Fatalf("decoder returned invalid run %+v", r)
			}
		}
	})
}

func BenchmarkRowSourceDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	runs := make([]run, 1<<20)
	var rows int64
	for i := range runs {
		runs[i] = run{rng.IntN(32), 1 + int64(rng.IntN(2))}
		rows += runs[i].count
	}
	s := writeRuns(b, 32, 1<<30, b.TempDir(), runs)
	defer s.Close()
	b.ResetTimer()
	for b.Loop() {
		if _, err := readRuns(s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(s.size)/float64(rows), "bytes/row")
}

// newRowSourceFromBytes wraps an encoded stream.
func newRowSourceFromBytes(b []byte, inputs int) *rowSource {
	return &rowSource{inputs: inputs, mem: b, size: int64(len(b)), res: nopReserver{}}
}
