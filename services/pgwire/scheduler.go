package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/messages"
)

// schedulerClient makes the requests a query needs through the client the
// strata CLI uses (internal/apiclient): a change (the window request) is
// settled, sent again with its request ID until the scheduler answers; a
// read is sent again when its reply does not come.
type schedulerClient struct {
	nc      *nats.Conn
	api     *apiclient.Client
	dataDir string
	pool    string
	// st, if set, is where containers live (--store): manifests are read
	// from it, and a result is fetched into a staging directory of its
	// own, removed when the result has been sent.
	st store.Store
	// changeTimeout bounds the wait until a change statement's changes
	// are visible (default 5m).
	changeTimeout time.Duration
	log           *slog.Logger // nil: cancels are not logged
}

// jobFailedError is a window job that failed for good.
type jobFailedError struct{ reason string }

func (e *jobFailedError) Error() string { return e.reason }

// runWindow asks the scheduler for a window job of q, waits for its done
// or failed event (or, should an event be missed, the operations table
// saying it ended) and returns the result container's directory. ctx
// ends the wait (a cancel request, a statement timeout, the client gone)
// and cancels the job (strata.api.cancel), which frees its grant.
func (c *schedulerClient) runWindow(ctx context.Context, q *messages.WindowQuery) (string, func(), error) {
	events := make(chan *nats.Msg, 1024)
	sub, err := c.nc.ChanSubscribe(messages.SubjectEventsAll, events)
	if err != nil {
		return "", nil, fmt.Errorf("subscribe to job events: %w", err)
	}
	defer sub.Unsubscribe()
	rep, err := c.requestWindow(ctx, &messages.WindowRequest{Query: *q, Pool: c.pool, RequestID: apiclient.NewRequestID()})
	if err != nil {
		return "", nil, err
	}
	id := rep.Job.JobID
	poll := time.NewTicker(2 * time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			go c.cancelJob(id, "pgwire: "+context.Cause(ctx).Error())
			return "", nil, ctx.Err()
		case msg := <-events:
			ev := new(messages.JobEvent)
			if messages.Unmarshal(msg.Data, ev) != nil || ev.JobID != id {
				continue
			}
			switch {
			case ev.Type == messages.EventDone:
				return c.result(ctx, rep.ResultTable, ev)
			case ev.Type == messages.EventFailed && !ev.Retryable:
				return "", nil, &jobFailedError{reason: ev.Reason}
			}
		case <-poll.C:
			var ops messages.OperationsReply
			if err := c.api.Call(ctx, messages.SubjectAPIOperations, &messages.OperationsRequest{JobID: id}, &ops); err != nil {
				continue
			}
			for _, op := range ops.Operations {
				switch op.Status {
				case messages.StatusDone:
					return c.result(ctx, rep.ResultTable, nil)
				case messages.StatusFailed:
					return "", nil, &jobFailedError{reason: op.Reason}
				}
			}
		}
	}
}

// requestWindow sends a window request and returns the scheduler's
// answer. The request is settled apart from ctx: the scheduler may have
// made the job before ctx ends (a cancel request, a statement timeout, the
// client gone), and only its reply names the job to cancel. So a ctx that
// ends first returns at once, and the job the reply names is cancelled
// when it comes.
func (c *schedulerClient) requestWindow(ctx context.Context, req *messages.WindowRequest) (*messages.WindowReply, error) {
	type answer struct {
		rep messages.WindowReply
		err error
	}
	got := make(chan answer, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		var a answer
		a.err = c.api.Call(rctx, messages.SubjectAPIWindow, req, &a.rep)
		got <- a
	}()
	select {
	case a := <-got:
		if a.err == nil && a.rep.Error != nil {
			a.err = a.rep.Error
		}
		return &a.rep, a.err
	case <-ctx.Done():
		reason := "pgwire: " + context.Cause(ctx).Error()
		go func() {
			if a := <-got; a.err == nil && a.rep.Error == nil {
				c.cancelJob(a.rep.Job.JobID, reason)
			}
		}()
		return nil, ctx.Err()
	}
}

// cancelTimeout bounds the settling of a cancel request.
const cancelTimeout = 30 * time.Second

// cancelJob asks the scheduler to cancel a job whose query was
// cancelled or abandoned, settled like any change (sent again with its
// request ID until answered); a failure is only logged: the job then
// runs to its end.
func (c *schedulerClient) cancelJob(id, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	var rep messages.CancelReply
	err := c.api.Call(ctx, messages.SubjectAPICancel, &messages.CancelRequest{JobID: id, Reason: reason, RequestID: apiclient.NewRequestID()}, &rep)
	if err == nil {
		err = rep.Error.Err()
	}
	if c.log == nil {
		return
	}
	if err != nil {
		c.log.Warn("cancel the job of a cancelled query", "job", id, "err", err)
		return
	}
	c.log.Info("job of a cancelled query cancelled", "job", id, "state", rep.State, "reason", reason)
}

// result finds the result container: from the done event when it
// names a container of the result table the scheduler gave (anyone may
// publish events), or else from the catalog. With a store it is fetched
// into a staging directory, which the returned func removes.
func (c *schedulerClient) result(ctx context.Context, resultTable string, ev *messages.JobEvent) (string, func(), error) {
	id := ""
	if ev != nil && ev.Output != nil && ev.Output.Table == resultTable && ev.Output.Projection == messages.ResultProjection &&
		messages.ValidName(ev.Output.ID) == nil {
		id = ev.Output.ID
	} else {
		var rep messages.CatalogReply
		if err := c.api.Call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: resultTable}, &rep); err != nil {
			return "", nil, err
		}
		for _, p := range rep.Projections {
			if p.Projection == messages.ResultProjection && len(p.Live) > 0 {
				id = p.Live[0].ID
			}
		}
		if id == "" {
			return "", nil, fmt.Errorf("result table %s has no container in the catalog", resultTable)
		}
	}
	if c.st == nil {
		return columnar.ContainerDir(c.dataDir, resultTable, messages.ResultProjection, id), func() {}, nil
	}
	staging, err := os.MkdirTemp("", "pgwire-result-")
	if err != nil {
		return "", nil, fmt.Errorf("staging directory: %w", err)
	}
	release := func() { os.RemoveAll(staging) }
	dir := columnar.ContainerDir(staging, resultTable, messages.ResultProjection, id)
	if _, _, err := store.Fetch(ctx, c.st, resultTable, messages.ResultProjection, id, dir); err != nil {
		release()
		return "", nil, fmt.Errorf("read the result from the store: %w", err)
	}
	return dir, release, nil
}

// tableInfo is a user table and its columns, from a live container's
// manifest.
type tableInfo struct {
	name    string
	columns []columnar.ColumnSchema
}

// tables lists the catalog's tables (result tables, whose projection is
// the result projection, are left out) with their columns; a table whose
// manifest cannot be read has none.
func (c *schedulerClient) tables(ctx context.Context, only string) ([]tableInfo, error) {
	var rep messages.CatalogReply
	if err := c.api.Call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: only}, &rep); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		if rep.Error.Code == "not_found" {
			return nil, nil
		}
		return nil, rep.Error
	}
	seen := map[string]bool{}
	var out []tableInfo
	for _, p := range rep.Projections {
		if p.Projection == messages.ResultProjection || seen[p.Table] || len(p.Live) == 0 {
			continue
		}
		seen[p.Table] = true
		ti := tableInfo{name: p.Table}
		l := p.Live[0]
		var m *columnar.Manifest
		var err error
		if c.st != nil {
			m, err = store.ReadManifest(ctx, c.st, l.Table, l.Projection, l.ID)
		} else {
			m, err = columnar.ReadManifest(columnar.ContainerDir(c.dataDir, l.Table, l.Projection, l.ID))
		}
		if err == nil {
			// A keyed table's change columns are not columns of the table
			// (a query naming one fails): \d does not list them.
			for _, col := range m.Schema {
				if !columnar.IsChangeColumn(col.Name) {
					ti.columns = append(ti.columns, col)
				}
			}
		}
		out = append(out, ti)
	}
	return out, nil
}
