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
	kv     jetstream.KeyValue
	stream jetstream.Stream // the bucket's stream: its subjects are the keys
}

// openBucket returns key-value bucket name of js as a scheduler.KV.
func openBucket(ctx context.Context, js jetstream.JetStream, name string) (bucketKV, error) {
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return bucketKV{}, fmt.Errorf("bucket %s: %w", name, err)
	}
	return bucketOf(ctx, js, kv)
}

// bucketOf returns kv, a bucket of js, as a scheduler.KV.
func bucketOf(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) (bucketKV, error) {
	stream, err := js.Stream(ctx, "KV_"+kv.Bucket())
	if err != nil {
		return bucketKV{}, fmt.Errorf("bucket %s: stream: %w", kv.Bucket(), err)
	}
	return bucketKV{kv: kv, stream: stream}, nil
}

// subjectPrefix is what the bucket's stream puts before each key.
func (b bucketKV) subjectPrefix() string { return "$KV." + b.kv.Bucket() + "." }

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
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A key deleted before is created over its delete marker, in two
		// steps (a create, then an update at the marker's revision); a
		// marker purged between them (purgeDeletes) fails both. A key with
		// no value is created once more.
		if _, gerr := b.kv.Get(ctx, key); errors.Is(gerr, jetstream.ErrKeyNotFound) {
			rev, err = b.kv.Create(ctx, key, value)
		}
	}
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

// Keys lists the keys from the subjects of the bucket's stream, which the
// server reports from one snapshot of its index. The list may hold keys
// deleted not long ago whose delete markers are not yet purged
// (purgeDeletes): callers read each key they list. jetstream's
// KeyValue.Keys is not used: it reads every key's latest entry with a
// consumer and stops once the entries it started with are read, so a key
// written while it runs (its entry read before is no longer the latest,
// and the new one comes after) is missed: a live catalog entry went
// missing from a listing while another request wrote it.
func (b bucketKV) Keys(parent context.Context, prefix string) ([]string, error) {
	ctx, cancel := context.WithTimeout(parent, kvAttempt)
	defer cancel()
	pre := b.subjectPrefix()
	info, err := b.stream.Info(ctx, jetstream.WithSubjectFilter(pre+">"))
	if err = unavailable(parent, err); err != nil {
		return nil, fmt.Errorf("bucket %s keys: %w", b.kv.Bucket(), err)
	}
	var out []string
	for subject := range info.State.Subjects {
		if k, ok := strings.CutPrefix(subject, pre); ok && strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Delete markers. A key deleted from a bucket leaves a marker in its
// stream, and every listing of the bucket's keys reads the markers as well
// as the live keys (about 4.5µs each on the embedded server). Every window
// query leaves two, its job body's and, once past --keep-results, an old
// result table's, so a bucket whose markers stayed for half an hour made
// each listing, and every query, slower with each query run before it.
// The markers serve only watchers, and nothing watches the catalog, so they
// are purged soon after they are made.
const (
	markerPurgeEvery = 5 * time.Second
	markerMinAge     = 5 * time.Second
)

// deleteMarker is a key whose latest entry is a delete or purge marker, at
// the marker's revision (its stream sequence).
type deleteMarker struct {
	key string
	rev uint64
}

// deleteMarkers lists the bucket's delete markers made more than olderThan
// before now.
func deleteMarkers(ctx context.Context, kv jetstream.KeyValue, olderThan time.Duration) ([]deleteMarker, error) {
	w, err := kv.WatchAll(ctx, jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	limit := time.Now().Add(-olderThan)
	var out []deleteMarker
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e := <-w.Updates():
			if e == nil {
				return out, nil // every key's latest entry has been seen
			}
			if op := e.Operation(); (op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge) && e.Created().Before(limit) {
				out = append(out, deleteMarker{e.Key(), e.Revision()})
			}
		}
	}
}

// purgeMarkers removes each marker and the history before it. A purge
// reaches only up to its marker's sequence, so a key written again after
// the markers were listed keeps its new value (jetstream's PurgeDeletes
// purges the whole subject).
func purgeMarkers(ctx context.Context, b bucketKV, markers []deleteMarker) error {
	for _, m := range markers {
		subject := b.subjectPrefix() + m.key
		if err := b.stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(m.rev+1)); err != nil {
			return fmt.Errorf("purge the delete marker of %q at revision %d: %w", m.key, m.rev, err)
		}
	}
	return nil
}

// purgeDeletes removes, every interval, the delete markers made more than
// olderThan before.
func purgeDeletes(b bucketKV, interval, olderThan time.Duration, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if err := purgeDeletesOnce(ctx, b, olderThan); err != nil && ctx.Err() == nil {
					log.Warn("purge delete markers", "bucket", b.kv.Bucket(), "err", err)
				}
			}
		}
	}
}

func purgeDeletesOnce(parent context.Context, b bucketKV, olderThan time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, time.Minute)
	defer cancel()
	markers, err := deleteMarkers(ctx, b.kv, olderThan)
	if err != nil {
		return err
	}
	return purgeMarkers(ctx, b, markers)
}
