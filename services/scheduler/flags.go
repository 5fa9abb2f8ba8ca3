package main

import (
	"fmt"
	"time"
)

// schedulerLimits are the scheduler's own numeric flags, checked before
// anything starts: a value the scheduler cannot work with is refused with
// the flag's name, never replaced by a default.
type schedulerLimits struct {
	capacity, maxContainers, keepResults, keepOps int
	tick, orphanGrace, orphanSweep                time.Duration
	baseBytes                                     int64
	purgeFraction                                 float64
	keepApplies                                   int
}

func (l schedulerLimits) check() error {
	for _, c := range []struct {
		flag string
		ok   bool
		want string
		got  any
	}{
		{"capacity", l.capacity >= 2, "at least 2 (a stratum merges that many containers into one)", l.capacity},
		{"max-containers", l.maxContainers >= 1, "at least 1", l.maxContainers},
		{"keep-results", l.keepResults >= 1, "at least 1", l.keepResults},
		{"keep-operations", l.keepOps >= 1, "at least 1", l.keepOps},
		{"tick", l.tick > 0, "a positive duration", l.tick},
		{"orphan-grace", l.orphanGrace >= 0, "a duration of 0 or more", l.orphanGrace},
		{"orphan-sweep", l.orphanSweep >= 0, "a duration of 0 or more", l.orphanSweep},
		{"strata-base", l.baseBytes > 0, "a positive size", l.baseBytes},
		{"purge-fraction", l.purgeFraction >= 0 && l.purgeFraction <= 1, "between 0 (no purge) and 1", l.purgeFraction},
		{"keep-applies", l.keepApplies >= 1, "at least 1", l.keepApplies},
	} {
		if !c.ok {
			return fmt.Errorf("--%s %v: must be %s", c.flag, c.got, c.want)
		}
	}
	return nil
}
