package windower

import (
	"fmt"
	"os"
	"testing"

	"github.com/strata-db/strata/internal/grantcheck"
	"github.com/strata-db/strata/messages"
)

// TestMain fails the package's tests if any run passed its grant: every
// test's runs are held to "peak within the grant", not only those of the
// tests that check their peaks.
func TestMain(m *testing.M) {
	var passed grantcheck.Passed
	grantPassed = func(q *messages.WindowQuery, peak, grant int64) {
		passed.Add(fmt.Sprintf("query %q", q.SQL), peak, grant)
	}
	os.Exit(passed.Exit(m.Run(), os.Stderr))
}
