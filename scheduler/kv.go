package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// KV is the key-value store the catalog and the pools live in: a JetStream
// key-value bucket in production, MemKV in tests. Every write that depends on
// a read names the revision it read, so concurrent writers cannot lose each
// other's changes.
type KV interface {
	// Get returns the value and revision of key, or ErrKeyNotFound.
	Get(ctx context.Context, key string) (value []byte, revision uint64, err error)
	// Create writes key only if it does not exist, else ErrConflict.
	Create(ctx context.Context, key string, value []byte) (revision uint64, err error)
	// Update writes key only if its revision is still last, else ErrConflict.
	Update(ctx context.Context, key string, value []byte, last uint64) (revision uint64, err error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Keys lists the keys with the given prefix, sorted.
	Keys(ctx context.Context, prefix string) ([]string, error)
}

var (
	// ErrKeyNotFound is returned by KV.Get for a missing key.
	ErrKeyNotFound = errors.New("scheduler: key not found")
	// ErrConflict is returned by KV.Create and KV.Update when another writer
	// got there first.
	ErrConflict = errors.New("scheduler: compare-and-set conflict")
)

// MemKV is an in-memory KV with the same compare-and-set semantics as a
// JetStream bucket, and its limit on a value's size: the default NATS
// max_payload (MemKVMaxValue). It is safe for concurrent use.
type MemKV struct {
	mu   sync.Mutex
	rev  uint64 // last revision handed out, bucket-wide like JetStream's sequence
	data map[string]memEntry
}

type memEntry struct {
	value []byte
	rev   uint64
}

// MemKVMaxValue is the largest value MemKV stores: 1 MiB, the default
// max_payload of a NATS server, which bounds a JetStream bucket's values.
const MemKVMaxValue = 1 << 20

func checkValueSize(op, key string, value []byte) error {
	if len(value) > MemKVMaxValue {
		return fmt.Errorf("%s %q: %d bytes: maximum payload exceeded (%d)", op, key, len(value), MemKVMaxValue)
	}
	return nil
}

// NewMemKV returns an empty MemKV.
func NewMemKV() *MemKV { return &MemKV{data: map[string]memEntry{}} }

func (m *MemKV) Get(_ context.Context, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.data[key]
	if !ok {
		return nil, 0, fmt.Errorf("get %q: %w", key, ErrKeyNotFound)
	}
	return append([]byte(nil), e.value...), e.rev, nil
}

func (m *MemKV) Create(_ context.Context, key string, value []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.data[key]; ok {
		return 0, fmt.Errorf("create %q: exists: %w", key, ErrConflict)
	}
	if err := checkValueSize("create", key, value); err != nil {
		return 0, err
	}
	m.rev++
	m.data[key] = memEntry{value: append([]byte(nil), value...), rev: m.rev}
	return m.rev, nil
}

func (m *MemKV) Update(_ context.Context, key string, value []byte, last uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.data[key]
	if !ok || e.rev != last {
		return 0, fmt.Errorf("update %q at revision %d: %w", key, last, ErrConflict)
	}
	if err := checkValueSize("update", key, value); err != nil {
		return 0, err
	}
	m.rev++
	m.data[key] = memEntry{value: append([]byte(nil), value...), rev: m.rev}
	return m.rev, nil
}

func (m *MemKV) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, key)
	return nil
}

func (m *MemKV) Keys(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}
