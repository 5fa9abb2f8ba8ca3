package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strata-db/strata/messages"
)

// Register adds loaded containers to a projection's live set, refusing a
// load that would pass the projection's container limit, then starts the
// mergeouts the strata call for. Registering a container already live is a
// no-op. A request with an ID is answered once (requests.go): sent again,
// it gets the first answer, a refusal included, and adds nothing, even
// when the containers it names were merged away since.
func (s *Scheduler) Register(ctx context.Context, req *messages.RegisterRequest) (*messages.RegisterReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("register: %w: %v", ErrInvalid, err)
	}
	return once(ctx, s, requestRegister, req.RequestID, func() (*messages.RegisterReply, error) { return s.register(ctx, req) })
}

// checkParallel bounds the containers a registration checks at once.
const checkParallel = 8

func (s *Scheduler) register(ctx context.Context, req *messages.RegisterRequest) (*messages.RegisterReply, error) {
	if req.RequestID != "" {
		st, _, err := s.catalog.Get(ctx, req.Table, req.Projection)
		if err != nil {
			return nil, err
		}
		if rec := st.request(requestRegister, req.RequestID); rec != nil {
			return s.repeatRegister(req, rec)
		}
	}
	// The orphan sweep leaves the containers alone from here on: checked
	// and then made live, none is removed between the two.
	s.mu.Lock()
	s.markRegistering(req, 1)
	s.mu.Unlock()
	containers, err := s.checkContainers(ctx, req.Containers)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.markRegistering(req, -1)
	if err != nil {
		return nil, err
	}
	var prior *RequestRecord
	var refused error
	st, err := s.catalog.Update(ctx, req.Table, req.Projection, func(st *ProjectionState) error {
		prior, refused = nil, nil
		if rec := st.request(requestRegister, req.RequestID); rec != nil {
			prior = rec
			return errAnswered
		}
		var add []messages.ContainerRef
		for _, c := range containers {
			if st.liveIndex(c.ID) < 0 {
				add = append(add, c)
			}
		}
		if max := s.opts.Strata.MaxContainers; len(st.Live)+len(add) > max {
			refused = &TooManyContainersError{Table: req.Table, Projection: req.Projection, Live: len(st.Live), Adding: len(add), Max: max}
			if req.RequestID == "" {
				return refused
			}
			// Recorded, so that a resend is refused too and a client that
			// removes its files on this answer never has them registered.
			st.releaseReservations(req.Reservations)
			return st.recordRequest(requestRegister, req.RequestID, s.now(), &messages.RegisterReply{Error: APIError(refused)})
		}
		st.Live = append(st.Live, add...)
		st.releaseReservations(req.Reservations)
		return st.recordRequest(requestRegister, req.RequestID, s.now(), &messages.RegisterReply{Live: len(st.Live)})
	})
	switch {
	case errors.Is(err, errAnswered):
		return s.repeatRegister(req, prior)
	case err != nil:
		return nil, err
	case refused != nil:
		return nil, refused
	}
	s.log.Info("registered containers", "table", req.Table, "projection", req.Projection, "added", len(req.Containers), "live", len(st.Live), "request", req.RequestID)
	s.selectStrata(ctx, req.Table, req.Projection)
	return &messages.RegisterReply{Live: len(st.Live)}, nil
}

// markRegistering adds d to the count of registrations checking each of
// req's containers. s.mu is held.
func (s *Scheduler) markRegistering(req *messages.RegisterRequest, d int) {
	for _, c := range req.Containers {
		k := c.Table + "/" + c.Projection + "/" + c.ID
		if s.registering[k] += d; s.registering[k] <= 0 {
			delete(s.registering, k)
		}
	}
}

// errAnswered aborts a catalog update for a request the entry shows was
// answered already.
var errAnswered = errors.New("scheduler: request already answered")

// repeatRegister answers a registration sent again with the first answer.
func (s *Scheduler) repeatRegister(req *messages.RegisterRequest, rec *RequestRecord) (*messages.RegisterReply, error) {
	rep := new(messages.RegisterReply)
	if err := rec.answer(rep, &rep.Error); err != nil {
		s.log.Info("registration sent again; refused as before", "table", req.Table, "projection", req.Projection, "request", req.RequestID)
		return nil, err
	}
	s.log.Info("registration sent again; answered as before", "table", req.Table, "projection", req.Projection, "request", req.RequestID, "live", rep.Live)
	rep.Repeat = true
	return rep, nil
}

// checkContainers checks that each container is committed, checkParallel
// at a time, and returns them with their rows and bytes taken from their
// manifests, not from the request. A container missing or corrupt is an
// invalid request.
func (s *Scheduler) checkContainers(ctx context.Context, refs []messages.ContainerRef) ([]messages.ContainerRef, error) {
	containers := append([]messages.ContainerRef(nil), refs...)
	if s.opts.Data == nil {
		return containers, nil
	}
	errs := make([]error, len(containers))
	sem := make(chan struct{}, checkParallel)
	var wg sync.WaitGroup
	for i := range containers {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(c *messages.ContainerRef, err *error) {
			defer func() { <-sem; wg.Done() }()
			rows, bytes, cerr := s.opts.Data.CheckContainer(c.Table, c.Projection, c.ID)
			switch {
			case errors.Is(cerr, ErrBadOutput):
				*err = fmt.Errorf("register: %w: container %s: %v", ErrInvalid, c.ID, cerr)
			case cerr != nil:
				*err = fmt.Errorf("register: container %s: %w", c.ID, cerr)
			default:
				c.Rows, c.Bytes = rows, bytes
			}
		}(&containers[i], &errs[i])
	}
	wg.Wait()
	// An invalid container is the answer, whatever else failed.
	for _, err := range errs {
		if errors.Is(err, ErrInvalid) {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return containers, nil
}
