package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-db/strata/messages"
)

// Register adds loaded containers to a projection's live set, refusing a
// load that would pass the projection's container limit, then starts the
// mergeouts the strata call for. Registering a container already live is a
// no-op, so a retried load is safe.
func (s *Scheduler) Register(ctx context.Context, req *messages.RegisterRequest) (*messages.RegisterReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("register: %w: %v", ErrInvalid, err)
	}
	// The containers must be committed; their rows and bytes are taken
	// from their manifests, not from the request.
	containers := append([]messages.ContainerRef(nil), req.Containers...)
	if s.opts.Data != nil {
		for i, c := range containers {
			rows, bytes, err := s.opts.Data.CheckContainer(c.Table, c.Projection, c.ID)
			if errors.Is(err, ErrBadOutput) {
				return nil, fmt.Errorf("register: %w: container %s: %v", ErrInvalid, c.ID, err)
			}
			if err != nil {
				return nil, fmt.Errorf("register: container %s: %w", c.ID, err)
			}
			containers[i].Rows, containers[i].Bytes = rows, bytes
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.catalog.Update(ctx, req.Table, req.Projection, func(st *ProjectionState) error {
		var add []messages.ContainerRef
		for _, c := range containers {
			if st.liveIndex(c.ID) < 0 {
				add = append(add, c)
			}
		}
		if max := s.opts.Strata.MaxContainers; len(st.Live)+len(add) > max {
			return &TooManyContainersError{Table: req.Table, Projection: req.Projection, Live: len(st.Live), Adding: len(add), Max: max}
		}
		st.Live = append(st.Live, add...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("registered containers", "table", req.Table, "projection", req.Projection, "added", len(req.Containers), "live", len(st.Live))
	s.selectStrata(ctx, req.Table, req.Projection)
	return &messages.RegisterReply{Live: len(st.Live)}, nil
}

// RequestMergeout merges, now, every live container of the table's
// projections (or the one named) that no running job reads.
func (s *Scheduler) RequestMergeout(ctx context.Context, req *messages.MergeoutRequest) (*messages.MergeoutReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("mergeout: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	states, err := s.catalog.List(ctx, req.Table)
	if err != nil {
		return nil, err
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
		ref, err := s.startMergeout(ctx, st.Table, st.Projection, sel)
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

// selectStrata starts the mergeouts the projection's strata call for.
// Errors are logged: selection runs again on the next change.
func (s *Scheduler) selectStrata(ctx context.Context, table, projection string) {
	st, _, err := s.catalog.Get(ctx, table, projection)
	if err != nil {
		s.log.Error("strata selection", "table", table, "projection", projection, "err", err)
		return
	}
	for _, sel := range SelectStrata(st.Live, st.readers(), s.opts.Strata) {
		if _, err := s.startMergeout(ctx, table, projection, sel); err != nil {
			s.log.Error("start mergeout", "table", table, "projection", projection, "stratum", sel.Stratum, "err", err)
			return
		}
	}
}

// errInputsTaken aborts a catalog update whose selection went stale.
var errInputsTaken = errors.New("scheduler: mergeout inputs no longer free")

// startMergeout records the job as pending in the catalog (so its inputs
// are taken), then asks the tm pool for its grant.
func (s *Scheduler) startMergeout(ctx context.Context, table, projection string, sel Selection) (messages.JobRef, error) {
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
