package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// apiServer answers the strata.api.* requests, each on a goroutine of its
// own (at most apiConcurrency at once), so a registration checking many
// containers in a bucket does not hold up the reads behind it, nor the
// same registration sent again, which waits for the first (the
// scheduler's once).
type apiServer struct {
	s        *scheduler.Scheduler
	log      *slog.Logger
	timeout  time.Duration
	requests *prometheus.CounterVec
	slots    chan struct{}
	fault    *apiFault // test failpoint, nil unless STRATA_TEST_API_FAULT is set
}

// registerTimeout bounds a registration, which checks every container it
// names (in a bucket, by ranged reads): longer than other requests.
const registerTimeout = 5 * time.Minute

// apiConcurrency bounds the requests answered at once; more wait in the
// subscription's queue.
const apiConcurrency = 32

func newAPIServer(s *scheduler.Scheduler, log *slog.Logger, reg prometheus.Registerer) *apiServer {
	a := &apiServer{s: s, log: log, timeout: 30 * time.Second, slots: make(chan struct{}, apiConcurrency),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_scheduler_api_requests_total",
			Help: "API requests answered, by subject and outcome (ok, error).",
		}, []string{"subject", "outcome"}),
	}
	reg.MustRegister(a.requests)
	for _, subject := range apiSubjects {
		a.requests.WithLabelValues(subject, "ok")
		a.requests.WithLabelValues(subject, "error")
	}
	return a
}

// apiSubjects are the requests dispatch answers: the values of the subject
// label of strata_scheduler_api_requests_total, with "unknown".
var apiSubjects = []string{
	messages.SubjectAPIRegister, messages.SubjectAPIMergeout, messages.SubjectAPIWindow, messages.SubjectAPIOperations,
	messages.SubjectAPIAcquisitions, messages.SubjectAPIPools, messages.SubjectAPIPoolCreate, messages.SubjectAPIPoolAlter,
	messages.SubjectAPICatalog, messages.SubjectAPIDropContainers, messages.SubjectAPIReserve, messages.SubjectAPIApply,
	messages.SubjectAPICancel,
}

// serve is the subscription's handler: it answers msg on a goroutine once
// a slot is free.
func (a *apiServer) serve(msg *nats.Msg) {
	a.slots <- struct{}{}
	go func() {
		defer func() { <-a.slots }()
		a.handle(msg)
	}()
}

// handle answers one request. A request that does not decode gets the
// reply type of its subject with an "invalid" error, so the client learns
// why rather than waiting for a timeout.
func (a *apiServer) handle(msg *nats.Msg) {
	timeout := a.timeout
	if msg.Subject == messages.SubjectAPIRegister || msg.Subject == messages.SubjectAPIApply {
		timeout = registerTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply, apiErr := a.dispatch(ctx, msg.Subject, msg.Data)
	if reply == nil {
		a.log.Warn("request on an unknown API subject", "subject", msg.Subject)
		a.requests.WithLabelValues("unknown", "error").Inc()
		return
	}
	outcome := "ok"
	if apiErr != nil {
		outcome = "error"
		a.log.Info("request refused", "subject", msg.Subject, "code", apiErr.Code, "err", apiErr.Message)
	}
	a.requests.WithLabelValues(msg.Subject, outcome).Inc()
	data, err := messages.Marshal(reply)
	if err != nil {
		a.log.Error("encode reply", "subject", msg.Subject, "err", err)
		return
	}
	if msg.Reply == "" || !a.fault.beforeReply(msg.Subject, a.log) {
		return
	}
	if err := msg.Respond(data); err != nil {
		a.log.Warn("send reply", "subject", msg.Subject, "err", err)
	}
}

func (a *apiServer) dispatch(ctx context.Context, subject string, data []byte) (messages.Message, *messages.APIError) {
	switch subject {
	case messages.SubjectAPIRegister:
		return call(data, new(messages.RegisterRequest), func(r *messages.RegisterRequest) (*messages.RegisterReply, error) {
			return a.s.Register(ctx, r)
		}, func(e *messages.APIError) *messages.RegisterReply { return &messages.RegisterReply{Error: e} })
	case messages.SubjectAPIApply:
		var frozen *scheduler.FrozenError
		return call(data, new(messages.ApplyRequest), func(r *messages.ApplyRequest) (*messages.ApplyReply, error) {
			rep, err := a.s.Apply(ctx, r)
			errors.As(err, &frozen)
			return rep, err
		}, func(e *messages.APIError) *messages.ApplyReply {
			rep := &messages.ApplyReply{Error: e}
			if frozen != nil {
				// The floor, for the walwriter to drop the changes at or below it.
				rep.FrozenThrough = uint64(frozen.FrozenThrough)
			}
			return rep
		})
	case messages.SubjectAPIMergeout:
		return call(data, new(messages.MergeoutRequest), func(r *messages.MergeoutRequest) (*messages.MergeoutReply, error) {
			return a.s.RequestMergeout(ctx, r)
		}, func(e *messages.APIError) *messages.MergeoutReply { return &messages.MergeoutReply{Error: e} })
	case messages.SubjectAPIWindow:
		return call(data, new(messages.WindowRequest), func(r *messages.WindowRequest) (*messages.WindowReply, error) {
			return a.s.SubmitWindow(ctx, r)
		}, func(e *messages.APIError) *messages.WindowReply { return &messages.WindowReply{Error: e} })
	case messages.SubjectAPICancel:
		return call(data, new(messages.CancelRequest), func(r *messages.CancelRequest) (*messages.CancelReply, error) {
			return a.s.Cancel(ctx, r)
		}, func(e *messages.APIError) *messages.CancelReply { return &messages.CancelReply{Error: e} })
	case messages.SubjectAPIOperations:
		return call(data, new(messages.OperationsRequest), a.s.Operations,
			func(e *messages.APIError) *messages.OperationsReply { return &messages.OperationsReply{Error: e} })
	case messages.SubjectAPIAcquisitions:
		return call(data, new(messages.AcquisitionsRequest), a.s.Acquisitions,
			func(e *messages.APIError) *messages.AcquisitionsReply { return &messages.AcquisitionsReply{Error: e} })
	case messages.SubjectAPIPools:
		return call(data, new(messages.PoolsRequest), func(*messages.PoolsRequest) (*messages.PoolsReply, error) {
			return a.s.Pools(), nil
		}, poolsError)
	case messages.SubjectAPIPoolCreate:
		return call(data, new(messages.CreatePoolRequest), func(r *messages.CreatePoolRequest) (*messages.PoolsReply, error) {
			return a.s.CreatePool(ctx, r)
		}, poolsError)
	case messages.SubjectAPIPoolAlter:
		return call(data, new(messages.AlterPoolRequest), func(r *messages.AlterPoolRequest) (*messages.PoolsReply, error) {
			return a.s.AlterPool(ctx, r)
		}, poolsError)
	case messages.SubjectAPICatalog:
		return call(data, new(messages.CatalogRequest), func(r *messages.CatalogRequest) (*messages.CatalogReply, error) {
			return a.s.Catalog(ctx, r)
		}, func(e *messages.APIError) *messages.CatalogReply { return &messages.CatalogReply{Error: e} })
	case messages.SubjectAPIDropContainers:
		return call(data, new(messages.DropContainersRequest), func(r *messages.DropContainersRequest) (*messages.DropContainersReply, error) {
			return a.s.DropContainers(ctx, r)
		}, func(e *messages.APIError) *messages.DropContainersReply {
			return &messages.DropContainersReply{Error: e}
		})
	case messages.SubjectAPIReserve:
		return call(data, new(messages.ReserveRequest), func(r *messages.ReserveRequest) (*messages.ReserveReply, error) {
			return a.s.Reserve(ctx, r)
		}, func(e *messages.APIError) *messages.ReserveReply { return &messages.ReserveReply{Error: e} })
	}
	return nil, nil
}

func poolsError(e *messages.APIError) *messages.PoolsReply { return &messages.PoolsReply{Error: e} }

// call decodes a request into req, runs fn, and returns its reply, or the
// reply fail makes from the error.
func call[Req messages.Message, Rep messages.Message](data []byte, req Req, fn func(Req) (Rep, error), fail func(*messages.APIError) Rep) (messages.Message, *messages.APIError) {
	if err := messages.Unmarshal(data, req); err != nil {
		e := scheduler.APIError(err)
		return fail(e), e
	}
	rep, err := fn(req)
	if err != nil {
		e := scheduler.APIError(err)
		return fail(e), e
	}
	return rep, nil
}
