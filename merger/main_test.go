package merger

import (
	"os"
	"testing"

	"github.com/strata-db/strata/internal/grantcheck"
)

// TestMain fails the package's tests if any merge passed its grant:
// every test's merges are held to "peak within the grant", not only
// those of the tests that check their peaks.
func TestMain(m *testing.M) {
	var passed grantcheck.Passed
	grantPassed = func(output string, peak, grant int64) {
		passed.Add("merge into "+output, peak, grant)
	}
	os.Exit(passed.Exit(m.Run(), os.Stderr))
}
