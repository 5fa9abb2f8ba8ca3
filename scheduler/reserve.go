package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/messages"
)

// Container numbers for loads.
//
// A load names its containers c<number>. Two loads into one projection
// from different hosts (each looking only at its own data directory, or
// listing the bucket at the same moment) could pick the same numbers, so
// numbers are handed out by the catalog: a load reserves a run of them
// (Reserve), one compare-and-set on the projection's entry past
// NextContainer, the highest number the entry names and the lowest the
// client will take. The reservation also tells the orphan sweep that the
// load is alive: the sweep leaves containers of a held reservation alone,
// however old their files, and a load renews its reservations while it
// writes and uploads, so no upload outlasts the sweep's grace. Registering
// the containers releases the reservation; one not renewed expires after
// Options.ReserveLease, and its containers, if never registered, are
// orphans like any.

const requestReserve = "reserve"

// Reservation is a run of container numbers held for a load: First to
// First+Count-1, until Expires (unix ns) unless renewed.
type Reservation struct {
	ID           string
	First, Count int
	Expires      int64
}

func (r Reservation) holds(n int) bool { return n >= r.First && n < r.First+r.Count }

// Reserve hands out container numbers, or renews a reservation.
func (s *Scheduler) Reserve(ctx context.Context, req *messages.ReserveRequest) (*messages.ReserveReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("reserve: %w: %v", ErrInvalid, err)
	}
	return once(ctx, s, requestReserve, req.RequestID, func() (*messages.ReserveReply, error) { return s.reserve(ctx, req) })
}

func (s *Scheduler) reserve(ctx context.Context, req *messages.ReserveRequest) (*messages.ReserveReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	expires := now.Add(s.opts.ReserveLease).UnixNano()
	var rep *messages.ReserveReply
	var prior *RequestRecord
	_, err := s.catalog.Update(ctx, req.Table, req.Projection, func(st *ProjectionState) error {
		rep, prior = nil, nil
		if rec := st.request(requestReserve, req.RequestID); rec != nil {
			prior = rec
			return errAnswered
		}
		st.Reservations = slices.DeleteFunc(st.Reservations, func(r Reservation) bool { return r.Expires < now.UnixNano() })
		if req.Renew != "" {
			i := slices.IndexFunc(st.Reservations, func(r Reservation) bool { return r.ID == req.Renew })
			if i < 0 {
				return fmt.Errorf("reserve: %w: reservation %s of %s.%s is not held (expired or released)", ErrInvalid, req.Renew, req.Table, req.Projection)
			}
			r := &st.Reservations[i]
			r.Expires = expires
			rep = &messages.ReserveReply{Reservation: r.ID, First: r.First, Count: r.Count, Expires: r.Expires}
			return nil // a renewal sent again renews again: not recorded
		}
		first := max(st.NextContainer, req.AtLeast, highestNumber(st)+1)
		r := Reservation{ID: fmt.Sprintf("res-%d", first), First: first, Count: req.Count, Expires: expires}
		st.Reservations = append(st.Reservations, r)
		st.NextContainer = first + req.Count
		rep = &messages.ReserveReply{Reservation: r.ID, First: r.First, Count: r.Count, Expires: r.Expires}
		return st.recordRequest(requestReserve, req.RequestID, now, rep)
	})
	if errors.Is(err, errAnswered) {
		rep = new(messages.ReserveReply)
		if err := prior.answer(rep, &rep.Error); err != nil {
			return nil, err
		}
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	if req.Renew == "" {
		s.log.Info("container numbers reserved", "table", req.Table, "projection", req.Projection,
			"reservation", rep.Reservation, "first", rep.First, "count", rep.Count)
	}
	return rep, nil
}

// releaseReservations drops the named reservations from st: their
// containers are registered.
func (st *ProjectionState) releaseReservations(ids []string) {
	if len(ids) == 0 {
		return
	}
	st.Reservations = slices.DeleteFunc(st.Reservations, func(r Reservation) bool { return slices.Contains(ids, r.ID) })
}

// reserved reports whether container name is a number of a reservation
// of st held at now.
func (st *ProjectionState) reserved(name string, now time.Time) bool {
	n, ok := containerNumber(name)
	if !ok {
		return false
	}
	for _, r := range st.Reservations {
		if r.Expires >= now.UnixNano() && r.holds(n) {
			return true
		}
	}
	return false
}

// highestNumber is the highest container number the entry names, -1 if
// none.
func highestNumber(st *ProjectionState) int {
	high := -1
	for _, cs := range [][]messages.ContainerRef{st.Live, st.Dead} {
		for _, c := range cs {
			if n, ok := containerNumber(c.ID); ok {
				high = max(high, n)
			}
		}
	}
	return high
}

// containerNumber parses a loaded container's ID, c<number>.
func containerNumber(id string) (int, bool) {
	digits, ok := strings.CutPrefix(id, "c")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}
