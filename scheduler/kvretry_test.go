package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"
)

// lossyKV is a MemKV whose next writes are lost in the network: before
// applying (the request lost) or after (the reply lost), each reported as
// ErrUnavailable; its next reads fail the same way.
type lossyKV struct {
	*MemKV
	loseRequests, loseReplies, failReads int
}

func (l *lossyKV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	if l.failReads > 0 {
		l.failReads--
		return nil, 0, ErrUnavailable
	}
	return l.MemKV.Get(ctx, key)
}

func (l *lossyKV) write(do func() (uint64, error)) (uint64, error) {
	if l.loseRequests > 0 {
		l.loseRequests--
		return 0, ErrUnavailable
	}
	rev, err := do()
	if err == nil && l.loseReplies > 0 {
		l.loseReplies--
		return 0, ErrUnavailable
	}
	return rev, err
}

func (l *lossyKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return l.write(func() (uint64, error) { return l.MemKV.Create(ctx, key, value) })
}

func (l *lossyKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	return l.write(func() (uint64, error) { return l.MemKV.Update(ctx, key, value, last) })
}

func TestRetryingKVSettlesUnknownWrites(t *testing.T) {
	ctx := context.Background()
	for name, lossy := range map[string]*lossyKV{
		"request lost":           {loseRequests: 2},
		"reply lost":             {loseReplies: 1},
		"reply lost, reads fail": {loseReplies: 1, failReads: 3},
	} {
		t.Run(name, func(t *testing.T) {
			lossy.MemKV = NewMemKV()
			kv := retryingKV{kv: lossy, patience: 5 * time.Second}
			losses := *lossy
			rev, err := kv.Create(ctx, "k", []byte("v1"))
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			// The same losses again for the update.
			lossy.loseRequests, lossy.loseReplies, lossy.failReads = losses.loseRequests, losses.loseReplies, losses.failReads
			rev2, err := kv.Update(ctx, "k", []byte("v2"), rev)
			if err != nil || rev2 <= rev {
				t.Fatalf("update: revision %d, %v", rev2, err)
			}
			v, r, err := lossy.MemKV.Get(ctx, "k")
			if err != nil || string(v) != "v2" || r != rev2 {
				t.Fatalf("stored %q at %d (%v), want v2 at %d", v, r, err, rev2)
			}
		})
	}
	// Another value there is a conflict, as without the losses.
	mem := NewMemKV()
	lossy := &lossyKV{MemKV: mem, loseRequests: 1}
	kv := retryingKV{kv: lossy, patience: time.Second}
	rev, _ := mem.Create(ctx, "k", []byte("theirs"))
	if _, err := kv.Create(ctx, "k", []byte("mine")); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over another value: %v", err)
	}
	lossy.loseRequests = 1
	mem.Update(ctx, "k", []byte("theirs again"), rev)
	if _, err := kv.Update(ctx, "k", []byte("mine"), rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("update over another writer's: %v", err)
	}
	// A store that never answers gives up after its patience.
	lossy.loseRequests, lossy.failReads = 1000, 1000
	kv.patience = 200 * time.Millisecond
	start := time.Now()
	if _, _, err := kv.Get(ctx, "k"); !errors.Is(err, ErrUnavailable) || time.Since(start) > 2*time.Second {
		t.Fatalf("get from a store that never answers: %v after %v", err, time.Since(start))
	}
}
