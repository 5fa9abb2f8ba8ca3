package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-db/strata/messages"
)

// Operations returns the operations system table, newest first.
func (s *Scheduler) Operations(req *messages.OperationsRequest) (*messages.OperationsReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("operations: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := &messages.OperationsReply{Operations: s.ops.list(req)}
	if req.Applies {
		rep.Applies = s.applies.list(req)
	}
	return rep, nil
}

// Acquisitions returns the acquisitions system table, newest first.
func (s *Scheduler) Acquisitions(req *messages.AcquisitionsRequest) (*messages.AcquisitionsReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("acquisitions: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &messages.AcquisitionsReply{Acquisitions: s.adm.Acquisitions(req.Pool, req.Limit)}, nil
}

// Pools returns the pools system table with recommendations.
func (s *Scheduler) Pools() *messages.PoolsReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.adm.Status()
	s.ops.recommend(st)
	return &messages.PoolsReply{Pools: st}
}

// CreatePool creates a user-defined pool, stored in the pools bucket.
func (s *Scheduler) CreatePool(ctx context.Context, req *messages.CreatePoolRequest) (*messages.PoolsReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("create pool: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	if _, ok := s.adm.Pool(req.Pool.Name); ok {
		s.mu.Unlock()
		return s.repeatCreatePool(ctx, req)
	}
	if err := s.pools.create(ctx, req.Pool, req.RequestID); err != nil {
		s.mu.Unlock()
		if errors.Is(err, ErrPoolExists) {
			return s.repeatCreatePool(ctx, req)
		}
		return nil, err
	}
	if err := s.adm.CreatePool(req.Pool); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	s.log.Info("pool created", "pool", req.Pool.Name)
	return s.Pools(), nil
}

// repeatCreatePool answers a request to create a pool that exists: done,
// if this very request (its ID) created it, its reply late or lost;
// refused with ErrPoolExists otherwise.
func (s *Scheduler) repeatCreatePool(ctx context.Context, req *messages.CreatePoolRequest) (*messages.PoolsReply, error) {
	if req.RequestID != "" {
		p, _, err := s.pools.getStored(ctx, req.Pool.Name)
		if err != nil {
			return nil, err
		}
		if p.RequestID == req.RequestID {
			s.log.Info("pool create sent again; answered as done", "pool", req.Pool.Name, "request", req.RequestID)
			return s.Pools(), nil
		}
	}
	return nil, fmt.Errorf("create pool %s: %w", req.Pool.Name, ErrPoolExists)
}

// AlterPool changes a pool's knobs at runtime, stored in the pools bucket;
// queued jobs the change makes room for start at once.
func (s *Scheduler) AlterPool(ctx context.Context, req *messages.AlterPoolRequest) (*messages.PoolsReply, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("alter pool: %w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	if _, ok := s.adm.Pool(req.Name); !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("alter pool %s: %w", req.Name, ErrUnknownPool)
	}
	cfg, err := s.pools.alter(ctx, req)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	now := s.now()
	admitted, err := s.adm.AlterPool(cfg, now)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.granted(ctx, admitted, now)
	s.mu.Unlock()
	s.log.Info("pool altered", "pool", cfg.Name, "memorysize", cfg.MemorySize, "maxmemorysize", cfg.MaxMemorySize,
		"plannedconcurrency", cfg.PlannedConcurrency, "maxconcurrency", cfg.MaxConcurrency,
		"queuetimeout", time.Duration(cfg.QueueTimeout), "priority", cfg.Priority)
	return s.Pools(), nil
}

// Catalog returns the live containers of the matching projections, with
// a keyed table's primary key and the WAL positions applied to it. It
// reads only the catalog bucket, each entry whole at one revision, so it
// takes no lock: a client's lookup (pgwire's, before every query) does not
// wait for the scheduler to settle another job.
func (s *Scheduler) Catalog(ctx context.Context, req *messages.CatalogRequest) (*messages.CatalogReply, error) {
	states, err := s.catalog.List(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	reply := &messages.CatalogReply{}
	for _, st := range states {
		if req.Projection != "" && st.Projection != req.Projection {
			continue
		}
		pc := messages.ProjectionCatalog{Table: st.Table, Projection: st.Projection, Live: st.Live, Dead: st.Dead,
			PrimaryKey: st.PrimaryKey, Applied: st.Applied}
		for _, p := range st.Pending {
			pc.Running = append(pc.Running, p.JobID)
		}
		reply.Projections = append(reply.Projections, pc)
	}
	return reply, nil
}
