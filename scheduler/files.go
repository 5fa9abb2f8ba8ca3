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
// crashed load, merge or writer left. A container a held reservation
// numbers (a load still writing or uploading it) or a registration is
// checking is not an orphan, however old. Inside the containers it names,
// it removes the uploads older than the grace period that no commit names
// (Storage.RemoveUncommitted).
//
// With locked false the caller holds s.mu throughout (at start). With
// locked true s.mu is not held while the storage is listed, and each
// removal is decided again under it, against the catalog as it is then.
func (s *Scheduler) removeOrphans(ctx context.Context, states []*ProjectionState, bodies map[string]job, locked bool) error {
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
			if err := s.removeOrphan(ctx, st, e.Name(), locked); err != nil {
				s.log.Error("remove orphan", "table", st.Table, "projection", st.Projection, "name", e.Name(), "err", err)
				continue
			}
		}
	}
	return nil
}

// removeOrphan removes container directory name of st's projection
// unless a reservation holds its number or a registration is checking it;
// with locked, under s.mu and only if the catalog still does not name it.
func (s *Scheduler) removeOrphan(ctx context.Context, st *ProjectionState, name string, locked bool) error {
	if locked {
		s.mu.Lock()
		defer s.mu.Unlock()
		now, rev := st, uint64(0)
		var err error
		if now, rev, err = s.catalog.Get(ctx, st.Table, st.Projection); err != nil {
			return err
		}
		if rev == 0 {
			return nil // the projection is gone, and the sweep of it with it
		}
		bodies := map[string]job{}
		for i := range now.Pending {
			j, err := s.catalog.Job(ctx, now.Table, now.Projection, &now.Pending[i])
			if err != nil {
				return fmt.Errorf("read job %s: %w", now.Pending[i].JobID, err)
			}
			bodies[now.Pending[i].JobID] = j
		}
		if now.named(bodies)[name] {
			return nil
		}
		st = now
	}
	if st.reserved(name, s.now()) || s.registering[st.Table+"/"+st.Projection+"/"+name] > 0 {
		s.log.Debug("old container kept: a load holds it", "table", st.Table, "projection", st.Projection, "name", name)
		return nil
	}
	if err := s.opts.Data.RemoveAll(st.Table, st.Projection, name); err != nil {
		return err
	}
	s.log.Warn("orphan removed", "table", st.Table, "projection", st.Projection, "name", name)
	return nil
}

// SweepOrphans removes what removeOrphans calls orphans, while the
// scheduler runs (the service calls it every --orphan-sweep): a load or
// upload that died leaves nothing behind for long, and one that lives is
// never swept (its reservation, renewed while it writes, holds it).
func (s *Scheduler) SweepOrphans(ctx context.Context) error {
	if s.opts.Data == nil {
		return nil
	}
	s.mu.Lock()
	states, err := s.catalog.List(ctx, "")
	bodies := map[string]job{}
	for _, st := range states {
		if err != nil {
			break
		}
		for i := range st.Pending {
			var j job
			if j, err = s.catalog.Job(ctx, st.Table, st.Projection, &st.Pending[i]); err != nil {
				err = fmt.Errorf("read job %s: %w", st.Pending[i].JobID, err)
				break
			}
			bodies[st.Pending[i].JobID] = j
		}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("orphan sweep: %w", err)
	}
	return s.removeOrphans(ctx, states, bodies, true)
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
