//go:build !linux

package walwriter

import "os"

func preallocate(f *os.File, size int64) error { return f.Truncate(size) }

func datasync(f *os.File) error { return f.Sync() }
