package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-db/strata/messages"
)

// RequestMergeout merges, now, every live container of the table's
// projections (or the one named) that no running job reads. A request
// with an ID sent again gets the jobs the first one started.
func (s *Scheduler) RequestMergeout(ctx context.Context, req *messages.MergeoutRequest) (*messages.MergeoutReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("mergeout: %w: %v", ErrInvalid, err)
	}
	return once(ctx, s, requestMergeout, req.RequestID, func() (*messages.MergeoutReply, error) { return s.requestMergeout(ctx, req) })
}

func (s *Scheduler) requestMergeout(ctx context.Context, req *messages.MergeoutRequest) (*messages.MergeoutReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	states, err := s.catalog.List(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	if rep, ok, err := s.repeatMergeout(req, states); ok || err != nil {
		return rep, err
	}
	reply := &messages.MergeoutReply{}
	found := false
	for _, st := range states {
		if req.Projection != "" && st.Projection != req.Projection {
			continue
		}
		found = true
		for _, p := range st.Pending {
			if p.Operation == messages.OperationMergeout {
				reply.Running = append(reply.Running, s.jobRef(p.JobID))
			}
		}
		sel, ok := SelectAll(st.Live, st.readers(), s.opts.Strata)
		if !ok {
			if sel, ok = s.selectRefold(ctx, st); !ok {
				continue
			}
		}
		ref, err := s.startMergeout(ctx, st, sel, req.RequestID)
		if err != nil {
			return nil, err
		}
		reply.Jobs = append(reply.Jobs, ref)
	}
	if !found {
		return nil, fmt.Errorf("mergeout %s: %w", req.Table, ErrUnknownTable)
	}
	return reply, nil
}

// repeatMergeout answers a mergeout request sent again with the jobs it
// started, recorded in each projection that got one; ok is false when no
// projection records the request (it started nothing, or never arrived).
func (s *Scheduler) repeatMergeout(req *messages.MergeoutRequest, states []*ProjectionState) (*messages.MergeoutReply, bool, error) {
	reply := &messages.MergeoutReply{}
	ok := false
	for _, st := range states {
		rec := st.request(requestMergeout, req.RequestID)
		if rec == nil {
			continue
		}
		var one messages.MergeoutReply
		if err := rec.answer(&one, &one.Error); err != nil {
			return nil, true, err
		}
		for _, j := range one.Jobs {
			reply.Jobs = append(reply.Jobs, s.jobRef(j.JobID))
		}
		ok = true
	}
	if ok {
		s.log.Info("mergeout request sent again; same jobs", "table", req.Table, "request", req.RequestID, "jobs", len(reply.Jobs))
	}
	return reply, ok, nil
}

// selectStrata starts the mergeouts the projection's strata call for.
// Errors are logged: selection runs again on the next change.
func (s *Scheduler) selectStrata(ctx context.Context, table, projection string) {
	st, _, err := s.catalog.Get(ctx, table, projection)
	if err != nil {
		s.log.Error("strata selection", "table", table, "projection", projection, "err", err)
		return
	}
	sels := SelectStrata(st.Live, st.readers(), s.opts.Strata)
	for _, sel := range sels {
		if _, err := s.startMergeout(ctx, st, sel, ""); err != nil {
			s.log.Error("start mergeout", "table", table, "projection", projection, "stratum", sel.Stratum, "err", err)
			return
		}
	}
	if len(sels) > 0 || len(st.PrimaryKey) == 0 {
		return
	}
	if sel, ok := SelectPurge(st.Live, st.readers(), st.ChangedRows, s.opts.Strata); ok {
		s.log.Info("purge: the table's changes reach the purge fraction of its rows", "table", table, "projection", projection,
			"changed_rows", st.ChangedRows, "containers", len(sel.Inputs), "purge_fraction", s.opts.Strata.withDefaults().PurgeFraction)
		if _, err := s.startMergeout(ctx, st, sel, ""); err != nil {
			s.log.Error("start purge mergeout", "table", table, "projection", projection, "err", err)
		}
	}
}

// errInputsTaken aborts a catalog update whose selection went stale.
var errInputsTaken = errors.New("scheduler: mergeout inputs no longer free")

// startMergeout records the job as pending in the catalog (so its inputs
// are taken), with the answer to the client request requestID if not
// empty, then asks the tm pool for its grant. sel was chosen from seen,
// the projection's entry as read before.
//
// A mergeout of every live container of a keyed projection may drop the
// delete markers of the changes every one of which is applied: the change
// floor is read before the entry the job is added to, so every change at
// or below it is in a container live in that entry, hence among the
// inputs, and any change still to arrive has a higher version. Then no
// row a dropped marker deletes exists outside the job, or ever will.
//
// Such a mergeout also freezes: its output has the versions at or below
// the floor written as 0. A change at or below the floor can still be
// applied late (an event JetStream dead-lettered after MaxDeliver that a
// walwriter had in its WAL, or a change applied twice), and would beat a
// frozen row holding a newer change; so the entry's FrozenThrough is
// raised to the floor in the same write that adds the job, and applies
// below it are refused from then on (apply.go).
func (s *Scheduler) startMergeout(ctx context.Context, seen *ProjectionState, sel Selection, requestID string) (messages.JobRef, error) {
	table, projection := seen.Table, seen.Projection
	now := s.now()
	pool := messages.DefaultMergeoutPool
	var floor, through int64
	if len(seen.PrimaryKey) > 0 && coversLive(sel.Inputs, seen.Live) {
		floor = s.changeFloor(ctx, table, projection)
	}
	st, j, err := s.catalog.AddJob(ctx, table, projection, pool, func(st *ProjectionState, seq uint64) (job, error) {
		busy := st.readers()
		inputs := make([]messages.ContainerRef, 0, len(sel.Inputs))
		for _, in := range sel.Inputs {
			i := st.liveIndex(in.ID)
			if i < 0 || busy[in.ID] {
				return nil, fmt.Errorf("container %s: %w", in.ID, errInputsTaken)
			}
			inputs = append(inputs, st.Live[i])
		}
		through = 0 // the last attempt's entry decides
		if len(st.PrimaryKey) > 0 && coversLive(inputs, st.Live) {
			through = floor // 0 when the selection was not of every container
		}
		return &mergeoutJob{messages.MergeoutJob{
			JobID:              fmt.Sprintf("mergeout.%s.%s.%d", table, projection, seq),
			Table:              table,
			Projection:         projection,
			Inputs:             inputs,
			Output:             fmt.Sprintf("m%08d", seq),
			Stratum:            sel.Stratum,
			Created:            now.UnixNano(),
			DropMarkersThrough: through,
		}}, nil
	}, func(st *ProjectionState, j job) error {
		// The job freezes the versions through the floor (its output
		// writes them as 0): from this write on, no change at or below
		// it is made live (apply.go), so none can land between the
		// inputs chosen here and the output made live.
		st.FrozenThrough = max(st.FrozenThrough, through)
		return st.recordRequest(requestMergeout, requestID, now, &messages.MergeoutReply{Jobs: []messages.JobRef{{JobID: j.id()}}})
	})
	if err != nil {
		return messages.JobRef{}, fmt.Errorf("start mergeout of %s.%s: %w", table, projection, err)
	}
	s.track(st, j, pool)
	s.log.Info("mergeout selected", "job", j.id(), "stratum", sel.Stratum, "inputs", len(j.inputs()),
		"drop_markers_through", through)
	if err := s.admit(ctx, j.id(), pool, j.want(), now); err != nil {
		return messages.JobRef{}, err
	}
	return s.jobRef(j.id()), nil
}

// selectRefold picks, for a requested mergeout, the one live container
// of a keyed projection when the change floor has risen past the floor
// the projection was last folded and frozen through: the container keeps
// the delete markers and versions of the changes above that floor (they
// were not all applied when it was folded), which a fold through the
// floor now drops and freezes. Without it a table folded into one
// container while changes were in flight would keep their markers until
// more changes came.
func (s *Scheduler) selectRefold(ctx context.Context, st *ProjectionState) (Selection, bool) {
	if len(st.PrimaryKey) == 0 || len(st.Live) != 1 || st.readers()[st.Live[0].ID] {
		return Selection{}, false
	}
	if floor := s.changeFloor(ctx, st.Table, st.Projection); floor <= st.FrozenThrough {
		return Selection{}, false
	}
	return Selection{Stratum: s.opts.Strata.withDefaults().Stratum(st.Live[0].Bytes), Inputs: []messages.ContainerRef{st.Live[0]}}, true
}

// coversLive reports whether inputs name every container of live.
func coversLive(inputs, live []messages.ContainerRef) bool {
	named := make(map[string]bool, len(inputs))
	for _, in := range inputs {
		named[in.ID] = true
	}
	for _, c := range live {
		if !named[c.ID] {
			return false
		}
	}
	return len(live) > 0
}

// changeFloorTimeout bounds the ChangeFloor hook, which runs under the
// scheduler's lock.
const changeFloorTimeout = 2 * time.Second

// changeFloor asks the ChangeFloor hook for the version through which
// every change is applied; 0 (keep every marker) when there is no hook or
// it fails.
func (s *Scheduler) changeFloor(ctx context.Context, table, projection string) int64 {
	if s.opts.ChangeFloor == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, changeFloorTimeout)
	defer cancel()
	floor, err := s.opts.ChangeFloor(ctx)
	if err != nil || floor < 0 {
		s.log.Warn("change floor unknown: the mergeout keeps every delete marker", "table", table, "projection", projection, "floor", floor, "err", err)
		return 0
	}
	return floor
}
