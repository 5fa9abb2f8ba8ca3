package main

import (
	"strings"
	"testing"
)

func TestListenBeyondLoopbackNeedsTLS(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		err := run([]string{"--data", t.TempDir(), "--listen", addr, "--http", ""})
		if err == nil || !strings.Contains(err.Error(), "TLS") {
			t.Errorf("--listen %s without TLS: %v, want a refusal", addr, err)
		}
	}
}
