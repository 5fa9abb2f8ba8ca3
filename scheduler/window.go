package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/strata-db/strata/messages"
)

// SubmitWindow makes a window job over the live containers of the query's
// table, asks the request's pool (general by default) for its grant, and
// publishes it once granted. The job's containers stay readable until it
// ends: a mergeout that retires them leaves their directories until then.
// The result is container Output of table ResultTable, registered live when
// the job is done.
func (s *Scheduler) SubmitWindow(ctx context.Context, req *messages.WindowRequest) (*messages.WindowReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("window: %w: %v", ErrInvalid, err)
	}
	pool := req.Pool
	if pool == "" {
		pool = messages.DefaultWindowPool
	}
	return once(ctx, s, requestWindow, req.RequestID, func() (*messages.WindowReply, error) { return s.submitWindow(ctx, req, pool) })
}

func (s *Scheduler) submitWindow(ctx context.Context, req *messages.WindowRequest, pool string) (*messages.WindowReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	table := req.Query.Table
	states, err := s.catalog.List(ctx, table)
	if err != nil {
		return nil, err
	}
	for _, st := range states {
		if rec := st.request(requestWindow, req.RequestID); rec != nil {
			rep := new(messages.WindowReply)
			if err := rec.answer(rep, &rep.Error); err != nil {
				return nil, err
			}
			s.log.Info("window request sent again; same job", "request", req.RequestID, "job", rep.Job.JobID)
			rep.Job = s.jobRef(rep.Job.JobID)
			return rep, nil
		}
	}
	if _, ok := s.adm.Pool(pool); !ok {
		return nil, fmt.Errorf("window: pool %q: %w", pool, ErrUnknownPool)
	}
	projection, err := windowProjection(table, states)
	if err != nil {
		return nil, err
	}
	now := s.now()
	st, j, err := s.catalog.AddJob(ctx, table, projection, pool, func(st *ProjectionState, seq uint64) (job, error) {
		if len(st.Live) == 0 {
			return nil, fmt.Errorf("window over %s: no live containers: %w", table, ErrUnknownTable)
		}
		return &windowJob{messages.WindowJob{
			JobID:       fmt.Sprintf("window.%s.%s.%d", table, projection, seq),
			Query:       req.Query,
			Inputs:      append([]messages.ContainerRef(nil), st.Live...),
			ResultTable: fmt.Sprintf("%s_window_%d", table, seq),
			Output:      fmt.Sprintf("w%08d", seq),
			Created:     now.UnixNano(),
		}}, nil
	}, func(st *ProjectionState, j job) error {
		w := j.(*windowJob).w
		return st.recordRequest(requestWindow, req.RequestID, now, &messages.WindowReply{Job: messages.JobRef{JobID: w.JobID}, ResultTable: w.ResultTable})
	})
	if err != nil {
		return nil, err
	}
	s.track(st, j, pool)
	if err := s.admit(ctx, j.id(), pool, j.want(), now); err != nil {
		return nil, err
	}
	return &messages.WindowReply{Job: s.jobRef(j.id()), ResultTable: j.(*windowJob).w.ResultTable}, nil
}

// windowProjection picks the projection of the table's states a window
// query reads: the one with the most live containers' rows, ties by name.
func windowProjection(table string, states []*ProjectionState) (string, error) {
	states = slices.Clone(states)
	sort.SliceStable(states, func(i, j int) bool {
		return rowsOf(states[i].Live) > rowsOf(states[j].Live)
	})
	for _, st := range states {
		if len(st.Live) > 0 {
			return st.Projection, nil
		}
	}
	return "", fmt.Errorf("window over %s: %w (no projection has live containers)", table, ErrUnknownTable)
}

func rowsOf(cs []messages.ContainerRef) int64 {
	var n int64
	for _, c := range cs {
		n += c.Rows
	}
	return n
}
