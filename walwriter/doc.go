// Package walwriter is strata's write-ahead log for row updates. It logs
// each update as a record carrying either the full new row or a delta
// against the previous version of the same key, groups records from many
// producers into one write and one fdatasync, drops duplicate event IDs (a
// redelivered event is written once, across restarts), recovers from a torn
// tail, and reads the log back with deltas applied.
//
// Callers register tables (name and column types), then call Append (blocks
// until durable) or AppendAsync (reports durability through a callback) from
// as many goroutines as they like. An update whose row does not fit its
// table, that is too large, or whose table is unknown is rejected with a
// *RejectError and counted in Stats; nothing of it is written.
//
// # Format
//
// A WAL is a directory of segment files and an optional checkpoint file.
//
// Segments are named by the LSN of their first record, as 20 decimal digits
// plus ".wal" (00000000000000000001.wal). Each is created preallocated to
// the segment size (64MiB by default) under a temporary name, synced,
// renamed and the directory synced, so a segment with its final name always
// has a whole header. A segment starts with a 32-byte header:
//
//	magic "STRATAWL" | version u32 (1) | reserved u32 | first LSN u64 | CRC-32C of the previous 24 bytes u32 | zero u32
//
// (integers little-endian), followed by records back to back. The records
// end at the end of the file or at a zero byte where a record length would
// be (the preallocated space). When the WAL is opened again the last
// segment is cut at its last good record and appends continue in a new
// segment, so a segment is at most the segment size.
//
// A record is framed as
//
//	length uvarint | CRC-32C of body u32 LE | body (length bytes)
//
// All varints are unsigned LEB128 (encoding/binary's Uvarint). The first
// body byte holds the record kind in its low 4 bits and flags above:
//
//	1 full        data record, payload is the full row image
//	2 delta       data record, payload is a delta against the key's previous image
//	3 table       defines a segment-local table id
//	4 producer    defines a segment-local event ID prefix id
//	5 checkpoint  a checkpoint
//	6 delete      data record deleting its key: no payload
//	flag 0x10     (data records) the event ID is in compact form
//	flag 0x20     (data records) a version follows the key; always set on deletes
//
// Data and checkpoint records are numbered by LSN: 1, 2, 3, ... with no
// gaps, continuing across segments. Definitions carry no LSN. Bodies:
//
//	table:      kind | id uvarint | name length uvarint, name | column count uvarint | one type byte per column
//	producer:   kind | id uvarint | prefix length uvarint, prefix
//	checkpoint: kind | LSN delta uvarint
//	data:       kind | LSN delta uvarint | event ID | table id uvarint | key length uvarint, key | [version uvarint] | payload
//
// The version (flag 0x20) is the change's version, the UPDATES stream
// sequence of its event, so that changes read back from the WAL are applied
// in the order their events were published; records written before
// versions existed have none (version 0). A delete has no payload, and the
// record of its key after it is a full image.
//
// The LSN delta is LSN - previous LSN - 1 (0 for consecutive records); the
// previous LSN of a segment's first record is the header's first LSN - 1.
// Table ids are 0, 1, 2, ... in order of definition within the segment; a
// table is defined before its first record in each segment (column types,
// the messages.RowType of the row encoding, one byte each: 1 int64,
// 2 float64, 3 bool, 4 text, 5 bytes, 6 timestamp, 7 date).
//
// An event ID is either raw (length uvarint, bytes) or, with flag 0x10,
// compact: producer id uvarint and the zigzag varint of sequence - the
// producer's previous sequence in this segment (0 before its first). The
// compact form is used for IDs shaped prefix + decimal number without
// leading zeros ("orders-7-1234"), whose prefix has a producer definition;
// a prefix is defined the second time it is seen in a segment, so IDs that
// never repeat a prefix (UUIDs) stay raw. The ID is prefix + decimal sequence.
//
// A full row image is, per column in table order, uvarint 0 for NULL or
// uvarint(length+1) followed by the value's bytes. It is byte for byte the
// canonical row encoding of the messages package.
//
// Delta payload, against the previous image of the same key (the last
// record of that key; it may be in an earlier segment):
//
//	leading unchanged columns uvarint | trailing unchanged columns uvarint | per column in between:
//	  0            unchanged
//	  1            NULL
//	  2            edit: prefix uvarint | suffix uvarint | middle length uvarint | ops
//	  n >= 3       the whole new value, n-3 bytes, follows
//
// An edit keeps the first prefix and last suffix bytes of the old value and
// produces the middle from ops until middle length bytes are made: an op
// uvarint x with x&1 == 0 is a literal of x>>1 bytes that follow; with
// x&1 == 1 a copy of (x>>1)+4 bytes from the old value at offset uvarint.
// A delta is written only when it is shorter than the full image. The
// writer keeps a bounded cache of each key's last image; a key not in it
// (evicted, or first seen since the WAL was opened) and the first record of
// a key after a checkpoint are full images. So a delta's base is always
// after the last checkpoint before it, and replay from a checkpoint needs
// nothing before it. The writer checkpoints by itself every
// Options.CheckpointBytes of records (4 segments by default), which bounds
// both the reader's memory (the images of keys updated since the last
// checkpoint) and how far back a reader starts.
//
// The checkpoint file CHECKPOINT (24 bytes and a CRC, replaced atomically
// after the checkpoint record is durable):
//
//	magic "STRATACK" | version u32 | reserved u32 | checkpoint LSN u64 | CRC-32C of the previous 24 bytes u32
//
// A segment is sealed once nothing more is ever written to it: it was
// closed full after its last batch was durable, Close cut it after its
// last durable batch (a clean close of a segment holding records), or Open
// found it on disk and continued in a new segment (Segments reports which
// are). Sealed segments and the checkpoint file are what package
// walarchive copies to an object store; the segment being written is not
// (until a clean Close seals it).
//
// Segments whose records all precede the checkpoint LSN may be removed
// (RemoveObsoleteSegments; an archiver keeps those not yet archived). A
// reader asked for an LSN at or after the checkpoint starts at the
// checkpoint's segment; deltas before the first checkpoint of a WAL whose
// older segments were removed cannot be resolved (ErrNoBase).
//
// Recovery: on Open the last segment is read up to its first record that
// is torn or fails its CRC; everything from there to the last non-zero
// byte is copied to <segment>.broken (numbered if one exists), the segment
// is truncated to its good records, and the next LSN and the dedup window
// (the last DedupWindow event IDs) are rebuilt from the WAL.
//
// # Durability
//
// Append returns, and AppendAsync's callback runs, only after the record's
// batch was written and fdatasync'ed.
//
// # Failures
//
// A failed write, fdatasync or segment creation (a full disk, an I/O error)
// does not fail the appends: they wait, Health reports the failure (it
// wraps the cause, such as syscall.ENOSPC), and the WAL retries with backoff
// (10ms, doubling up to Options.RetryBackoff) until it can write again,
// without a restart. Appends made meanwhile queue behind them. Open too
// succeeds when the disk has no room for a new segment, in that state.
//
// What a failed group commit leaves on disk is not trusted: part of the
// batch may be in the segment, and after a failed fsync Linux may have
// dropped the dirty pages and marked them clean, so the bytes read back fine
// from the page cache while a retried fsync succeeds without writing them
// (PostgreSQL's "fsyncgate", 2018). So the WAL never retries an fsync and
// never rescans to decide what survived. It tracks the end of the last
// batch whose fdatasync succeeded and, to recover, closes the segment, cuts
// it back to that offset and syncs it, removes any segment started after
// it, rebuilds the next LSN and the dedup window from the disk as Open does
// (with an empty image cache, so no delta is based on a lost image), starts
// a new segment and writes every request that was not durable again. A
// request reported durable is never written twice, and one that was not
// durable is written once: its event ID is not in the rebuilt window unless
// its record is on disk.
//
// Closing a WAL that cannot write tries once more and then fails the
// pending appends with ErrFailed; their events were never durable.
//
// # Repair
//
// Open cuts a damaged tail of the last segment by itself. A damaged record
// in an older segment (or a damaged segment header) stops Open with an error
// that names the segment and offset: Repair (`strata wal repair DIR`) cuts
// each damaged segment at its first bad record, keeps the rest as
// <segment>.broken and reports the LSNs lost. Readers step over the gap of
// LSNs a repair leaves only where a .broken file shows it; deltas after it
// whose base image was lost cannot be resolved before the next checkpoint
// (ErrNoBase; Verify counts them as unresolved).
package walwriter
