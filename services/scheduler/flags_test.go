package main

import (
	"strings"
	"testing"
	"time"
)

// TestSchedulerRefusesImpossibleLimits: --tick 0 panicked, --capacity 0
// and --max-containers -1 were silently replaced by defaults.
func TestSchedulerRefusesImpossibleLimits(t *testing.T) {
	good := schedulerLimits{capacity: 32, maxContainers: 1024, keepResults: 100, keepOps: 10000, tick: time.Second, orphanGrace: time.Hour, baseBytes: 1 << 20,
		purgeFraction: 0.5, keepApplies: 1000}
	if err := good.check(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	for _, tc := range []struct {
		edit func(*schedulerLimits)
		want string
	}{
		{func(l *schedulerLimits) { l.tick = 0 }, "--tick 0s: must be a positive duration"},
		{func(l *schedulerLimits) { l.capacity = 0 }, "--capacity 0: must be at least 2"},
		{func(l *schedulerLimits) { l.capacity = 1 }, "--capacity 1"},
		{func(l *schedulerLimits) { l.maxContainers = -1 }, "--max-containers -1: must be at least 1"},
		{func(l *schedulerLimits) { l.keepResults = 0 }, "--keep-results 0"},
		{func(l *schedulerLimits) { l.keepOps = -5 }, "--keep-operations -5"},
		{func(l *schedulerLimits) { l.orphanGrace = -time.Second }, "--orphan-grace -1s"},
		{func(l *schedulerLimits) { l.purgeFraction = 1.5 }, "--purge-fraction 1.5: must be between 0 (no purge) and 1"},
		{func(l *schedulerLimits) { l.purgeFraction = -0.1 }, "--purge-fraction -0.1"},
		{func(l *schedulerLimits) { l.keepApplies = 0 }, "--keep-applies 0"},
	} {
		l := good
		tc.edit(&l)
		err := l.check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}

// TestSchedulerTickZeroExits runs the binary's entry with --tick 0: a clear
// error, not a panic.
func TestSchedulerTickZeroExits(t *testing.T) {
	err := run([]string{"--tick", "0", "--data", t.TempDir(), "--http", ""})
	if err == nil || !strings.Contains(err.Error(), "--tick") {
		t.Fatalf("run --tick 0: %v", err)
	}
}
