package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/strata-db/strata/messages"
)

// stderr is where the commands that wait for jobs report (a variable so
// tests can read it).
var stderr io.Writer = os.Stderr

// waitFlags are the flags of a command that waits for its jobs.
type waitFlags struct {
	acceptTimeout time.Duration
	timeout       time.Duration
}

func (f *waitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.acceptTimeout, "accept-timeout", 30*time.Second,
		"when no worker has accepted a job after this long, say which consumer it waits in and how many workers that has, and keep waiting (0: never)")
	fs.DurationVar(&f.timeout, "timeout", 0, "stop waiting after this long; the jobs go on running (0: wait until they end)")
}

// waitOptions are the waitFlags and the shared durable consumer the jobs
// wait in (messages.ConsumerMerger or messages.ConsumerWindower; the
// worker binary has the same name).
type waitOptions struct {
	waitFlags
	consumer string
	reach    *natsReach // set by wait: whether NATS can be reached
}

// noticeWaiting tells the user what job id, held by no worker for waited,
// waits for: memory in its pool (the scheduler has not published it), or a
// worker on the consumer, with the consumer's figures. It reports false,
// saying nothing, if the operations table shows the job ended, or taken by
// a worker before this command watched its events (seen: some event of
// the job was watched).
//
// While NATS cannot be reached (o.reach) it says nothing and reports true:
// nothing can be asked of the scheduler or the consumer meanwhile, and
// the wait's own notices say that NATS is unreachable.
func (w *eventWatcher) noticeWaiting(ctx context.Context, c *apiClient, id string, waited time.Duration, seen bool, o waitOptions) bool {
	waited = waited.Round(100 * time.Millisecond)
	unreachable := func() bool { return o.reach != nil && o.reach.isDown() }
	if unreachable() {
		return true
	}
	if o.reach != nil {
		var cancel context.CancelFunc
		ctx, cancel = o.reach.whileUp(ctx)
		defer cancel()
	}
	var op *messages.Operation
	var rep messages.OperationsReply
	if err := c.call(ctx, messages.SubjectAPIOperations, &messages.OperationsRequest{JobID: id}, &rep); err == nil && rep.Error == nil {
		for i := range rep.Operations {
			if rep.Operations[i].JobID == id {
				op = &rep.Operations[i]
			}
		}
	}
	if op != nil {
		switch {
		case op.Status == messages.StatusDone || op.Status == messages.StatusFailed:
			return false
		case op.Status == messages.StatusQueued:
			fmt.Fprintf(stderr, "%s: still queued for memory in pool %s after %s; the scheduler hands it to a %s when the pool has room (strata pools shows it); still waiting%s\n",
				id, orDash(op.Grant.Pool), waited, o.consumer, untilTimeout(o))
			return true
		case op.Worker != "" && !seen:
			return false // accepted before this command subscribed to events
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: no worker has accepted it after %s. ", id, waited)
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := c.js.Consumer(ictx, messages.StreamJobs, o.consumer)
	if err == nil {
		ci, ierr := cons.Info(ictx)
		if ierr != nil {
			err = ierr
		} else {
			fmt.Fprintf(&b, "Consumer %q on stream %s has pull requests waiting (idle %ss): %d, jobs not yet delivered: %d, delivered and unacknowledged: %d; ",
				o.consumer, messages.StreamJobs, o.consumer, ci.NumWaiting, ci.NumPending, ci.NumAckPending)
			switch {
			case ci.NumWaiting == 0 && ci.NumAckPending == 0:
				fmt.Fprintf(&b, "no %s is connected; start one against the same NATS", o.consumer)
			case ci.NumWaiting == 0:
				fmt.Fprintf(&b, "every connected %s is busy with a job", o.consumer)
			default:
				grant := "its grant"
				if op != nil && op.Grant.Bytes > 0 {
					grant = "its grant of " + fmtBytes(op.Grant.Bytes)
				}
				fmt.Fprintf(&b, "%ss are idle but have not taken it, as when %s exceeds every %s's --memory", o.consumer, grant, o.consumer)
			}
		}
	}
	if err != nil {
		if unreachable() {
			return true // NATS went away while we asked
		}
		fmt.Fprintf(&b, "Consumer %q on stream %s: %v", o.consumer, messages.StreamJobs, err)
	}
	fmt.Fprintf(&b, ". Still waiting%s\n", untilTimeout(o))
	fmt.Fprint(stderr, b.String())
	return true
}

func untilTimeout(o waitOptions) string {
	if o.timeout > 0 {
		return fmt.Sprintf(", up to --timeout %s", o.timeout)
	}
	return " (--timeout stops waiting)"
}
