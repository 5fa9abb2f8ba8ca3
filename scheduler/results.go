package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-db/strata/messages"
)

var errNotResult = errors.New("scheduler: not a window result table")

// resultAge is a window result table's creation time, which does not
// change while its entry exists.
type resultAge struct {
	table, jobID string
	created      int64
}

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
//
// It runs at every window job's end, so it reads no more than it must:
// result tables are those under the result projection (a window job's
// output is always there), counted from the catalog's keys; only past
// KeepResults are their entries read for their age, and each one's
// creation time (set once when it is made) is kept after its first read
// (resultCreated). Reading every entry each time made every job's end,
// and the requests waiting on it, cost a round trip per table held.
func (s *Scheduler) pruneResults(ctx context.Context) {
	keys, err := s.catalog.kv.Keys(ctx, "")
	if err != nil {
		s.log.Error("list window results", "err", err)
		return
	}
	held := map[string]bool{}
	for _, k := range keys {
		if t, p, ok := strings.Cut(k, "/"); ok && p == messages.ResultProjection {
			held[t] = true
		}
	}
	for t := range s.resultCreated {
		if !held[t] {
			delete(s.resultCreated, t)
		}
	}
	if len(held) <= s.opts.KeepResults {
		return
	}
	if s.resultCreated == nil {
		s.resultCreated = map[string]resultAge{}
	}
	var results []resultAge
	for t := range held {
		r, ok := s.resultCreated[t]
		if !ok {
			st, rev, err := s.catalog.Get(ctx, t, messages.ResultProjection)
			if err != nil {
				s.log.Error("list window results", "err", err)
				return
			}
			if rev == 0 || st.ResultOf == "" {
				continue // gone since, or not a result (not kept: it may become one)
			}
			r = resultAge{table: t, jobID: st.ResultOf, created: st.Created}
			s.resultCreated[t] = r
		}
		results = append(results, r)
	}
	if len(results) <= s.opts.KeepResults {
		return
	}
	slices.SortFunc(results, func(a, b resultAge) int {
		return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.table, b.table))
	})
	for _, r := range results[:len(results)-s.opts.KeepResults] {
		old := &ProjectionState{Table: r.table, Projection: messages.ResultProjection, ResultOf: r.jobID}
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
			delete(s.resultCreated, old.Table)
			if s.opts.Data != nil {
				s.opts.Data.RemoveEmpty(old.Table, old.Projection)
				s.opts.Data.RemoveEmpty(old.Table)
			}
			s.log.Info("window result dropped", "table", old.Table, "job", old.ResultOf)
		}
	}
}
