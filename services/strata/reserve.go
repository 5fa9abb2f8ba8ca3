package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/strata-db/strata/messages"
)

// reservations are the container numbers a load holds, handed out by the
// scheduler (strata.api.reserve) so that loads on different hosts never
// number two containers alike, and renewed in the background while the
// load writes and uploads, so the scheduler's orphan sweep leaves them
// alone however long that takes. Registering the containers releases
// them (RegisterRequest.Reservations).
type reservations struct {
	c                 *apiClient
	table, projection string
	atLeast           int // the lowest number the load takes: past what it sees

	mu   sync.Mutex
	held []held

	stop chan struct{}
	done chan struct{}
}

// held is a reservation and the lease it was last given.
type held struct {
	messages.ReserveReply
	lease time.Duration
}

func heldOf(rep messages.ReserveReply) held {
	return held{ReserveReply: rep, lease: max(time.Until(time.Unix(0, rep.Expires)), 3*time.Second)}
}

// importChunk is how many numbers an import reserves at a time: it does
// not know how many containers its file makes until it has read it.
const importChunk = 64

func newReservations(c *apiClient, table, projection string, atLeast int) *reservations {
	r := &reservations{c: c, table: table, projection: projection, atLeast: atLeast,
		stop: make(chan struct{}), done: make(chan struct{})}
	go r.renew()
	return r
}

// take reserves count more numbers and returns the first.
func (r *reservations) take(ctx context.Context, count int) (int, error) {
	r.mu.Lock()
	atLeast := r.atLeast
	r.mu.Unlock()
	var rep messages.ReserveReply
	req := &messages.ReserveRequest{Table: r.table, Projection: r.projection, Count: count, AtLeast: atLeast, RequestID: newRequestID()}
	if err := r.c.call(ctx, messages.SubjectAPIReserve, req, &rep); err != nil {
		return 0, fmt.Errorf("reserve container numbers: %w", err)
	}
	if err := rep.Error.Err(); err != nil {
		return 0, fmt.Errorf("reserve container numbers: %w", err)
	}
	r.mu.Lock()
	r.held = append(r.held, heldOf(rep))
	r.atLeast = rep.First + rep.Count
	r.mu.Unlock()
	return rep.First, nil
}

// number returns the number of the i-th container an import writes,
// reserving importChunk more when i passes what is held.
func (r *reservations) number(ctx context.Context, i int) (int, error) {
	r.mu.Lock()
	for _, h := range r.held {
		if i < h.Count {
			r.mu.Unlock()
			return h.First + i, nil
		}
		i -= h.Count
	}
	r.mu.Unlock()
	first, err := r.take(ctx, importChunk)
	return first + i, err
}

// ids returns the reservations held, for the registration.
func (r *reservations) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, len(r.held))
	for i, h := range r.held {
		ids[i] = h.Reservation
	}
	return ids
}

// renew extends every reservation held when a third of its lease is
// left, until close. A renewal that fails is said on stderr and tried
// again: the sweep also needs the files older than its grace, so a
// short outage costs nothing.
func (r *reservations) renew() {
	defer close(r.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		due := append([]held(nil), r.held...)
		r.mu.Unlock()
		for _, h := range due {
			if time.Until(time.Unix(0, h.Expires)) > h.lease/3 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var rep messages.ReserveReply
			err := r.c.call(ctx, messages.SubjectAPIReserve, &messages.ReserveRequest{Table: r.table, Projection: r.projection, Renew: h.Reservation}, &rep)
			cancel()
			if err == nil {
				err = rep.Error.Err()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "strata: renew the reservation of containers %s%04d.. (%s): %v\n", "c", h.First, h.Reservation, err)
				continue
			}
			r.update(rep)
		}
	}
}

func (r *reservations) update(rep messages.ReserveReply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.held {
		if r.held[i].Reservation == rep.Reservation {
			r.held[i] = heldOf(rep)
		}
	}
}

// close stops renewing.
func (r *reservations) close() {
	close(r.stop)
	<-r.done
}
