//go:build linux

package walwriter

import (
	"errors"
	"os"
	"syscall"
)

// preallocate reserves size bytes for f, so appends never wait for block
// allocation and fdatasync need not write file-size metadata.
func preallocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return f.Truncate(size)
	}
	return err
}

// datasync flushes f's data (and the metadata needed to read it) to disk.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
