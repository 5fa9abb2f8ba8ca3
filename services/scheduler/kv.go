package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/scheduler"
)

// bucketKV adapts a JetStream key-value bucket to scheduler.KV, mapping
// its errors onto the scheduler's sentinels. Each call is bounded by
// kvAttempt, and a call the cluster did not answer (no stream leader for a
// moment, a connection moving to another node) is scheduler.ErrUnavailable,
// which the scheduler tries again.
type bucketKV struct {
	kv jetstream.KeyValue
}

// kvAttempt bounds one call to the bucket: without it a request sent to a
// node that died waits out the caller's whole context.
const kvAttempt = natsutil.APIAttempt

// unavailable wraps err with scheduler.ErrUnavailable when it says the
// store did not answer rather than what it answered (natsutil.Unanswered);
// parent is the caller's context, whose own end is not the store's fault.
func unavailable(parent context.Context, err error) error {
	if natsutil.Unanswered(parent, err) {
		return fmt.Errorf("%w: %w", scheduler.ErrUnavailable, err)
	}
	return err
}

func (b bucketKV) Get(parent context.Context, key string) ([]byte, uint64, error) {
	ctx, cancel := context.WithTimeout(parent, kvAttempt)
	defer cancel()
	e, err := b.kv.Get(ctx, key)
	err = unavailable(parent, err)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("bucket %s key %q: %w", b.kv.Bucket(), key, scheduler.ErrKeyNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("bucket %s get %q: %w", b.kv.Bucket(), key, err)
	}
	return e.Value(), e.Revision(), nil
}

func (b bucketKV) Create(parent context.Context, key string, value []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(parent, kvAttempt)
	defer cancel()
	rev, err := b.kv.Create(ctx, key, value)
	return rev, b.mapWrite("create", key, unavailable(parent, err))
}

func (b bucketKV) Update(parent context.Context, key string, value []byte, last uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(parent, kvAttempt)
	defer cancel()
	rev, err := b.kv.Update(ctx, key, value, last)
	return rev, b.mapWrite("update", key, unavailable(parent, err))
}

func (b bucketKV) mapWrite(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("bucket %s %s %q: %v: %w", b.kv.Bucket(), op, key, err, scheduler.ErrConflict)
	default:
		return fmt.Errorf("bucket %s %s %q: %w", b.kv.Bucket(), op, key, err)
	}
}

func (b bucketKV) Delete(parent context.Context, key string) error {
	ctx, cancel := context.WithTimeout(parent, kvAttempt)
	defer cancel()
	if err := b.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("bucket %s delete %q: %w", b.kv.Bucket(), key, unavailable(parent, err))
	}
	return nil
}

func (b bucketKV) Keys(parent context.Context, prefix string) ([]string, error) {
	ctx, cancel := context.WithTimeout(parent, kvAttempt)
	defer cancel()
	keys, err := b.kv.Keys(ctx)
	err = unavailable(parent, err)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s keys: %w", b.kv.Bucket(), err)
	}
	out := keys[:0]
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// purgeDeletes removes, every interval, the delete markers of keys deleted
// more than olderThan before, with the history of those keys. Every job
// leaves one: its body's key in the catalog is created when the job is
// made and deleted when it ends, and a marker stays in the bucket's
// stream until purged.
func purgeDeletes(kv jetstream.KeyValue, interval, olderThan time.Duration, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if err := kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(olderThan)); err != nil && ctx.Err() == nil {
					log.Warn("purge delete markers", "bucket", kv.Bucket(), "err", err)
				}
			}
		}
	}
}
