package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-db/strata/messages"
)

// collectDead removes the directories of dead containers no pending job
// reads, then drops them from the catalog. A directory that cannot be
// removed stays listed, and is tried again on the next call.
func (s *Scheduler) collectDead(ctx context.Context, table, projection string) {
	st, _, err := s.catalog.Get(ctx, table, projection)
	if err != nil || len(st.Dead) == 0 {
		if err != nil {
			s.log.Error("collect dead containers", "table", table, "projection", projection, "err", err)
		}
		return
	}
	readers := st.readers()
	removed := map[string]bool{}
	for _, c := range st.Dead {
		if readers[c.ID] {
			continue
		}
		if s.opts.Data != nil {
			if err := s.opts.Data.RemoveContainer(table, projection, c.ID); err != nil {
				s.log.Error("remove dead container", "table", table, "projection", projection, "container", c.ID, "err", err)
				continue
			}
		}
		removed[c.ID] = true
	}
	if len(removed) == 0 {
		return
	}
	_, err = s.catalog.Update(ctx, table, projection, func(st *ProjectionState) error {
		st.Dead = slices.DeleteFunc(st.Dead, func(c messages.ContainerRef) bool { return removed[c.ID] })
		return nil
	})
	if err != nil {
		s.log.Error("drop dead containers from catalog", "table", table, "projection", projection, "err", err)
		return
	}
	s.log.Info("dead containers removed", "table", table, "projection", projection, "count", len(removed))
}

// removeOrphans removes, in the projections the catalog holds, directories
// it does not name (live, dead, or a pending job's output; bodies are the
// pending jobs', by ID) that are older than the grace period: what a
// crashed load, merge or writer left. Inside the containers it names, it
// removes the uploads older than the grace period that no commit names
// (Storage.RemoveUncommitted).
func (s *Scheduler) removeOrphans(ctx context.Context, states []*ProjectionState, bodies map[string]job) error {
	if s.opts.Data == nil {
		return nil
	}
	cutoff := s.now().Add(-s.opts.OrphanGrace)
	for _, st := range states {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := s.opts.Data.ReadDir(st.Table, st.Projection)
		if err != nil {
			return fmt.Errorf("list %s/%s: %w", st.Table, st.Projection, err)
		}
		named := st.named(bodies)
		for _, e := range entries {
			if named[e.Name()] {
				removed, err := s.opts.Data.RemoveUncommitted(st.Table, st.Projection, e.Name(), cutoff)
				if err != nil {
					s.log.Error("remove uncommitted uploads", "table", st.Table, "projection", st.Projection, "container", e.Name(), "err", err)
				} else if len(removed) > 0 {
					s.log.Warn("uncommitted uploads removed", "table", st.Table, "projection", st.Projection, "container", e.Name(), "attempts", removed)
				}
				continue
			}
			if named[writerTempOf(e.Name())] {
				continue
			}
			info, err := e.Info()
			if err != nil || info.ModTime().After(cutoff) {
				continue
			}
			if err := s.opts.Data.RemoveAll(st.Table, st.Projection, e.Name()); err != nil {
				s.log.Error("remove orphan", "table", st.Table, "projection", st.Projection, "name", e.Name(), "err", err)
				continue
			}
			s.log.Warn("orphan removed", "table", st.Table, "projection", st.Projection, "name", e.Name(), "modified", info.ModTime())
		}
	}
	return nil
}

// writerTempOf returns the container ID a container writer's temporary
// directory (".<id>.tmp-<random>") is for, or "".
func writerTempOf(name string) string {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ".tmp-")
	if !ok {
		return ""
	}
	return id
}
