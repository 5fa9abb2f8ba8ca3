package merger

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// mergeWithTree drains sources through a loser tree and returns (source, key) pairs.
func mergeWithTree(srcs [][][]byte) (out [][2]int, cmps int64) {
	t := newLoserTree(len(srcs))
	pos := make([]int, len(srcs))
	for i, s := range srcs {
		if len(s) > 0 {
			t.set(i, s[0])
		}
	}
	t.init()
	for {
		w, ok := t.winner()
		if !ok {
			return out, t.comparisons
		}
		out = append(out, [2]int{w, pos[w]})
		pos[w]++
		if pos[w] < len(srcs[w]) {
			t.set(w, srcs[w][pos[w]])
		} else {
			t.exhaust(w)
		}
		t.fix(w)
	}
}

func TestLoserTreeStableMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 3, 5, 8, 17, 64} {
		for _, dup := range []int{1, 4, 1000} { // small ranges give many equal keys
			srcs := make([][][]byte, k)
			type ref struct {
				key      uint32
				src, row int
			}
			var want []ref
			for i := range srcs {
				n := rng.IntN(50)
				if i%4 == 3 {
					n = 0 // empty inputs
				}
				keys := make([]uint32, n)
				for j := range keys {
					keys[j] = uint32(rng.IntN(dup))
				}
				slices.Sort(keys)
				for j, kv := range keys {
					srcs[i] = append(srcs[i], binary.BigEndian.AppendUint32(nil, kv))
					want = append(want, ref{kv, i, j})
				}
			}
			slices.SortStableFunc(want, func(a, b ref) int { return int(a.key) - int(b.key) })
			got, _ := mergeWithTree(srcs)
			if len(got) != len(want) {
				t.Fatalf("k=%d dup=%d: %d rows, want %d", k, dup, len(got), len(want))
			}
			for i := range got {
				if got[i][0] != want[i].src || got[i][1] != want[i].row {
					t.Fatalf("k=%d dup=%d row %d: got source %d row %d, want %d row %d",
						k, dup, i, got[i][0], got[i][1], want[i].src, want[i].row)
				}
			}
		}
	}
}

func BenchmarkLoserTree(b *testing.B) {
	for _, k := range []int{4, 32, 64} {
		b.Run("k="+itoa(k), func(b *testing.B) {
			const perSource = 1 << 12
			rng := rand.New(rand.NewPCG(3, 4))
			srcs := make([][][]byte, k)
			for i := range srcs {
				keys := make([]uint64, perSource)
				for j := range keys {
					keys[j] = rng.Uint64()
				}
				slices.Sort(keys)
				for _, kv := range keys {
					srcs[i] = append(srcs[i], binary.BigEndian.AppendUint64(nil, kv))
				}
			}
			b.ResetTimer()
			var rows, cmps int64
			for b.Loop() {
				out, c := mergeWithTree(srcs)
				rows += int64(len(out))
				cmps += c
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cmps)/float64(rows), "cmps/row")
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
