package columnar

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the process's user+system CPU time. Benchmarks report it
// beside wall time because on a shared machine wall time measures the
// neighbours as much as the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU nanoseconds per op and, given the bytes per op,
// MB per CPU second.
func reportCPU(b *testing.B, start time.Duration, bytesPerOp int64) {
	cpu := cpuTime() - start
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu_ns/op")
	if bytesPerOp > 0 && cpu > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu_s")
	}
}
