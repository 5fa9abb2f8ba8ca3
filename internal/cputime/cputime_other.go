//go:build !unix

package cputime

import "time"

// Process returns 0: the process's CPU time is read on unix systems only.
func Process() time.Duration { return 0 }
