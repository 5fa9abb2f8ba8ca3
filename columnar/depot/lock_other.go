//go:build !unix

package depot

import "os"

const canLock = false

// tryLock cannot lock here: it reports the lock taken, so a depot opens,
// unguarded against a second worker sharing its directory.
func tryLock(*os.File) (bool, error) { return true, nil }
