// Package merger is strata's mergeout: it merges K sorted containers of one
// projection into one sorted container, within a memory grant, fast whatever
// the table's width and however small the grant.
//
// # Plans
//
// A merge has two phases. The key merge merges the sort-key columns of the
// K inputs with a loser tree, writes the output's key columns, and records
// the row-source stream (which input each output row comes from), in memory
// or spilled to a file in Options.TempDir. The gathers then write the other
// columns: the columns are cut into groups of consecutive columns of about
// equal decoded bytes, and each group is gathered in one pass over the row
// source, the groups in schema order, as many passes at once as there are
// workers. Merge picks one of three plans:
//
//   - horizontal: one group per worker, the row-source stream in memory:
//     every column of every input is open at once.
//   - vertical: more groups than workers (down to one column each), handed
//     to the workers as they finish the previous one; a finished column's
//     last block, footer and fsync run beside the next pass, or after the
//     last one when the columns' tails fit. A vertical plan may overlap the
//     key merge with the gathers: the key merge then also fills a selection
//     vector of every row (the input of each output row) and publishes it
//     once per output block, all workers but one gather columns from the
//     rows published so far, one block behind it, and the last worker joins
//     them when the key merge is done. The memory of that phase (the key
//     merge, its stream, the selection vector and the early gathers) is
//     part of the plan's estimate; Stats.Overlapped reports it.
//   - passes: even one column of all K inputs does not fit. Groups of
//     consecutive inputs are merged into intermediate containers (in
//     Options.TempDir), which are then merged, until one container remains.
//     The fan-in is the largest whose smallest single-level plan (one
//     column a pass, one worker, the row source spilled; always among the
//     plans listed, however few the columns) fits, with every reader
//     sized for the larger of an input's blocks and an intermediate
//     container's (the output's block rows at the inputs' largest bytes
//     per row), so that each level plans every group as one merge. That
//     is an estimate: merged sorted strings can gather long ones into
//     larger blocks than any input had, so each level after the first
//     plans its fan-in again over the containers it reads.
//
// The planner lists every single-level plan (columns per pass, workers, the
// row source in memory or spilled, the row source expanded once into a
// selection vector every pass shares, filled by the key merge as it runs, or
// expanded by each pass) with its memory, keeps those that fit the grant,
// and picks the one its cost model predicts fastest, not the largest: a
// merge decodes and encodes the same bytes whatever the plan, so what the
// model weighs is the passes over the row source, the spill I/O, the gathers
// running at once, the key merge run before the gathers or beside them, and
// the cache. A gather holds one decoded block of each input and consumes
// them at 1/K of the output's pace, so the blocks of the columns gathered at
// once are its working set; once that outgrows the last-level cache, every
// decoded byte goes out to memory and back. That is why a wide horizontal
// merge is slower than a vertical one even when it fits. A larger grant only
// adds plans to choose from and a plan's prediction does not depend on the
// grant, so more memory never picks a plan predicted slower.
// Stats.EstimatedBytes is the chosen plan's memory estimate,
// Stats.PredictedSeconds its prediction.
//
// In every plan each input column file is opened once per level and each of
// its blocks decoded once: a gather holds one block per input, moves on when
// the block is used up, and releases it. A gather expands the row-source
// stream into a selection vector per output block (the input of each row),
// since runs in merges of overlapping inputs are mostly one row long. A
// pass groups each selection vector's rows by input once (scatter.go), and
// each of its columns then copies every input's rows in one sequential
// stretch to their places in the output block, which stays in cache:
// reading K inputs' decoded blocks interleaved, a value at a time, waits
// on memory once they outgrow the core's cache, as they do in wide
// merges. Utf8 and binary columns scatter lengths, sum them, then copy the
// bytes, in output blocks where no input moves to its next block; there,
// and for selection vectors of few rows per input, a gather moves values
// row by row with one typed loop per column type, validity bits without a
// branch and a byte at a time.
//
// A grant below the minimum of the cheapest plan is a *GrantError, returned
// before any output is written.
//
// Every Arrow buffer the merge holds is allocated through a columnar.Budget
// whose limit is the grant; Go-side buffers (normalized keys, the row-source
// stream, read buffers) are counted with Budget.Reserve. Stats.PeakBytes is
// the budget's peak. A caller whose own grant holds the merge (the
// windower, merging its sorted runs) passes its budget as Options.Within:
// the merge's budget is then a sub-budget of it, so the caller's peak is
// of both together. A merge that passes its grant returns correct output
// and logs the broken promise as an error. A gather keeps the buffers of the output block the
// writer is done with for its next block (they stay counted while kept) and
// gives them back when the column is done.
//
// Equal keys keep input order: container order first, then row order, so the
// output equals a stable sort of the inputs concatenated in order (of the
// rows kept, for keyed inputs).
//
// # Keyed tables
//
// The inputs of a keyed table (columnar/changes.go: a primary key, and the
// change columns _strata_version and _strata_deleted) are folded: Merge
// first resolves the versions over all its inputs (columnar.Superseded,
// charged to the budget; its key table holds a key of every row outside
// the largest input and is gone before the plan is made) and writes only
// the rows still current among them. Rows superseded by a higher version
// and second copies of a change applied twice are dropped; delete markers
// that are their key's current row are kept, since a row they delete may
// be in a container outside the merge, unless their version is at most
// Options.DropMarkersThrough, which the scheduler sets only for a merge of
// every container of the table (Stats.SupersededRows counts what went).
// Such a merge may also freeze (Options.FreezeThrough): the versions at
// most the floor are written as 0, as a load writes them, so the folded
// container compresses like a fresh load's (a version column of one
// value is next to nothing) and its change statistics let readers skip
// both change columns. Any change still to come has a higher version, so
// it resolves against a frozen row as against the row's old version; the
// scheduler refuses to make live a change at or below the floor the table
// was frozen through (a late event, dead-lettered), which a frozen row
// would otherwise lose to.
// Every plan reads the inputs through filters that skip the dropped rows
// as blocks are decoded, so the key merge, the row-source stream, the
// selection vectors and the gathers see the kept rows only; with passes,
// an input is filtered at the level that first reads it. The planner fits
// the plan to the grant less the bitmaps of dropped rows, which stay until
// every input is read, and counts a copy of a block without its dropped
// rows for each reader of an input that has some. The output keeps the
// primary key. Unkeyed inputs merge as before, with nothing resolved.
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
