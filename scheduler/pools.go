package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/strata-db/strata/messages"
)

// DefaultPools returns the built-in pools: tm, where mergeouts run, sized as
// in the original experiment (200MiB, plannedconcurrency 2, so a 100MiB
// target), and general, where window jobs run unless told otherwise.
//
// Neither borrows by default (maxmemorysize = memorysize), so a grant never
// exceeds the target and workers started with --memory at least the target
// run every job. Raising maxmemorysize lets a mergeout that could use more
// borrow up to its inputs' size; give the workers the memory to hold it.
func DefaultPools() []messages.PoolConfig {
	return []messages.PoolConfig{
		{Name: messages.DefaultMergeoutPool, MemorySize: 200 << 20, MaxMemorySize: 200 << 20, PlannedConcurrency: 2,
			QueueTimeout: int64(5 * time.Minute), Priority: 10},
		{Name: messages.DefaultWindowPool, MemorySize: 1 << 30, MaxMemorySize: 1 << 30, PlannedConcurrency: 4,
			QueueTimeout: int64(5 * time.Minute)},
	}
}

// poolStore keeps pool configurations in a KV, one JSON PoolConfig per key
// (the pool's name), with the ID of the request that created the pool
// ("request_id", absent for the defaults and for pools created without one).
type poolStore struct {
	kv KV
}

// storedPool is a pool's value in the KV.
type storedPool struct {
	messages.PoolConfig
	RequestID string `json:"request_id,omitempty"`
}

// load returns the stored pools, first creating any of defaults missing.
func (s poolStore) load(ctx context.Context, defaults []messages.PoolConfig) ([]messages.PoolConfig, error) {
	for _, d := range defaults {
		data, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		if _, err := s.kv.Create(ctx, d.Name, data); err != nil && !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("pools: create default %s: %w", d.Name, err)
		}
	}
	keys, err := s.kv.Keys(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("pools: list: %w", err)
	}
	var out []messages.PoolConfig
	for _, k := range keys {
		cfg, _, err := s.get(ctx, k)
		if errors.Is(err, ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, cfg)
	}
	return out, nil
}

func (s poolStore) get(ctx context.Context, name string) (messages.PoolConfig, uint64, error) {
	p, rev, err := s.getStored(ctx, name)
	return p.PoolConfig, rev, err
}

func (s poolStore) getStored(ctx context.Context, name string) (storedPool, uint64, error) {
	data, rev, err := s.kv.Get(ctx, name)
	if err != nil {
		return storedPool{}, 0, fmt.Errorf("pools: read %s: %w", name, err)
	}
	var p storedPool
	if err := json.Unmarshal(data, &p); err != nil {
		return storedPool{}, 0, fmt.Errorf("pools: decode %s at revision %d: %w", name, rev, err)
	}
	if err := p.Validate(); err != nil {
		return storedPool{}, 0, fmt.Errorf("pools: stored pool %s: %w", name, err)
	}
	return p, rev, nil
}

// create stores a new pool made by request requestID (may be empty).
func (s poolStore) create(ctx context.Context, cfg messages.PoolConfig, requestID string) error {
	data, err := json.Marshal(storedPool{PoolConfig: cfg, RequestID: requestID})
	if err != nil {
		return err
	}
	if _, err := s.kv.Create(ctx, cfg.Name, data); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("create pool %s: %w", cfg.Name, ErrPoolExists)
		}
		return fmt.Errorf("pools: create %s: %w", cfg.Name, err)
	}
	return nil
}

// alter applies req with compare-and-set and returns the new configuration.
func (s poolStore) alter(ctx context.Context, req *messages.AlterPoolRequest) (messages.PoolConfig, error) {
	for range 32 {
		p, rev, err := s.getStored(ctx, req.Name)
		if errors.Is(err, ErrKeyNotFound) {
			return messages.PoolConfig{}, fmt.Errorf("alter pool %s: %w", req.Name, ErrUnknownPool)
		}
		if err != nil {
			return messages.PoolConfig{}, err
		}
		cfg := req.Apply(p.PoolConfig)
		if err := cfg.Validate(); err != nil {
			return messages.PoolConfig{}, fmt.Errorf("alter pool %s: %w: %v", req.Name, ErrInvalid, err)
		}
		p.PoolConfig = cfg
		data, err := json.Marshal(p)
		if err != nil {
			return messages.PoolConfig{}, err
		}
		if _, err := s.kv.Update(ctx, cfg.Name, data, rev); errors.Is(err, ErrConflict) {
			continue
		} else if err != nil {
			return messages.PoolConfig{}, fmt.Errorf("pools: write %s: %w", cfg.Name, err)
		}
		return cfg, nil
	}
	return messages.PoolConfig{}, fmt.Errorf("alter pool %s: %w", req.Name, ErrConflict)
}
