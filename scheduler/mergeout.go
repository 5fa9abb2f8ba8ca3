package scheduler

import (
	"context"
	"errors"
	"fmt"

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
			continue
		}
		ref, err := s.startMergeout(ctx, st.Table, st.Projection, sel, req.RequestID)
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
	for _, sel := range SelectStrata(st.Live, st.readers(), s.opts.Strata) {
		if _, err := s.startMergeout(ctx, table, projection, sel, ""); err != nil {
			s.log.Error("start mergeout", "table", table, "projection", projection, "stratum", sel.Stratum, "err", err)
			return
		}
	}
}

// errInputsTaken aborts a catalog update whose selection went stale.
var errInputsTaken = errors.New("scheduler: mergeout inputs no longer free")

// startMergeout records the job as pending in the catalog (so its inputs
// are taken), with the answer to the client request requestID if not
// empty, then asks the tm pool for its grant.
func (s *Scheduler) startMergeout(ctx context.Context, table, projection string, sel Selection, requestID string) (messages.JobRef, error) {
	now := s.now()
	pool := messages.DefaultMergeoutPool
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
		return &mergeoutJob{messages.MergeoutJob{
			JobID:      fmt.Sprintf("mergeout.%s.%s.%d", table, projection, seq),
			Table:      table,
			Projection: projection,
			Inputs:     inputs,
			Output:     fmt.Sprintf("m%08d", seq),
			Stratum:    sel.Stratum,
			Created:    now.UnixNano(),
		}}, nil
	}, func(st *ProjectionState, j job) error {
		return st.recordRequest(requestMergeout, requestID, now, &messages.MergeoutReply{Jobs: []messages.JobRef{{JobID: j.id()}}})
	})
	if err != nil {
		return messages.JobRef{}, fmt.Errorf("start mergeout of %s.%s: %w", table, projection, err)
	}
	s.track(st, j, pool)
	s.log.Info("mergeout selected", "job", j.id(), "stratum", sel.Stratum, "inputs", len(j.inputs()))
	if err := s.admit(ctx, j.id(), pool, j.want(), now); err != nil {
		return messages.JobRef{}, err
	}
	return s.jobRef(j.id()), nil
}
