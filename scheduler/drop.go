package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-db/strata/messages"
)

// DropContainers takes live containers out of a projection, for an
// operator removing an entry whose container is gone or damaged (every
// job that reads it fails). The containers move to the dead list, so their
// files are deleted once no running job reads them; their rows leave the
// table. A container a pending job reads is refused with ErrConflict (the
// job fails on its own when the container is damaged; drop it after), and
// one that is not live with ErrInvalid. Nothing is dropped unless all are.
func (s *Scheduler) DropContainers(ctx context.Context, req *messages.DropContainersRequest) (*messages.DropContainersReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("drop containers: %w: %v", ErrInvalid, err)
	}
	return once(ctx, s, requestDrop, req.RequestID, func() (*messages.DropContainersReply, error) { return s.dropContainers(ctx, req) })
}

func (s *Scheduler) dropContainers(ctx context.Context, req *messages.DropContainersRequest) (*messages.DropContainersReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, rev, err := s.catalog.Get(ctx, req.Table, req.Projection); err != nil {
		return nil, err
	} else if rev == 0 {
		return nil, fmt.Errorf("drop containers: %w: %s.%s", ErrUnknownTable, req.Table, req.Projection)
	} else if rec := st.request(requestDrop, req.RequestID); rec != nil {
		return s.repeatDrop(req, rec)
	}
	var dropped []messages.ContainerRef
	var prior *RequestRecord
	st, err := s.catalog.Update(ctx, req.Table, req.Projection, func(st *ProjectionState) error {
		dropped, prior = dropped[:0], nil
		if rec := st.request(requestDrop, req.RequestID); rec != nil {
			prior = rec
			return errAnswered
		}
		readers := st.readers()
		for _, id := range req.IDs {
			i := st.liveIndex(id)
			if i < 0 {
				return fmt.Errorf("drop containers: %w: container %s is not live in %s.%s", ErrInvalid, id, req.Table, req.Projection)
			}
			if readers[id] {
				return fmt.Errorf("drop containers: %w: container %s of %s.%s is read by job %s; drop it once the job has ended",
					ErrConflict, id, req.Table, req.Projection, s.catalog.readerOf(ctx, st, id))
			}
			dropped = append(dropped, st.Live[i])
		}
		st.Live = slices.DeleteFunc(st.Live, func(c messages.ContainerRef) bool { return slices.Contains(req.IDs, c.ID) })
		st.Dead = append(st.Dead, dropped...)
		return st.recordRequest(requestDrop, req.RequestID, s.now(), &messages.DropContainersReply{Dropped: dropped, Live: len(st.Live)})
	})
	if errors.Is(err, errAnswered) {
		return s.repeatDrop(req, prior)
	}
	if err != nil {
		return nil, err
	}
	s.log.Warn("containers dropped by request", "table", req.Table, "projection", req.Projection,
		"containers", req.IDs, "rows", rowsOf(dropped), "live", len(st.Live), "request", req.RequestID)
	s.collectDead(ctx, req.Table, req.Projection)
	s.selectStrata(ctx, req.Table, req.Projection)
	return &messages.DropContainersReply{Dropped: dropped, Live: len(st.Live)}, nil
}

// repeatDrop answers a drop request sent again with the first answer.
func (s *Scheduler) repeatDrop(req *messages.DropContainersRequest, rec *RequestRecord) (*messages.DropContainersReply, error) {
	rep := new(messages.DropContainersReply)
	if err := rec.answer(rep, &rep.Error); err != nil {
		return nil, err
	}
	s.log.Info("drop request sent again; answered as before", "table", req.Table, "projection", req.Projection, "request", req.RequestID)
	rep.Repeat = true
	return rep, nil
}
