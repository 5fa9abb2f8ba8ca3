package heaplimit

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct{ grant, want int64 }{
		{0, 64 << 20},
		{-1, 64 << 20},
		{64 << 20, 128 << 20},
		{100 << 20, 164 << 20},
		{256 << 20, 384 << 20},
		{1 << 30, 3 << 29},
		{math.MaxInt64/3*2 + 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := Limit(c.grant); got != c.want {
			t.Errorf("Limit(%d) = %d, want %d", c.grant, got, c.want)
		}
	}
}

// unsetEnv clears name for the test, restoring it after.
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // registers the restore
	os.Unsetenv(name)
}

func TestApplyAndRestore(t *testing.T) {
	unsetEnv(t, "GOGC")
	unsetEnv(t, "GOMEMLIMIT")
	beforeLimit := debug.SetMemoryLimit(-1)
	beforePercent := debug.SetGCPercent(-1)
	debug.SetGCPercent(beforePercent)

	grant := int64(256 << 20)
	s, restore := Apply(grant)
	if s.FromEnv != "" {
		t.Fatalf("Apply with neither variable set: left to %s", s.FromEnv)
	}
	if s.Limit < Limit(grant) || s.Limit > Limit(grant)+Held()+(64<<20) {
		t.Errorf("limit %d: want Limit(grant) %d plus what the process holds (%d now)", s.Limit, Limit(grant), Held())
	}
	if got := debug.SetMemoryLimit(-1); got != s.Limit {
		t.Errorf("runtime's memory limit %d, want %d", got, s.Limit)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent %d after Apply, want -1 (off)", got)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != beforeLimit {
		t.Errorf("memory limit %d after restore, want %d", got, beforeLimit)
	}
	if got := debug.SetGCPercent(beforePercent); got != beforePercent {
		t.Errorf("GC percent %d after restore, want %d", got, beforePercent)
	}
}

func TestApplyLeavesTheEnvironmentsSetting(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			unsetEnv(t, "GOGC")
			unsetEnv(t, "GOMEMLIMIT")
			t.Setenv(env, map[string]string{"GOGC": "200", "GOMEMLIMIT": "3GiB"}[env])
			beforeLimit := debug.SetMemoryLimit(-1)
			beforePercent := debug.SetGCPercent(-1)
			debug.SetGCPercent(beforePercent)
			s, restore := Apply(1 << 30)
			defer restore()
			if s.FromEnv != env || s.Limit != 0 {
				t.Errorf("Apply with %s set: %+v, want the collector left to %s", env, s, env)
			}
			if got := debug.SetMemoryLimit(-1); got != beforeLimit {
				t.Errorf("memory limit changed to %d, was %d", got, beforeLimit)
			}
			if got := debug.SetGCPercent(beforePercent); got != beforePercent {
				t.Errorf("GC percent changed to %d, was %d", got, beforePercent)
			}
		})
	}
}

func TestHeld(t *testing.T) {
	before := Held()
	keep := make([]byte, 32<<20)
	for i := range keep {
		keep[i] = 1
	}
	if after := Held(); after < before+(16<<20) {
		t.Errorf("Held %d after a 32MiB allocation, %d before: want it counted", after, before)
	}
	_ = keep[len(keep)-1]
}

// TestCollect: a collector Apply set collects after a job that allocated
// CollectAbove bytes or more since the last cycle, and not after one that
// allocated less; one the environment chose is left to the runtime.
func TestCollect(t *testing.T) {
	unsetEnv(t, "GOGC")
	unsetEnv(t, "GOMEMLIMIT")
	applied, restore := Apply(1 << 30) // no cycle before the limit, as in a worker
	defer restore()
	defer debug.FreeOSMemory() // the garbage left, for the tests after
	var ms runtime.MemStats
	cycles := func() uint32 { runtime.ReadMemStats(&ms); return ms.NumGC }
	var sink [][]byte
	allocate := func(n int) {
		for range n >> 20 {
			sink = append(sink, make([]byte, 1<<20))
		}
		sink = nil
	}
	allocate(2 * CollectAbove)
	before := cycles()
	Setting{FromEnv: "GOGC"}.Collect()
	if got := cycles(); got != before {
		t.Errorf("Collect with the environment's collector ran %d cycles, want none", got-before)
	}
	if a := allocatedSinceCollection(); a < CollectAbove {
		t.Fatalf("%d bytes allocated since the last cycle after allocating %d", a, 2*CollectAbove)
	}
	before = cycles()
	applied.Collect()
	if got := cycles(); got == before {
		t.Error("Collect with Apply's collector ran no cycle after a job that allocated twice CollectAbove")
	}
	if a := allocatedSinceCollection(); a >= CollectAbove {
		t.Errorf("%d bytes allocated since the cycle Collect just ran", a)
	}
	allocate(CollectAbove / 4)
	before = cycles()
	applied.Collect()
	if got := cycles(); got != before {
		t.Errorf("Collect ran %d cycles after a job that allocated a quarter of CollectAbove, want none", got-before)
	}
}
