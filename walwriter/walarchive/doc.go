// Package walarchive copies a WAL's sealed segments and its checkpoint file
// to an object store (package columnar/store), and restores a WAL
// directory from that copy. It follows litestream's model: the local WAL,
// written with fdatasync, stays the durable write path; the bucket is its
// disaster copy, made in the background.
//
// # Format
//
// The archive of one WAL is a prefix of the store (the walwriter's
// --archive-prefix, by default wal/<host name>/) holding the WAL
// directory's files under their own names:
//
//	<prefix>00000000000000000001.wal   sealed segments, byte for byte (see package walwriter)
//	<prefix>00000000000000004711.wal
//	<prefix>CHECKPOINT                 the checkpoint file, uploaded after the segment holding its record
//
// So the archive is itself a WAL directory (file:///DIR names one), and a
// restore is a download of its files.
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
// logs why (give each WAL a prefix of its own). It never deletes anything
// from the bucket.
//
// # Restoring
//
// Restore (strata wal restore) downloads the archive into an empty
// directory, each file under a temporary name, synced, renamed and the
// directory synced, the checkpoint file last; then reads the whole WAL with
// walwriter.Verify. A damaged object stops it with an error naming the
// object. A newest segment cut at a record boundary cannot be told from a
// shorter one; every other cut shows as a gap in the LSNs.
package walarchive
