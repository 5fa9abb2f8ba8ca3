package columnar

import (
	"testing"
	"time"

	"github.com/strata-db/strata/internal/cputime"
)

// reportCPU reports CPU nanoseconds per op and, given the bytes per op,
// MB per CPU second: on a shared machine CPU time measures the code better
// than wall time.
func reportCPU(b *testing.B, start time.Duration, bytesPerOp int64) {
	cpu := cputime.Process() - start
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu_ns/op")
	if bytesPerOp > 0 && cpu > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu_s")
	}
}
