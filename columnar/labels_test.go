package columnar

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGenLabels(t *testing.T) {
	const n = 50000
	s, null := GenLabels(n, rand.New(rand.NewPCG(1, 2)))
	s2, null2 := GenLabels(n, rand.New(rand.NewPCG(1, 2)))
	counts := map[string]int{}
	var nulls, empty, long, multibyte, maxLen int
	for i := range n {
		if s[i] != s2[i] || null[i] != null2[i] {
			t.Fatalf("value %d differs between two runs with the same seed", i)
		}
		if null[i] {
			if s[i] != "" {
				t.Fatalf("NULL value %d has text %q", i, s[i])
			}
			nulls++
			continue
		}
		v := s[i]
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			t.Fatalf("value %d %q: not valid UTF-8 without NUL", i, v)
		}
		counts[v]++
		maxLen = max(maxLen, len(v))
		switch {
		case v == "":
			empty++
		case len(v) > 40:
			long++
		}
		if utf8.RuneCountInString(v) < len(v) {
			multibyte++
		}
	}
	within := func(name string, got int, lo, hi float64) {
		if f := float64(got) / n; f < lo || f > hi {
			t.Errorf("%s: %.3f of the values, want %.2f..%.2f", name, f, lo, hi)
		}
	}
	within("NULL", nulls, 0.04, 0.06)
	within("empty", empty, 0.015, 0.03)
	within("longer than 40 bytes", long, 0.015, 0.03)
	within("multi-byte", multibyte, 0.3, 0.9)
	if maxLen > 300 {
		t.Errorf("longest value %d bytes, want at most 300", maxLen)
	}
	top := 0
	for _, c := range counts {
		top = max(top, c)
	}
	// Skewed: a few frequent values and many distinct ones.
	if top < n/50 || len(counts) < n/10 {
		t.Errorf("most frequent value %d times, %d distinct values of %d", top, len(counts), n)
	}
}

func TestGenCodes(t *testing.T) {
	const n = 20000
	a := GenCodes(n, rand.New(rand.NewPCG(3, 4)))
	b := GenCodes(n, rand.New(rand.NewPCG(3, 4)))
	distinct := map[string]bool{}
	for i, c := range a {
		if c != b[i] {
			t.Fatalf("code %d differs between two runs with the same seed", i)
		}
		if len(c) != 12 || !strings.HasPrefix(c, "SKU-") {
			t.Fatalf("code %d is %q, want SKU- and eight digits", i, c)
		}
		distinct[c] = true
	}
	if len(distinct) < n/50 || len(distinct) > n/20 {
		t.Errorf("%d distinct codes of %d", len(distinct), n)
	}
}
