//go:build !unix

package walbench

import "time"

func cpuTime() time.Duration { return 0 }
