package grantcheck

import (
	"strings"
	"testing"
)

func TestPassed(t *testing.T) {
	var p Passed
	var out strings.Builder
	if code := p.Exit(0, &out); code != 0 || out.Len() != 0 {
		t.Fatalf("no run passed: code %d, printed %q", code, out.String())
	}
	if code := p.Exit(3, &out); code != 3 {
		t.Fatalf("tests that failed with 3 and no run passed: code %d", code)
	}
	p.Add(`"SELECT 1"`, 9, 8)
	if code := p.Exit(0, &out); code != 1 || !strings.Contains(out.String(), `"SELECT 1": peak 9 bytes over the 8-byte grant`) {
		t.Fatalf("a run passed: code %d, printed %q", code, out.String())
	}
}
