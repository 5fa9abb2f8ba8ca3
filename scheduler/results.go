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
// change while its entry exists; created is 0 until its entry is read.
type resultAge struct {
	table, jobID string
	created      int64
}

// resultTables are the window result tables the scheduler knows of. They
// are listed from the catalog's keys at the first prune, and again after
// every KeepResults results registered; in between, the scheduler's own
// registrations and drops keep the set. Listing the bucket at every job's
// end cost a round trip over every key and delete marker, which the next
// request waited for. A set gone stale costs nothing wrong: a table it
// misses is pruned after the next listing, and one it holds that is gone or
// no longer a result is checked before anything is dropped.
type resultTables struct {
	tables     map[string]resultAge
	registered int // since the last listing
	listed     bool
	due        bool // a result registered since the last prune
}

// registerResult makes a window job's result container live in its own
// table. The oldest result tables past KeepResults are dropped at the
// next Tick (pruneResults), not here: a job's end holds the scheduler's
// lock, and the next query's request, often sent as soon as this result's
// rows are read, waited for the prune's catalog writes and the removal
// of a result's directory. Tables past KeepResults live a tick longer.
func (s *Scheduler) registerResult(ctx context.Context, jobID string, out messages.ContainerRef, now time.Time) {
	st, err := s.catalog.Update(ctx, out.Table, out.Projection, func(st *ProjectionState) error {
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
	r := &s.results
	if r.tables == nil {
		r.tables = map[string]resultAge{}
	}
	if _, ok := r.tables[out.Table]; !ok {
		r.tables[out.Table] = resultAge{table: out.Table, jobID: jobID, created: st.Created}
		r.registered++
	}
	r.due = true
}

// pruneResults retires the containers of the oldest window result tables
// beyond KeepResults, and forgets result tables left with nothing. Tick
// runs it once results have been registered since the last run, so it
// reads no more than it must: each result table's creation time is read
// once, when there are more than KeepResults, and kept.
func (s *Scheduler) pruneResults(ctx context.Context) {
	r := &s.results
	if !r.due {
		return
	}
	r.due = false
	if !r.listed || r.registered >= s.opts.KeepResults {
		if err := s.listResults(ctx); err != nil {
			s.log.Error("list window results", "err", err)
			r.due = true // the next tick tries again
			return
		}
	}
	if len(r.tables) <= s.opts.KeepResults {
		return
	}
	var results []resultAge
	for t, a := range r.tables {
		if a.created == 0 {
			st, rev, err := s.catalog.Get(ctx, t, messages.ResultProjection)
			if err != nil {
				s.log.Error("list window results", "err", err)
				r.due = true
				return
			}
			if rev == 0 || st.ResultOf == "" {
				delete(r.tables, t) // gone since, or not a result (it may become one: listed again then)
				continue
			}
			a = resultAge{table: t, jobID: st.ResultOf, created: st.Created}
			r.tables[t] = a
		}
		results = append(results, a)
	}
	if len(results) <= s.opts.KeepResults {
		return
	}
	slices.SortFunc(results, func(a, b resultAge) int {
		return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.table, b.table))
	})
	for _, old := range results[:len(results)-s.opts.KeepResults] {
		s.dropResult(ctx, old)
	}
}

// listResults sets the known result tables to those under the result
// projection in the catalog's keys (a window job's output is always
// there), keeping the creation times read before.
func (s *Scheduler) listResults(ctx context.Context) error {
	keys, err := s.catalog.kv.Keys(ctx, "")
	if err != nil {
		return err
	}
	r := &s.results
	held := map[string]resultAge{}
	for _, k := range keys {
		if t, p, ok := strings.Cut(k, "/"); ok && p == messages.ResultProjection {
			a, ok := r.tables[t]
			if !ok {
				a = resultAge{table: t} // its age is read if needed
			}
			held[t] = a
		}
	}
	r.tables, r.registered, r.listed = held, 0, true
	return nil
}

// dropResult retires the containers of result table old and forgets the
// table once nothing is left in it. An entry gone, or no longer old's
// result, is left as it is.
func (s *Scheduler) dropResult(ctx context.Context, old resultAge) {
	st, err := s.catalog.Update(ctx, old.table, messages.ResultProjection, func(st *ProjectionState) error {
		if st.ResultOf != old.jobID {
			return fmt.Errorf("table %s is not the result of job %s: %w", old.table, old.jobID, errNotResult)
		}
		st.Dead = append(st.Dead, st.Live...)
		st.Live = nil
		return nil
	})
	if errors.Is(err, errNotResult) {
		delete(s.results.tables, old.table)
		return
	}
	if err != nil {
		s.log.Error("retire window result", "table", old.table, "err", err)
		return
	}
	s.collectDead(ctx, st.Table, st.Projection)
	if st, _, err := s.catalog.Get(ctx, old.table, messages.ResultProjection); err == nil && len(st.Live)+len(st.Dead)+len(st.Pending) == 0 {
		if err := s.catalog.Delete(ctx, old.table, messages.ResultProjection); err != nil {
			s.log.Error("forget window result", "table", old.table, "err", err)
			return
		}
		delete(s.results.tables, old.table)
		if s.opts.Data != nil {
			s.opts.Data.RemoveEmpty(old.table, messages.ResultProjection)
			s.opts.Data.RemoveEmpty(old.table)
		}
		s.log.Info("window result dropped", "table", old.table, "job", old.jobID)
	}
}
