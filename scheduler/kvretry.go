package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable is wrapped by a KV's error when the store did not answer
// (a timeout, no responders, no connection): a write may or may not have
// been applied. A KV adapter over a network store should bound each call
// (say, a few seconds) and map such failures to it.
var ErrUnavailable = errors.New("scheduler: key-value store unavailable")

// kvPatience is how long a catalog or pool operation keeps trying a store
// that does not answer: a JetStream stream elects a new leader within a few
// seconds of losing one.
const kvPatience = 20 * time.Second

// retryingKV is a KV that tries again, with backoff and for up to patience,
// an operation the store did not answer, and settles a write whose outcome
// is unknown by reading the key back: the value it meant to write there
// means the write landed. That is sound because the scheduler is the
// catalog's only writer; a write that did not land is tried again, and any
// other value is a conflict as usual.
type retryingKV struct {
	kv       KV
	patience time.Duration
}

func withRetries(kv KV) KV {
	if r, ok := kv.(retryingKV); ok {
		return r
	}
	return retryingKV{kv: kv, patience: kvPatience}
}

// retry runs op until it returns something other than ErrUnavailable, ctx
// ends, or patience runs out; it returns op's last error.
func (r retryingKV) retry(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(r.patience)
	backoff := 50 * time.Millisecond
	for {
		err := op()
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(backoff, time.Until(deadline))):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (r retryingKV) Get(ctx context.Context, key string) (value []byte, revision uint64, err error) {
	err = r.retry(ctx, func() error {
		value, revision, err = r.kv.Get(ctx, key)
		return err
	})
	return value, revision, err
}

func (r retryingKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := r.kv.Create(ctx, key, value)
	if !errors.Is(err, ErrUnavailable) {
		return rev, err
	}
	err = r.retry(ctx, func() error {
		cur, crev, gerr := r.kv.Get(ctx, key)
		switch {
		case gerr == nil && bytes.Equal(cur, value):
			rev = crev // the create landed
			return nil
		case gerr == nil:
			return fmt.Errorf("create %q: %w", key, ErrConflict)
		case !errors.Is(gerr, ErrKeyNotFound):
			return gerr
		}
		rev, err = r.kv.Create(ctx, key, value)
		if errors.Is(err, ErrConflict) {
			// Created meanwhile, by this create or another: read it again.
			return fmt.Errorf("create %q: %w", key, ErrUnavailable)
		}
		return err
	})
	return rev, err
}

func (r retryingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := r.kv.Update(ctx, key, value, last)
	if !errors.Is(err, ErrUnavailable) {
		return rev, err
	}
	err = r.retry(ctx, func() error {
		cur, crev, gerr := r.kv.Get(ctx, key)
		switch {
		case errors.Is(gerr, ErrKeyNotFound):
			return fmt.Errorf("update %q: deleted meanwhile: %w", key, ErrConflict)
		case gerr != nil:
			return gerr
		case crev == last: // it did not land
			rev, err = r.kv.Update(ctx, key, value, last)
			return err
		case bytes.Equal(cur, value):
			rev = crev // it landed
			return nil
		}
		return fmt.Errorf("update %q: revision %d, not %d: %w", key, crev, last, ErrConflict)
	})
	return rev, err
}

func (r retryingKV) Delete(ctx context.Context, key string) error {
	return r.retry(ctx, func() error { return r.kv.Delete(ctx, key) })
}

func (r retryingKV) Keys(ctx context.Context, prefix string) (keys []string, err error) {
	err = r.retry(ctx, func() error {
		keys, err = r.kv.Keys(ctx, prefix)
		return err
	})
	return keys, err
}
