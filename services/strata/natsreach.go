package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// How soon a wait says that NATS cannot be reached, and how often again
// while it cannot (variables so tests can shorten them). A reconnection
// to another node of a cluster takes less than the first, and says
// nothing.
var (
	unreachableFirst = 3 * time.Second
	unreachableEvery = 15 * time.Second
)

// errNATSDown is the cause of a context natsReach.whileUp cancelled.
var errNATSDown = errors.New("NATS connection lost")

// natsReach follows whether a command's connection reaches a NATS server,
// from the connection's status changes (nats.Conn.StatusChanged, which
// leaves the connection's own handlers alone): since when it has been
// down, and a channel closed when it goes down, so a request made while
// it was up stops waiting at once instead of at its timeout.
type natsReach struct {
	nc      *nats.Conn
	events  chan nats.Status
	changed chan struct{} // a token after every change of up or down
	done    chan struct{}

	mu        sync.Mutex
	url       string        // the server last connected to, redacted
	downSince time.Time     // zero while connected
	down      chan struct{} // closed while down
}

// followReach starts following nc, which should be connected; stop ends it.
func followReach(nc *nats.Conn) *natsReach {
	r := &natsReach{
		nc:      nc,
		events:  nc.StatusChanged(),
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
		url:     nc.ConnectedUrlRedacted(),
		down:    make(chan struct{}), // open: up
	}
	if !nc.IsConnected() {
		r.downSince = time.Now()
		close(r.down)
	}
	go r.run()
	return r
}

func (r *natsReach) run() {
	for {
		select {
		case <-r.done:
			return
		case _, ok := <-r.events:
			if !ok {
				return
			}
			// The event is a nudge: the connection's status now is what counts
			// (events are dropped when the channel is full).
			r.update(r.nc.IsConnected())
		}
	}
}

func (r *natsReach) update(up bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wasUp := r.downSince.IsZero()
	switch {
	case up && !wasUp:
		r.downSince = time.Time{}
		r.down = make(chan struct{})
		if u := r.nc.ConnectedUrlRedacted(); u != "" {
			r.url = u
		}
	case !up && wasUp:
		r.downSince = time.Now()
		close(r.down)
	default:
		return
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *natsReach) stop() {
	close(r.done)
	r.nc.RemoveStatusListener(r.events)
}

// state returns since when the connection has been down (zero while it is
// up) and the server it was last connected to.
func (r *natsReach) state() (downSince time.Time, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.downSince, r.url
}

// isDown reports whether the connection is down.
func (r *natsReach) isDown() bool {
	since, _ := r.state()
	return !since.IsZero()
}

// whileUp returns a context that is cancelled, with cause errNATSDown, as
// soon as the connection is down (at once if it is down now).
func (r *natsReach) whileUp(ctx context.Context) (context.Context, context.CancelFunc) {
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-down:
			cancel(errNATSDown)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// unreachable says, when the connection is down, where to and for how
// long: "NATS at nats://127.0.0.1:4222 unreachable for 12s; reconnecting".
// ok is false while it is up.
func (r *natsReach) unreachable() (text string, ok bool) {
	since, url := r.state()
	if since.IsZero() {
		return "", false
	}
	if url == "" {
		url = "(never connected)"
	}
	return fmt.Sprintf("NATS at %s unreachable for %s; reconnecting", url, roundWait(time.Since(since))), true
}

// roundWait rounds a wait for people: to the second from one second on.
func roundWait(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
