//go:build unix

package depot

import (
	"errors"
	"os"
	"syscall"
)

const canLock = true

// tryLock takes an exclusive flock on f without waiting: false if another
// open of the file holds it (another process, or another Open in this
// one: flock locks belong to the open file description).
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
