package walwriter

import (
	"fmt"
	"log/slog"
	"time"
)

// Limits of the record format.
const (
	maxEventIDBytes = 1024
	maxKeyBytes     = 64 << 10
	// maxRowLimit bounds a decoded row whatever the writer's MaxRowBytes.
	maxRowLimit = 256 << 20
	// maxDedupWindow bounds Options.DedupWindow (ring positions are int32).
	maxDedupWindow = 1 << 30
)

// Options configures a WAL. The zero value of each field picks its default.
type Options struct {
	Logger *slog.Logger

	// Tables are the tables whose updates are accepted; more can be added
	// with RegisterTable.
	Tables []Table

	// SegmentSize is the size of each preallocated segment file. Default 64MiB.
	SegmentSize int64
	// MaxRowBytes bounds the full image of a row. Default 1MiB; at most a
	// quarter of SegmentSize.
	MaxRowBytes int

	// A batch (one write and one fdatasync) closes when it holds
	// MaxBatchRecords records or MaxBatchBytes bytes of row images, or when
	// BatchWindow has passed since its first record. With BatchWindow 0 (the
	// default) a batch takes whatever is queued when the previous sync ends,
	// which is the classic group commit.
	MaxBatchRecords int           // default 8192
	MaxBatchBytes   int           // default 8MiB
	BatchWindow     time.Duration // default 0

	// DeltaCacheBytes bounds the per-key last-image cache deltas are
	// computed against. Default 64MiB. A key not in the cache is logged as a
	// full image.
	DeltaCacheBytes int64
	// CheckpointBytes writes a checkpoint record after this many bytes of
	// records since the last one. A checkpoint empties the image cache, so it
	// bounds the memory a reader needs to apply deltas (every key updated
	// since the checkpoint) at the cost of one full image per key updated
	// after it. Default 4 x SegmentSize; negative: only explicit Checkpoint
	// calls.
	CheckpointBytes int64
	// DisableDelta logs every update as a full image.
	DisableDelta bool

	// DedupWindow is how many recent event IDs are remembered (and rebuilt
	// from the WAL on open) to drop duplicates. Default 1<<18 (262144);
	// each costs roughly 100 bytes of memory.
	DedupWindow int

	// RetryBackoff bounds the wait between attempts to write again after a
	// failed write or sync (see "Failures" in the package doc): the first
	// retry comes after 10ms, each later one waits twice as long, up to
	// RetryBackoff. Default 5s.
	RetryBackoff time.Duration

	// OnSync, if set, is called after every successful write and
	// fdatasync of a batch (or of the part of a batch that fills a
	// segment), from the goroutine that syncs: it must return at once. It
	// is for metrics (the walwriter's fsync latency and batch sizes).
	OnSync func(SyncStats)

	// Faults injects disk errors, for tests. nil in production.
	Faults *Faults
}

// Faults makes the WAL's disk fail, for tests of a full or failing disk.
// Each hook, when set, is called before its operation, from the WAL's
// goroutines.
type Faults struct {
	// Write is called before n bytes are written to segment seg at off. It
	// returns how many of them to write and, if not nil, the error the
	// write then fails with (a short write).
	Write func(seg string, off int64, n int) (int, error)
	// Sync is called before a segment is fdatasync'ed; an error fails the
	// sync, with the written bytes left in the page cache, as a real
	// fsync failure leaves them.
	Sync func(seg string) error
	// Create is called before a segment is created; an error fails it.
	Create func(seg string) error
}

func (o Options) withDefaults() (Options, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 64 << 20
	}
	if o.MaxRowBytes == 0 {
		o.MaxRowBytes = min(1<<20, int(o.SegmentSize/4))
	}
	if o.MaxBatchRecords == 0 {
		o.MaxBatchRecords = 8192
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = 8 << 20
	}
	if o.DeltaCacheBytes == 0 {
		o.DeltaCacheBytes = 64 << 20
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = 4 * o.SegmentSize
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = 1 << 18
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 5 * time.Second
	}
	switch {
	case o.SegmentSize < 64<<10:
		return o, fmt.Errorf("walwriter: segment size %d below the 64KiB minimum", o.SegmentSize)
	case o.MaxRowBytes < 1 || int64(o.MaxRowBytes) > o.SegmentSize/4:
		return o, fmt.Errorf("walwriter: max row bytes %d: want 1 to a quarter of the %d-byte segment", o.MaxRowBytes, o.SegmentSize)
	case o.MaxRowBytes > maxRowLimit:
		return o, fmt.Errorf("walwriter: max row bytes %d exceeds %d", o.MaxRowBytes, maxRowLimit)
	case o.MaxBatchRecords < 1 || o.MaxBatchBytes < 1 || o.BatchWindow < 0:
		return o, fmt.Errorf("walwriter: batch limits must be positive")
	case o.RetryBackoff < 0:
		return o, fmt.Errorf("walwriter: retry backoff must not be negative")
	case o.DeltaCacheBytes < 0 || o.DedupWindow < 0:
		return o, fmt.Errorf("walwriter: cache and dedup sizes must not be negative")
	case o.DedupWindow > maxDedupWindow:
		return o, fmt.Errorf("walwriter: dedup window %d exceeds %d", o.DedupWindow, maxDedupWindow)
	}
	// A record must always fit in an empty segment.
	if bound := segmentHeaderSize + 4*maxRecordHeader + 2*maxEventIDBytes + maxKeyBytes + 2*maxTableName + 2*maxColumns + 64 + o.MaxRowBytes; int64(bound) > o.SegmentSize {
		return o, fmt.Errorf("walwriter: segment size %d too small for %d-byte rows", o.SegmentSize, o.MaxRowBytes)
	}
	return o, nil
}
