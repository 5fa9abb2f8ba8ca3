package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/strata-db/strata/messages"
)

// requestApply names apply requests in the singleflight of once; they are
// not recorded as requests: the WAL position the entry keeps is their
// record.
const requestApply = "apply"

// Apply makes a batch of changes of a keyed table visible: the batch's
// container (its rows and delete markers, written by the walwriter that
// logged the changes) becomes live and the entry records how far that
// WAL's changes are applied, in one compare-and-set, so a reader sees the
// whole batch or none of it and the walwriter resumes after it. A batch
// reaching no further than the position already recorded is a repeat (the
// walwriter's reply lost, or the walwriter restarted and applied it
// again): nothing is added, and the reply says so.
//
// An apply is never refused for the projection's container limit, which
// is for loads: refusing would stop the table's changes, and mergeout
// folds the small containers of changes as it folds any.
func (s *Scheduler) Apply(ctx context.Context, req *messages.ApplyRequest) (*messages.ApplyReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("apply: %w: %v", ErrInvalid, err)
	}
	id := req.RequestID
	if id == "" {
		id = fmt.Sprintf("%s.%s.%s.%d", req.Table, req.Projection, req.WAL, req.To)
	}
	return once(ctx, s, requestApply, id, func() (*messages.ApplyReply, error) { return s.apply(ctx, req) })
}

func (s *Scheduler) apply(ctx context.Context, req *messages.ApplyRequest) (*messages.ApplyReply, error) {
	st, _, err := s.catalog.Get(ctx, req.Table, req.Projection)
	if err != nil {
		return nil, err
	}
	if at := st.Applied[req.WAL]; at >= req.To {
		return &messages.ApplyReply{Applied: at, Repeat: true}, nil
	}
	if len(st.PrimaryKey) == 0 {
		return nil, fmt.Errorf("apply to %s.%s: %w: the table has no primary key", req.Table, req.Projection, ErrInvalid)
	}
	reg := &messages.RegisterRequest{Table: req.Table, Projection: req.Projection, Containers: []messages.ContainerRef{req.Container}}
	s.mu.Lock()
	s.markRegistering(reg, 1)
	s.mu.Unlock()
	containers, pk, err := s.checkContainers(ctx, reg.Containers)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.markRegistering(reg, -1)
	if err != nil {
		return nil, err
	}
	repeat := false
	st, err = s.catalog.Update(ctx, req.Table, req.Projection, func(st *ProjectionState) error {
		repeat = st.Applied[req.WAL] >= req.To
		if repeat {
			return nil
		}
		if s.opts.Data != nil && !slices.Equal(pk.columns, st.PrimaryKey) {
			return fmt.Errorf("apply to %s.%s: %w: container %s has primary key (%s), the table (%s)", req.Table, req.Projection,
				ErrInvalid, req.Container.ID, strings.Join(pk.columns, ", "), strings.Join(st.PrimaryKey, ", "))
		}
		if st.liveIndex(containers[0].ID) < 0 {
			st.Live = append(st.Live, containers[0])
		}
		st.Applied = maps.Clone(st.Applied)
		if st.Applied == nil {
			st.Applied = map[string]uint64{}
		}
		st.Applied[req.WAL] = req.To
		return nil
	})
	if err != nil {
		return nil, err
	}
	at := st.Applied[req.WAL]
	if repeat {
		return &messages.ApplyReply{Applied: at, Repeat: true}, nil
	}
	s.log.Debug("applied changes", "table", req.Table, "projection", req.Projection, "container", req.Container.ID,
		"rows", containers[0].Rows, "wal", req.WAL, "to", req.To, "live", len(st.Live))
	s.selectStrata(ctx, req.Table, req.Projection)
	return &messages.ApplyReply{Applied: at}, nil
}
