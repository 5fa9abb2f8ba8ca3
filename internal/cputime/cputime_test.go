//go:build unix

package cputime

import (
	"testing"
	"time"
)

func TestProcessAdvances(t *testing.T) {
	start := Process()
	if start <= 0 {
		t.Fatalf("Process() = %v at start, want > 0", start)
	}
	x := 0
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline); {
		x++
	}
	if got := Process(); got <= start {
		t.Fatalf("Process() = %v after %d iterations of work, not past %v", got, x, start)
	}
}
