//go:build !unix

package service

import "os"

const canLock = false

// tryLock cannot lock here. It reports the lock taken, so a worker still
// makes its own directory; with canLock false nothing is ever swept.
func tryLock(*os.File) (bool, error) { return true, nil }
