//go:build unix

package fsutil

import (
	"errors"
	"os"
	"syscall"
)

// CanLock reports whether TryLock locks on this system.
const CanLock = true

// TryLock takes an exclusive flock on f without waiting: false if another
// open of the file holds it (another process, or another open in this
// one: flock locks belong to the open file description). The lock lasts
// until f is closed.
func TryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
