// Package merger is strata's mergeout: it merges K sorted containers of one
// projection into one sorted container, within a memory grant, fast whatever
// the table's width and however small the grant.
//
// # Plans
//
// Merge picks one of three plans from the number of inputs K, the columns and
// their decoded block sizes, and the grant:
//
//   - horizontal: every column of every input fits at once (one decoded block
//     each). The sort-key columns are merged with a loser tree into a
//     row-source stream kept in memory; then each worker takes a fixed share
//     of the other columns, opens all of them and gathers them in one pass
//     over the stream.
//   - vertical: only some columns fit. The sort-key columns are merged first,
//     writing the key columns of the output and the row-source stream (which
//     input each output row comes from), spilled to a file in Options.TempDir
//     when it does not fit beside the gathers. Then the other columns are
//     gathered one column per worker, as many workers as the grant allows,
//     each replaying the stream; a finished column's last block, footer and
//     fsync run beside the next gather.
//   - passes: even one column of all K inputs does not fit. Groups of
//     consecutive inputs are merged into intermediate containers (in
//     Options.TempDir), which are then merged, until one container remains.
//
// In every plan each input column file is opened once per level and each of
// its blocks decoded once: a gather holds one block per input, moves on when
// the block is used up, and releases it. A gather expands the row-source
// stream into a selection vector per output block (the input of each row)
// and moves values with one typed loop per column type, since runs in merges
// of overlapping inputs are mostly one row long.
//
// A grant below the minimum of the cheapest plan is a *GrantError, returned
// before any output is written.
//
// Every Arrow buffer the merge holds is allocated through a columnar.Budget
// whose limit is the grant; Go-side buffers (normalized keys, the row-source
// stream, read buffers) are counted with Budget.Reserve. Stats.PeakBytes is
// the budget's peak.
//
// Equal keys keep input order: container order first, then row order, so the
// output equals a stable sort of the inputs concatenated in order.
//
// NewMergeReader exposes the k-way merge as a stream of record batches, for
// callers (the windower's spill merge) that consume merged rows themselves.
//
// # Format
//
// The row-source stream (held in memory, or spilled to a temporary file named
// strata-rowsource-*.srs when larger than its share of the grant) is:
//
//	stream  = "SRS1" chunk*
//	chunk   = uvarint(len) payload[len] crc32c(payload) (4 bytes, little endian)
//	payload = run+
//	run     = uvarint(input) uvarint(count)
//
// input is the input's position in the merge (0-based), count >= 1 rows; a
// chunk's payload is at most 64KiB plus one run. Adjacent runs of the same
// input are coalesced by the writer (a reader must not rely on it). The
// stream lives only for the duration of one merge.
package merger
