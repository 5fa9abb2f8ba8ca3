// Package bytesize parses and prints memory sizes the way operators write
// them: 32MiB, 200MB, 8GiB, 1048576.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

var units = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// Parse parses a size such as "32MiB", "200MB", "8G" or "1048576".
// Suffixes are case-insensitive; K, M, G, T without "B" are binary.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("bytesize: empty size")
	}
	mult := int64(1)
	for _, u := range units {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			mult = u.mult
			t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	// !(f >= 0) also refuses NaN, which ParseFloat accepts (and which
	// int64 would turn into the most negative integer); Inf is too large.
	if err != nil || !(f >= 0) {
		return 0, fmt.Errorf("bytesize: invalid size %q: want a number of bytes, optionally with a unit such as 512MiB", s)
	}
	v := f * float64(mult)
	if v > 1<<62 {
		return 0, fmt.Errorf("bytesize: size %q too large", s)
	}
	return int64(v), nil
}

// ParseList parses a comma-separated list of sizes.
func ParseList(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		v, err := Parse(part)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Format prints n with the largest binary unit that keeps it readable:
// 33554432 is "32MiB", 1500 is "1.5KiB".
func Format(n int64) string {
	abs := n
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs >= 1<<40:
		return trim(float64(n)/(1<<40)) + "TiB"
	case abs >= 1<<30:
		return trim(float64(n)/(1<<30)) + "GiB"
	case abs >= 1<<20:
		return trim(float64(n)/(1<<20)) + "MiB"
	case abs >= 1<<10:
		return trim(float64(n)/(1<<10)) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

func trim(f float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), "0"), ".")
}
