package heapbudget

import (
	"runtime/debug"
	"testing"
)

// settings returns the collector's GC percent and memory limit without
// changing them.
func settings() (int, int64) {
	pct := debug.SetGCPercent(-1)
	debug.SetGCPercent(pct)
	return pct, debug.SetMemoryLimit(-1)
}

// TestJob: while jobs run the proportional trigger is off and the limit
// covers twice their grants; overlapping jobs add up; the last one's end
// restores the settings from before, and a second call of done changes
// nothing.
func TestJob(t *testing.T) {
	if operatorSet {
		t.Skip("GOGC or GOMEMLIMIT is set: Job leaves the collector alone")
	}
	pct0, limit0 := settings()
	const g = 64 << 20
	done1 := Job(g)
	pct, limit := settings()
	if pct != -1 {
		t.Errorf("GC percent %d during a job, want -1 (off)", pct)
	}
	if limit < 2*g+headroom {
		t.Errorf("memory limit %d during a job of %d bytes, want at least %d", limit, g, 2*g+headroom)
	}
	done2 := Job(3 * g)
	if _, l := settings(); l != limit+6*g {
		t.Errorf("memory limit %d with a second job of %d bytes, want %d", l, 3*g, limit+6*g)
	}
	done1()
	done1()
	if p, l := settings(); p != -1 || l != limit+4*g {
		t.Errorf("after the first job: GC percent %d, limit %d; want -1 and %d", p, l, limit+4*g)
	}
	done2()
	if p, l := settings(); p != pct0 || l != limit0 {
		t.Errorf("after the last job: GC percent %d, limit %d; want %d and %d as before", p, l, pct0, limit0)
	}
	if d := Job(0); d == nil {
		t.Fatal("Job(0) returned no done")
	} else {
		d()
	}
	if p, l := settings(); p != pct0 || l != limit0 {
		t.Errorf("a job without a grant changed the settings: %d, %d", p, l)
	}
}
