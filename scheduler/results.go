package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-db/strata/messages"
)

var errNotResult = errors.New("scheduler: not a window result table")

// registerResult makes a window job's result container live in its own
// table, then drops the oldest result tables past KeepResults.
func (s *Scheduler) registerResult(ctx context.Context, jobID string, out messages.ContainerRef, now time.Time) {
	_, err := s.catalog.Update(ctx, out.Table, out.Projection, func(st *ProjectionState) error {
		if st.ResultOf != jobID && (st.ResultOf != "" || len(st.Live)+len(st.Dead)+len(st.Pending) > 0) {
			// Not this job's result table: never make a loaded table (or
			// another job's result) something the result prune drops.
			return fmt.Errorf("table %s is not the result of job %s: %w", out.Table, jobID, errNotResult)
		}
		if st.liveIndex(out.ID) < 0 {
			st.Live = append(st.Live, out)
		}
		st.ResultOf = jobID
		if st.Created == 0 {
			st.Created = now.UnixNano()
		}
		return nil
	})
	if err != nil {
		s.log.Error("register window result", "table", out.Table, "container", out.ID, "err", err)
		return
	}
	s.pruneResults(ctx)
}

// pruneResults retires the containers of the oldest window result tables
// beyond KeepResults, and forgets result tables left with nothing.
func (s *Scheduler) pruneResults(ctx context.Context) {
	states, err := s.catalog.List(ctx, "")
	if err != nil {
		s.log.Error("list window results", "err", err)
		return
	}
	var results []*ProjectionState
	for _, st := range states {
		if st.ResultOf != "" {
			results = append(results, st)
		}
	}
	if len(results) <= s.opts.KeepResults {
		return
	}
	slices.SortFunc(results, func(a, b *ProjectionState) int { return cmp.Compare(a.Created, b.Created) })
	for _, old := range results[:len(results)-s.opts.KeepResults] {
		st, err := s.catalog.Update(ctx, old.Table, old.Projection, func(st *ProjectionState) error {
			st.Dead = append(st.Dead, st.Live...)
			st.Live = nil
			return nil
		})
		if err != nil {
			s.log.Error("retire window result", "table", old.Table, "err", err)
			continue
		}
		s.collectDead(ctx, st.Table, st.Projection)
		if st, _, err := s.catalog.Get(ctx, old.Table, old.Projection); err == nil && len(st.Live)+len(st.Dead)+len(st.Pending) == 0 {
			if err := s.catalog.Delete(ctx, old.Table, old.Projection); err != nil {
				s.log.Error("forget window result", "table", old.Table, "err", err)
				continue
			}
			if s.opts.Data != nil {
				s.opts.Data.RemoveEmpty(old.Table, old.Projection)
				s.opts.Data.RemoveEmpty(old.Table)
			}
			s.log.Info("window result dropped", "table", old.Table, "job", old.ResultOf)
		}
	}
}
