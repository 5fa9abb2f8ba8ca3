//go:build !unix

package fsutil

import "os"

// CanLock reports whether TryLock locks on this system.
const CanLock = false

// TryLock cannot lock here: it reports the lock taken, and callers that
// must know (CanLock false) guard nothing by it.
func TryLock(*os.File) (bool, error) { return true, nil }
