package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "mergeout", summary: "merge a table's containers now, wait, and print the outcome", run: runMergeout})
}

func runMergeout(ctx context.Context, args []string) error {
	cmd := newAPICommand("mergeout", "usage: strata mergeout TABLE [flags]\n\nAsks the scheduler to merge every container of TABLE that no running job merges.\n"+
		"If no merger has taken a job after --accept-timeout, says why it may be waiting.",
		"output format of the outcome: table, json or csv")
	projection := cmd.fs.String("projection", "", "only this projection (default: every projection of the table)")
	wait := cmd.fs.Bool("wait", true, "wait for the mergeouts to finish and print the outcome")
	var wf waitFlags
	wf.register(cmd.fs)
	tableName, err := cmd.parseArg(args, "want a TABLE")
	if err != nil {
		return err
	}
	var rep messages.MergeoutReply
	c, w, err := cmd.submit(ctx, messages.SubjectAPIMergeout, &messages.MergeoutRequest{Table: tableName, Projection: *projection, RequestID: newRequestID()}, &rep, &rep.Error)
	if err != nil {
		return err
	}
	defer c.Close()
	defer w.stop()
	if len(rep.Jobs) == 0 && len(rep.Running) == 0 {
		fmt.Fprintf(stderr, "nothing to merge in %s: every projection has fewer than two containers no running job merges\n", tableName)
		return nil
	}
	var ids []string
	for _, j := range rep.Running {
		ids = append(ids, j.JobID)
		fmt.Fprintf(stderr, "mergeout %s: %s.%s, %d containers -> %s, already under way\n", j.JobID, j.Table, j.Projection, j.Inputs, j.Output)
	}
	for _, j := range rep.Jobs {
		ids = append(ids, j.JobID)
		state := fmt.Sprintf("granted %s from pool %s", fmtBytes(j.Grant.Bytes), j.Grant.Pool)
		if j.Queued {
			state = "queued for memory in pool " + messages.DefaultMergeoutPool
		}
		fmt.Fprintf(stderr, "mergeout %s: %s.%s, %d containers -> %s, %s\n", j.JobID, j.Table, j.Projection, j.Inputs, j.Output, state)
	}
	if !*wait {
		return nil
	}
	_, failed, err := w.wait(ctx, c, ids, waitOptions{waitFlags: wf, consumer: messages.ConsumerMerger})
	if err != nil {
		return err
	}
	mine, err := settledOperations(ctx, c, tableName, ids)
	if err != nil {
		return err
	}
	if err := opsTable(mine).print(os.Stdout, cmd.format); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d mergeouts failed", failed, len(ids))
	}
	return nil
}

// settledOperations returns the operations rows of ids once the scheduler
// has settled them all (it learns of a job's end from the same event the
// client saw, a moment later), or as they are after a few seconds.
func settledOperations(ctx context.Context, c *apiClient, table string, ids []string) ([]messages.Operation, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rep messages.OperationsReply
		if err := c.call(ctx, messages.SubjectAPIOperations, &messages.OperationsRequest{Table: table}, &rep); err != nil {
			return nil, err
		}
		if err := rep.Error.Err(); err != nil {
			return nil, err
		}
		var mine []messages.Operation
		settled := true
		for _, op := range rep.Operations {
			if want[op.JobID] {
				mine = append(mine, op)
				settled = settled && (op.Status == messages.StatusDone || op.Status == messages.StatusFailed)
			}
		}
		if settled || time.Now().After(deadline) {
			return mine, nil
		}
		select {
		case <-ctx.Done():
			return mine, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventWatcher follows job events (a plain subscription on EVENTS'
// subjects, started before the request so no event is missed).
type eventWatcher struct {
	sub *nats.Subscription
	ch  chan *nats.Msg
}

func (c *apiClient) watchEvents() (*eventWatcher, error) {
	ch := make(chan *nats.Msg, 4096)
	sub, err := c.nc.ChanSubscribe(messages.SubjectEventsAll, ch)
	if err != nil {
		return nil, fmt.Errorf("subscribe to job events: %w", err)
	}
	return &eventWatcher{sub: sub, ch: ch}, nil
}

func (w *eventWatcher) stop() { w.sub.Unsubscribe() }

// submit asks the scheduler for jobs as apiCommand.ask does, watching job
// events from before the request so that no event of the jobs is missed.
// On success the caller stops the watcher and closes the client.
func (c *apiCommand) submit(ctx context.Context, subject string, req, rep messages.Message, replyErr **messages.APIError) (*apiClient, *eventWatcher, error) {
	client, err := c.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	w, err := client.watchEvents()
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	err = client.call(ctx, subject, req, rep)
	if err == nil {
		err = (*replyErr).Err()
	}
	if err != nil {
		w.stop()
		client.Close()
		return nil, nil, err
	}
	return client, w, nil
}

// wait returns when every job has a done or failed event (or, should an
// event be missed, the operations table says it ended), printing progress
// to stderr. A job no worker holds for o.acceptTimeout gets a notice saying
// what it waits for (see noticeWaiting), again every o.acceptTimeout; after
// o.timeout, if set, wait gives up (the jobs go on). While the connection
// cannot reach NATS it says so (after unreachableFirst, then every
// unreachableEvery, naming the server and for how long), skips the
// requests it would make meanwhile, and says when NATS is back. It returns
// the done events by job ID and how many failed.
func (w *eventWatcher) wait(ctx context.Context, c *apiClient, ids []string, o waitOptions) (done map[string]*messages.JobEvent, failed int, err error) {
	parent := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	done = map[string]*messages.JobEvent{}
	pending := map[string]bool{}
	// waiting holds the pending jobs no worker is known to hold, and since
	// when; noticed when each was last said to wait; seen the jobs any
	// event was seen of.
	waiting := map[string]time.Time{}
	noticed := map[string]time.Time{}
	seen := map[string]bool{}
	due := func(id string) time.Time {
		from := waiting[id]
		if n := noticed[id]; n.After(from) {
			from = n
		}
		return from.Add(o.acceptTimeout)
	}
	start := time.Now()
	for _, id := range ids {
		pending[id] = true
		waiting[id] = start
	}
	notice := time.NewTimer(time.Hour)
	notice.Stop()
	defer notice.Stop()
	reach := followReach(c.nc)
	defer reach.stop()
	o.reach = reach
	// unreachable fires while the connection is down: the first notice
	// after unreachableFirst, the next every unreachableEvery; told is
	// whether one was printed in this outage.
	unreachable := time.NewTimer(time.Hour)
	unreachable.Stop()
	defer unreachable.Stop()
	told := false
	if since, _ := reach.state(); !since.IsZero() {
		unreachable.Reset(unreachableFirst)
	}
	arm := func() {
		notice.Stop()
		if o.acceptTimeout <= 0 {
			return
		}
		var first time.Time
		for id := range waiting {
			if at := due(id); first.IsZero() || at.Before(first) {
				first = at
			}
		}
		if !first.IsZero() {
			notice.Reset(time.Until(first))
		}
	}
	arm()
	settle := func(id string, ok bool, how string) {
		if !pending[id] {
			return
		}
		delete(pending, id)
		delete(waiting, id)
		if !ok {
			failed++
		}
		fmt.Fprintf(stderr, "%s %s\n", id, how)
	}
	poll := time.NewTicker(5 * time.Second)
	defer poll.Stop()
	lastProgress := map[string]time.Time{}
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			if parent.Err() == nil && o.timeout > 0 {
				return done, failed, fmt.Errorf("gave up after --timeout %s with %d of %d jobs unfinished (they go on running; strata ops shows them)", o.timeout, len(pending), len(ids))
			}
			return done, failed, fmt.Errorf("stopped waiting for %d jobs (they go on running): %w", len(pending), ctx.Err())
		case msg := <-w.ch:
			ev := new(messages.JobEvent)
			if err := messages.Unmarshal(msg.Data, ev); err != nil || !pending[ev.JobID] {
				continue
			}
			seen[ev.JobID] = true
			switch ev.Type {
			case messages.EventAccepted:
				delete(waiting, ev.JobID)
				fmt.Fprintf(stderr, "%s accepted by %s (delivery %d)\n", ev.JobID, ev.Worker, ev.Delivery)
			case messages.EventProgress:
				delete(waiting, ev.JobID)
				if time.Since(lastProgress[ev.JobID]) >= time.Second && ev.RowsTotal > 0 {
					lastProgress[ev.JobID] = time.Now()
					fmt.Fprintf(stderr, "%s %d/%d rows (%.0f%%)\n", ev.JobID, ev.RowsDone, ev.RowsTotal, 100*float64(ev.RowsDone)/float64(ev.RowsTotal))
				}
			case messages.EventDone:
				if pending[ev.JobID] {
					done[ev.JobID] = ev
				}
				settle(ev.JobID, true, fmt.Sprintf("done by %s: %d rows, %s, peak %s", ev.Worker, ev.RowsTotal, fmtBytes(ev.Bytes), fmtBytes(ev.PeakBytes)))
			case messages.EventFailed:
				if !ev.Retryable {
					settle(ev.JobID, false, "failed: "+ev.Reason)
				} else {
					// Back in the consumer until a worker takes it again.
					waiting[ev.JobID] = time.Now()
					fmt.Fprintf(stderr, "%s attempt failed, will be retried: %s\n", ev.JobID, ev.Reason)
				}
			}
			arm()
		case <-reach.changed:
			since, url := reach.state()
			switch {
			case !since.IsZero():
				unreachable.Reset(unreachableFirst)
			default:
				unreachable.Stop()
				if told {
					fmt.Fprintf(stderr, "NATS at %s reachable again; still waiting for %d of %d jobs\n", url, len(pending), len(ids))
				}
				told = false
			}
		case <-unreachable.C:
			if text, down := reach.unreachable(); down {
				fmt.Fprintf(stderr, "%s; still waiting for %d of %d jobs%s\n", text, len(pending), len(ids), untilTimeout(o))
				told = true
				unreachable.Reset(unreachableEvery)
			}
		case <-notice.C:
			now := time.Now()
			var ready []string
			for id := range waiting {
				if !due(id).After(now) {
					ready = append(ready, id)
				}
			}
			slices.Sort(ready)
			for _, id := range ready {
				if w.noticeWaiting(ctx, c, id, now.Sub(waiting[id]), seen[id], o) {
					noticed[id] = now
				} else {
					delete(waiting, id) // a worker has it after all
				}
			}
			arm()
		case <-poll.C:
			if !c.nc.IsConnected() {
				continue // the unreachable notices say why nothing moves
			}
			for id := range pending {
				var rep messages.OperationsReply
				cctx, cancel := reach.whileUp(ctx)
				err := c.call(cctx, messages.SubjectAPIOperations, &messages.OperationsRequest{JobID: id}, &rep)
				cancel()
				if err != nil {
					if ctx.Err() != nil || !c.nc.IsConnected() {
						break // the loop's select says why
					}
					continue
				}
				for _, op := range rep.Operations {
					switch op.Status {
					case messages.StatusDone:
						settle(id, true, "done")
					case messages.StatusFailed:
						settle(id, false, "failed: "+op.Reason)
					}
				}
			}
			arm()
		}
	}
	return done, failed, nil
}
