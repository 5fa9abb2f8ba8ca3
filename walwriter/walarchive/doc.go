// Package walarchive copies a WAL's sealed segments and its checkpoints to
// an object store (package columnar/store), deletes what its retention
// lets go, and restores a WAL directory from that copy. It follows litestream's model: the local WAL,
// written with fdatasync, stays the durable write path; the bucket is its
// disaster copy, made in the background.
//
// # Format
//
// The archive of one WAL is a prefix of the store (the walwriter's
// --archive-prefix, by default wal/<host name>/). LSNs in keys are 20
// decimal digits, as in segment names:
//
//	<prefix>segments/<first LSN>/<first LSN>.wal   a sealed segment, byte for byte (see package walwriter)
//	<prefix>checkpoints/<LSN>/CHECKPOINT           a checkpoint file, uploaded after the segment holding its record
//	<prefix>CHECKPOINT                             the newest checkpoint file, put after its copy under checkpoints/
//
// For example, a WAL of segments 1 and 4711 with checkpoints at 3000 and
// 5200:
//
//	wal/db1/segments/00000000000000000001/00000000000000000001.wal
//	wal/db1/segments/00000000000000004711/00000000000000004711.wal
//	wal/db1/checkpoints/00000000000000003000/CHECKPOINT
//	wal/db1/checkpoints/00000000000000005200/CHECKPOINT
//	wal/db1/CHECKPOINT                             (LSN 5200)
//
// The checkpoints under checkpoints/ are the archive's restore points; each
// segment and each checkpoint has a prefix of its own because a store
// deletes whole prefixes only (store.Store.DeletePrefix), and retention
// deletes them one by one.
//
// The first layout, written before retention, held the WAL directory's
// files under their own names: <prefix><first LSN>.wal and
// <prefix>CHECKPOINT alone. It is still read: Restore takes segments of
// both layouts, and an archiver continuing such an archive leaves its
// segments where they are (a shorter copy is replaced under its own key),
// writes new ones under segments/, and puts a copy of each checkpoint it
// uploads under checkpoints/ (and of CHECKPOINT's, when that is the local
// checkpoint). A first-layout segment that retention lets go has no prefix
// of its own to delete: it is emptied (a zero-byte object), and Restore and
// the archiver skip empty segment objects, which only ever precede the
// others.
//
// # Archiving
//
// An Archiver watches its WAL (WAL.Changed) and, on each change and every
// Options.Interval, uploads each sealed segment (WAL.Segments) the bucket
// lacks, oldest first, then the checkpoint file once the segment holding
// the checkpoint record is archived. It lists the prefix once, on its first
// pass, so segments sealed while it was down (or while the store was) are
// uploaded then; after that it keeps what the bucket holds in memory,
// updated by its own uploads, and lists again only after a failed pass (a
// failed upload may have happened after all). The segment being written is
// not archived: the bucket's copy lags the WAL by at most that segment plus
// the sealed segments still queued (the lag). On a clean stop the WAL's
// Close cuts that segment after its last durable batch and seals it, and
// one more pass (Sync) uploads it and the checkpoint: the bucket then holds
// every acknowledged record. The next Open finds the segment as it was cut,
// so its archived copy is the same file. A failed listing or upload is
// logged and retried with backoff (Options.MinBackoff doubling up to
// Options.MaxBackoff); the WAL never waits for the store. While archiving,
// WAL.RemoveObsoleteSegments keeps every segment not yet archived.
//
// A segment already in the bucket under its name with another size is
// compared with the local one: recovery cuts the preallocated zeros off the
// segment it continues from, so the archived copy may be longer with the
// same records. The first bytes of both must be equal; a shorter archived
// copy is replaced, a longer one kept. Different bytes mean the prefix holds
// another WAL's archive, or the segment was repaired (cut) after it was
// archived: the archiver leaves the archived copy, uploads nothing more and
// logs why (give each WAL a prefix of its own).
//
// # Retention
//
// Without retention (Options.RetainCheckpoints 0) nothing is ever deleted
// from the bucket. With it, after each pass the archiver keeps the
// RetainCheckpoints newest checkpoints under checkpoints/, and also every
// one whose copy was put less than RetainAge ago (time since the upload,
// by the store's modification time after a restart); whichever keeps more.
// CHECKPOINT's checkpoint is always kept. A restore from a kept checkpoint
// needs the segment holding its record and every segment after it, so what
// goes is: first the copies of the checkpoints older than the oldest kept
// one, then, oldest first, the segments wholly before the segment holding
// that oldest kept checkpoint's record. Anything a restore from a kept
// checkpoint reads stays, and what remains is always a contiguous run of
// segments, even when a deletion fails half way (the next pass does the
// rest). Segments below that line are not uploaded again, and the local
// WAL's RemoveObsoleteSegments may remove them. A new archive (an empty
// prefix) starts at the segment holding the local checkpoint, when that
// segment is sealed: the segments before it would be deleted as soon as
// the checkpoint is up.
//
// # Restoring
//
// Restore (strata wal restore) downloads the archive into an empty
// directory, each file under a temporary name, synced, renamed and the
// directory synced, the checkpoint file last; then reads the whole WAL with
// walwriter.Verify. By default it restores every segment and the newest
// checkpoint (CHECKPOINT, or a newer copy under checkpoints/ whose
// CHECKPOINT put was cut short). RestoreOptions.At (strata wal restore
// --at LSN) restores the WAL as it was at an older checkpoint the archive
// holds: that checkpoint file and the segments up to the one holding its
// record, cut after that record. A segment retention deletes while a
// restore runs is skipped with those before it, as long as it precedes the
// segment holding the restored checkpoint. A damaged object stops it with
// an error naming the object. A newest segment cut at a record boundary
// cannot be told from a shorter one; every other cut shows as a gap in the
// LSNs.
package walarchive
