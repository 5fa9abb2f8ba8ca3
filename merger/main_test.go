package merger

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// TestMain fails the package's tests if any merge passed its grant:
// every test's merges are held to "peak within the grant", not only
// those of the tests that check their peaks.
func TestMain(m *testing.M) {
	var (
		mu     sync.Mutex
		passed []string
	)
	grantPassed = func(output string, peak, grant int64) {
		mu.Lock()
		defer mu.Unlock()
		passed = append(passed, fmt.Sprintf("%s: peak %d bytes over the %d-byte grant", output, peak, grant))
	}
	code := m.Run()
	if len(passed) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d merges passed their grant:\n", len(passed))
		for _, p := range passed {
			fmt.Fprintln(os.Stderr, "  "+p)
		}
		code = 1
	}
	os.Exit(code)
}
