package windower

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/strata-db/strata/messages"
)

// TestMain fails the package's tests if any run passed its grant: every
// test's runs are held to "peak within the grant", not only those of the
// tests that check their peaks.
func TestMain(m *testing.M) {
	var (
		mu     sync.Mutex
		passed []string
	)
	grantPassed = func(q *messages.WindowQuery, peak, grant int64) {
		mu.Lock()
		defer mu.Unlock()
		passed = append(passed, fmt.Sprintf("%q: peak %d bytes over the %d-byte grant", q.SQL, peak, grant))
	}
	code := m.Run()
	if len(passed) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d runs passed their grant:\n", len(passed))
		for _, p := range passed {
			fmt.Fprintln(os.Stderr, "  "+p)
		}
		code = 1
	}
	os.Exit(code)
}
