package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/messages"
)

// CancelledError is the cause of a job's context ended by a cancel notice:
// the job is reported failed with Reason, not retried.
type CancelledError struct{ Reason string }

func (e *CancelledError) Error() string { return e.Reason }

// cancelKeep and cancelMax bound the notices a worker remembers: a job
// cancelled while no worker ran it (waiting in the consumer, or between
// two deliveries) fails at once when a delivery comes within this time.
const (
	cancelKeep = time.Hour
	cancelMax  = 10000
)

// Cancels follows the scheduler's cancel notices (messages.SubjectCancel)
// for a JobWorker: it stops the job a notice names if it runs here, and
// remembers the notice so a delivery that comes later fails at once. A
// nil *Cancels does nothing.
type Cancels struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	recent  map[string]cancelNote
	order   []string // recent's keys, oldest first
	running map[string]func(reason string)
}

type cancelNote struct {
	reason string
	at     time.Time
}

// NewCancels returns an empty set of cancel notices.
func NewCancels(log *slog.Logger) *Cancels {
	return &Cancels{log: log, now: time.Now, recent: map[string]cancelNote{}, running: map[string]func(string){}}
}

// Subscribe follows the cancel notices on nc until the subscription ends.
// A notice that does not decode is logged and dropped.
func (c *Cancels) Subscribe(nc *nats.Conn) (*nats.Subscription, error) {
	return nc.Subscribe(messages.SubjectCancel, func(msg *nats.Msg) {
		n := new(messages.CancelNotice)
		if err := messages.Unmarshal(msg.Data, n); err != nil {
			c.log.Warn("malformed cancel notice dropped", "subject", msg.Subject, "err", err)
			return
		}
		c.Notify(n)
	})
}

// Notify takes a cancel notice: the job stops if it runs here, and a
// later delivery of it fails at once.
func (c *Cancels) Notify(n *messages.CancelNotice) {
	if c == nil {
		return
	}
	c.mu.Lock()
	now := c.now()
	if _, ok := c.recent[n.JobID]; !ok {
		c.order = append(c.order, n.JobID)
	}
	c.recent[n.JobID] = cancelNote{reason: n.Reason, at: now}
	for len(c.order) > 0 {
		oldest := c.order[0]
		if len(c.order) <= cancelMax && now.Sub(c.recent[oldest].at) < cancelKeep {
			break
		}
		delete(c.recent, oldest)
		c.order = c.order[1:]
	}
	stop := c.running[n.JobID]
	c.mu.Unlock()
	if stop != nil {
		c.log.Info("cancel notice: stopping the job", "job", n.JobID, "reason", n.Reason)
		stop(n.Reason)
	}
}

// Cancelled returns the reason of a recent cancel notice of jobID.
func (c *Cancels) Cancelled(jobID string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.recent[jobID]
	if ok && c.now().Sub(n.at) >= cancelKeep {
		return "", false
	}
	return n.reason, ok
}

// track makes jobID's notices call stop while it runs here, until the
// returned func is called. A notice that came already calls it at once.
func (c *Cancels) track(jobID string, stop func(reason string)) (untrack func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	c.running[jobID] = stop
	c.mu.Unlock()
	if reason, ok := c.Cancelled(jobID); ok {
		stop(reason)
	}
	return func() {
		c.mu.Lock()
		delete(c.running, jobID)
		c.mu.Unlock()
	}
}

// cancelCause returns the cancel notice's error that ended ctx, or nil.
func cancelCause(ctx context.Context) *CancelledError {
	ce, _ := context.Cause(ctx).(*CancelledError)
	return ce
}
