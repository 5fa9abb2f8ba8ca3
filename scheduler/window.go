package scheduler

import (
	"context"
	"fmt"
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if rep, ok := s.answered.get(req.RequestID); ok {
		s.log.Info("window request sent again; same job", "request", req.RequestID, "job", rep.Job.JobID)
		rep.Job = s.jobRef(rep.Job.JobID)
		return rep, nil
	}
	if _, ok := s.adm.Pool(pool); !ok {
		return nil, fmt.Errorf("window: pool %q: %w", pool, ErrUnknownPool)
	}
	table := req.Query.Table
	projection, err := s.windowProjection(ctx, table)
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
	})
	if err != nil {
		return nil, err
	}
	s.track(st, j, pool)
	if err := s.admit(ctx, j.id(), pool, j.want(), now); err != nil {
		return nil, err
	}
	rep := &messages.WindowReply{Job: s.jobRef(j.id()), ResultTable: j.(*windowJob).w.ResultTable}
	s.answered.put(req.RequestID, *rep)
	return rep, nil
}

// answeredRequests is how many window request IDs the scheduler remembers:
// far more than clients resend within a request timeout.
const answeredRequests = 4096

// requestLog maps the latest request IDs to their replies, forgetting the
// oldest beyond its size. An empty ID is never kept.
type requestLog struct {
	size    int
	replies map[string]messages.WindowReply
	order   []string // oldest first
}

func newRequestLog(size int) *requestLog {
	return &requestLog{size: size, replies: map[string]messages.WindowReply{}}
}

func (l *requestLog) get(id string) (*messages.WindowReply, bool) {
	if id == "" {
		return nil, false
	}
	rep, ok := l.replies[id]
	return &rep, ok
}

func (l *requestLog) put(id string, rep messages.WindowReply) {
	if id == "" {
		return
	}
	if _, ok := l.replies[id]; !ok {
		l.order = append(l.order, id)
	}
	l.replies[id] = rep
	for len(l.order) > l.size {
		delete(l.replies, l.order[0])
		l.order = l.order[1:]
	}
}

// windowProjection picks the projection a window query reads: the one with
// the most live containers' rows, ties by name.
func (s *Scheduler) windowProjection(ctx context.Context, table string) (string, error) {
	states, err := s.catalog.List(ctx, table)
	if err != nil {
		return "", err
	}
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
