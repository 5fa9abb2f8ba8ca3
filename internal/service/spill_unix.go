//go:build unix

package service

import (
	"errors"
	"os"
	"syscall"
)

const canLock = true

// tryLock takes an exclusive flock on f without waiting: false if another
// process holds it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
