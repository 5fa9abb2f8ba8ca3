package scheduler

import (
	"context"
	"errors"
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
//
// An apply whose container holds a change at or below the table's
// frozen floor (ProjectionState.FrozenThrough: a full mergeout wrote the
// versions through it as 0) is refused with a *FrozenError, checked in
// the compare-and-set that would make it live: such a change is a late
// event, past the walwriter consumer's ack floor (applied already, or
// dead-lettered after MaxDeliver while a walwriter still had it in its
// WAL), and would beat a newer change frozen into its key's row. The
// walwriter drops the batch's changes at or below the floor and applies
// the rest.
//
// Every apply, made or refused, is a row of the applies log (Operations
// with Applies), kept apart from the jobs' operations.
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
	containers, pk, infos, err := s.checkContainerInfos(ctx, reg.Containers)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.markRegistering(reg, -1)
	if err != nil {
		return nil, err
	}
	var changes *ChangeInfo
	if len(infos) > 0 {
		changes = infos[0].Changes
	}
	row := messages.AppliedBatch{Table: req.Table, Projection: req.Projection, Container: req.Container.ID, WAL: req.WAL,
		To: req.To, Rows: containers[0].Rows, Bytes: containers[0].Bytes, At: s.now().UnixNano()}
	if changes != nil {
		row.MinVersion, row.MaxVersion = changes.MinVersion, changes.MaxVersion
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
		if err := frozenCheck(st, req, containers[0], changes, s.opts.Data != nil); err != nil {
			return err
		}
		if st.liveIndex(containers[0].ID) < 0 {
			st.Live = append(st.Live, containers[0])
			st.ChangedRows += containers[0].Rows
		}
		st.Applied = maps.Clone(st.Applied)
		if st.Applied == nil {
			st.Applied = map[string]uint64{}
		}
		st.Applied[req.WAL] = req.To
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrFrozen) {
			row.Refused = err.Error()
			s.applies.add(row)
			s.log.Warn("apply refused: changes at or below the frozen floor", "table", req.Table, "projection", req.Projection,
				"container", req.Container.ID, "wal", req.WAL, "to", req.To, "err", err)
		}
		return nil, err
	}
	at := st.Applied[req.WAL]
	if repeat {
		return &messages.ApplyReply{Applied: at, Repeat: true}, nil
	}
	row.Live = len(st.Live)
	s.applies.add(row)
	s.log.Debug("applied changes", "table", req.Table, "projection", req.Projection, "container", req.Container.ID,
		"rows", containers[0].Rows, "wal", req.WAL, "to", req.To, "live", len(st.Live))
	s.selectStrata(ctx, req.Table, req.Projection)
	return &messages.ApplyReply{Applied: at}, nil
}

// frozenCheck refuses (a *FrozenError) an apply to st whose container c,
// of change statistics changes, holds a change at or below the table's
// frozen floor; checked says the container's manifest was read (without
// a Storage, in tests, there are no statistics to check).
func frozenCheck(st *ProjectionState, req *messages.ApplyRequest, c messages.ContainerRef, changes *ChangeInfo, checked bool) error {
	if st.FrozenThrough <= 0 || !checked || c.Rows == 0 {
		return nil
	}
	e := &FrozenError{Table: req.Table, Projection: req.Projection, Container: c.ID, FrozenThrough: st.FrozenThrough}
	switch {
	case changes == nil:
		e.Unknown = true
		return e
	case changes.MinVersion <= st.FrozenThrough:
		e.MinVersion = changes.MinVersion
		return e
	}
	return nil
}
