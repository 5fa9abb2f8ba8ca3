package walwriter

import (
	"sync/atomic"
	"time"
)

// SyncStats describe one write and fdatasync, as given to Options.OnSync.
type SyncStats struct {
	// Records is the updates it made durable: a group commit's batch. It is
	// 0 for the first part of a batch split across two segments (the
	// updates are counted with the second part).
	Records int
	Bytes   int           // bytes written
	Sync    time.Duration // the fdatasync alone
}

// Stats are a WAL's counters since Open.
type Stats struct {
	Records     uint64 // data records written
	FullImages  uint64 // of which full row images
	Deltas      uint64 // of which deltas
	Checkpoints uint64
	// Bytes is every byte of record written (data records and the
	// definitions they need); segment headers and preallocation excluded.
	Bytes uint64
	// FullImageBytes is what Bytes would have been had every data record
	// carried a full image.
	FullImageBytes uint64
	Fsyncs         uint64
	Batches        uint64
	Segments       uint64 // segments started
	Duplicates     uint64 // updates dropped because their event ID was already written
	Rejected       map[string]uint64
	// WriteFailures counts the times a write, sync or segment creation
	// failed and the WAL stopped writing; Recoveries the times it wrote
	// again after one.
	WriteFailures uint64
	Recoveries    uint64
	LastLSN       LSN
	CheckpointLSN LSN
}

type statCounters struct {
	records, fullImages, deltas, checkpoints atomic.Uint64
	bytes, fullImageBytes                    atomic.Uint64
	fsyncs, batches, segments, duplicates    atomic.Uint64
	lastLSN, checkpointLSN                   atomic.Uint64
	writeFailures, recoveries                atomic.Uint64
	rejected                                 map[string]*atomic.Uint64 // fixed keys, set in Open
}

// Stats returns a snapshot of the WAL's counters.
func (w *WAL) Stats() Stats {
	c := &w.stats
	s := Stats{
		Records:        c.records.Load(),
		FullImages:     c.fullImages.Load(),
		Deltas:         c.deltas.Load(),
		Checkpoints:    c.checkpoints.Load(),
		Bytes:          c.bytes.Load(),
		FullImageBytes: c.fullImageBytes.Load(),
		Fsyncs:         c.fsyncs.Load(),
		Batches:        c.batches.Load(),
		Segments:       c.segments.Load(),
		Duplicates:     c.duplicates.Load(),
		LastLSN:        LSN(c.lastLSN.Load()),
		CheckpointLSN:  LSN(c.checkpointLSN.Load()),
		Rejected:       make(map[string]uint64, len(c.rejected)),
		WriteFailures:  c.writeFailures.Load(),
		Recoveries:     c.recoveries.Load(),
	}
	for reason, n := range c.rejected {
		s.Rejected[reason] = n.Load()
	}
	return s
}
