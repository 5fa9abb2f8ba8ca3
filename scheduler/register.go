package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/strata-db/strata/messages"
)

// Register adds loaded containers to a projection's live set, refusing a
// load that would pass the projection's container limit or whose primary
// key does not fit the table (keyCheck), then starts the mergeouts the
// strata call for. The first load into a projection sets its primary key
// from the containers' manifests. Registering a container already live is a
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
	containers, pk, err := s.checkContainers(ctx, req.Containers)
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
		refused = keyCheck(st, pk)
		if max := s.opts.Strata.MaxContainers; refused == nil && len(st.Live)+len(add) > max {
			refused = &TooManyContainersError{Table: req.Table, Projection: req.Projection, Live: len(st.Live), Adding: len(add), Max: max}
		}
		if refused != nil {
			if req.RequestID == "" {
				return refused
			}
			// Recorded, so that a resend is refused too and a client that
			// removes its files on this answer never has them registered.
			st.releaseReservations(req.Reservations)
			return st.recordRequest(requestRegister, req.RequestID, s.now(), &messages.RegisterReply{Error: APIError(refused)})
		}
		if len(add) > 0 && len(pk.columns) > 0 {
			st.PrimaryKey = slices.Clone(pk.columns)
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
// manifests, not from the request, and the primary key their manifests
// give. A container missing or corrupt is an invalid request.
func (s *Scheduler) checkContainers(ctx context.Context, refs []messages.ContainerRef) ([]messages.ContainerRef, loadKey, error) {
	containers, pk, _, err := s.checkContainerInfos(ctx, refs)
	return containers, pk, err
}

// checkContainerInfos is checkContainers, with what each container's
// manifest says (nil without Options.Data).
func (s *Scheduler) checkContainerInfos(ctx context.Context, refs []messages.ContainerRef) ([]messages.ContainerRef, loadKey, []ContainerInfo, error) {
	containers := append([]messages.ContainerRef(nil), refs...)
	if s.opts.Data == nil {
		return containers, loadKey{}, nil, nil
	}
	infos := make([]ContainerInfo, len(containers))
	keys := make([][]string, len(containers))
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
		go func(c *messages.ContainerRef, key *[]string, info *ContainerInfo, err *error) {
			defer func() { <-sem; wg.Done() }()
			var cerr error
			*info, cerr = s.opts.Data.CheckContainer(c.Table, c.Projection, c.ID)
			switch {
			case errors.Is(cerr, ErrBadOutput):
				*err = fmt.Errorf("register: %w: container %s: %v", ErrInvalid, c.ID, cerr)
			case cerr != nil:
				*err = fmt.Errorf("register: container %s: %w", c.ID, cerr)
			default:
				c.Rows, c.Bytes, *key = info.Rows, info.Bytes, info.PrimaryKey
			}
		}(&containers[i], &keys[i], &infos[i], &errs[i])
	}
	wg.Wait()
	// An invalid container is the answer, whatever else failed.
	for _, err := range errs {
		if errors.Is(err, ErrInvalid) {
			return nil, loadKey{}, nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, loadKey{}, nil, err
	}
	pk := loadKey{table: containers[0].Table, columns: keys[0], first: containers[0].ID}
	for i, k := range keys {
		if !slices.Equal(k, pk.columns) {
			pk.other, pk.otherColumns = containers[i].ID, k
			break
		}
	}
	return containers, pk, infos, nil
}

// loadKey is the primary key a load's containers have, from their
// manifests: columns, as container first has it, or, when they disagree,
// also the first container other that has otherColumns instead.
type loadKey struct {
	table        string
	columns      []string
	first        string
	other        string
	otherColumns []string
}

// keyCheck refuses a load whose primary key does not fit the projection
// st; nil if it fits. Loads are for the first rows of a keyed table: once
// it has live containers its rows change by key, with strata changes.
//
//   - the load's containers must agree on the key;
//   - a keyed table takes a load only while it has no live container,
//     and only with its own key;
//   - an append-only table with live containers takes no keyed load.
func keyCheck(st *ProjectionState, pk loadKey) error {
	refuse := func(format string, args ...any) error {
		return &KeyError{Table: st.Table, Projection: st.Projection, Reason: fmt.Sprintf(format, args...)}
	}
	t := st.Table
	switch {
	case pk.other != "":
		return refuse("the load's containers disagree on the primary key: %s has %s, %s has %s",
			pk.first, keyString(pk.columns), pk.other, keyString(pk.otherColumns))
	case len(st.PrimaryKey) > 0 && len(st.Live) > 0:
		return refuse("table %s has a primary key %s; send its changes with strata changes (a load makes only the first rows of a keyed table)",
			t, keyString(st.PrimaryKey))
	case len(st.PrimaryKey) > 0 && len(pk.columns) == 0:
		return refuse("table %s has a primary key %s and the load's containers have none; load with --primary-key %s",
			t, keyString(st.PrimaryKey), strings.Join(st.PrimaryKey, ","))
	case len(st.PrimaryKey) > 0 && !slices.Equal(st.PrimaryKey, pk.columns):
		return refuse("table %s has the primary key %s, the load's containers %s",
			t, keyString(st.PrimaryKey), keyString(pk.columns))
	case len(st.PrimaryKey) == 0 && len(pk.columns) > 0 && len(st.Live) > 0:
		return refuse("table %s has no primary key (it is append-only, with %d live containers); a load with the primary key %s cannot go into it",
			t, len(st.Live), keyString(pk.columns))
	}
	return nil
}

// KeyError refuses a load whose primary key does not fit its table
// (keyCheck). It wraps ErrInvalid: the same load is refused every time.
type KeyError struct {
	Table, Projection string
	Reason            string
}

func (e *KeyError) Error() string { return e.Reason }
func (e *KeyError) Unwrap() error { return ErrInvalid }

// keyString writes a primary key as a message names it: (a, b), or
// "none".
func keyString(cols []string) string {
	if len(cols) == 0 {
		return "none"
	}
	return "(" + strings.Join(cols, ", ") + ")"
}
