// Package windower evaluates SQL window functions over the containers of
// a table, within a memory grant.
//
// A query arrives as a messages.WindowQuery (the windower/sqlparse package
// turns SQL text into one at the edge). Run validates it against the
// table's schema before reading anything: unknown columns and functions,
// wrong argument types, NULL or negative frame offsets and a grant below
// MinGrant are errors that name the select item.
//
// RunSources reads containers through any columnar.Source, such as a
// worker's depot over an object store. Once the query is compiled, it
// calls Options.Prefetch (if set) for each input with the columns the
// query reads, so a cold depot fetches those columns' files in the
// background as the run starts (depot.PrefetchColumns), and no others.
//
// # Evaluation
//
// The window functions, their properties and their evaluators are one
// table (functions.go) that the planner and every evaluation path read.
// Window calls with the same PARTITION BY and ORDER BY form a group that
// shares one sort. Rows are put in (partition, order) order with a stable
// LSD radix sort over order-preserving 64-bit keys (comparison sort for
// strings). The radix passes cover only each key's code: its distance
// from the smallest key over the stride every distance shares (so ten
// million timestamps in whole seconds take 24 bits, not the 38 in which
// their microseconds differ); keys without NULLs whose codes fit one word
// with the row position are packed into it and sorted once; with
// PARTITION BY, by the packed sort (packedsort.go): one scatter of the
// words on their top digit, then passes within each bucket while it sits
// in the cache, on every thread the group has. Input already
// in that order streams without a sort. Then each
// partition is evaluated with state that is allocated once per query and
// reused for every partition, choosing per call the cheapest algorithm for
// its frame:
//
//   - frame = whole partition: one aggregate per partition;
//   - frame starting at UNBOUNDED PRECEDING: a running aggregate, O(1) per row;
//   - sliding frames: count and integer sum/avg add entering and remove
//     leaving rows; min and max keep a monotonic deque (of strings,
//     comparing each value's first 8 bytes as a word first);
//   - everything else (EXCLUDE, float sums over sliding frames): a segment
//     tree over the partition, O(log n) per row.
//
// Arguments are gathered into sorted order once per column, except that
// lag, lead, first_value, last_value and nth_value read an argument that
// no key, other call or result column shares through the sort's
// permutation: they read a row or fewer per row, so a gather would only
// add a pass.
//
// A group with PARTITION BY but no ORDER BY whose calls are all
// aggregates over the whole partition (count, sum, avg, min, max, FILTER
// or not) is not sorted: every row is a peer of every other, so its frame
// is its partition. Evaluated in memory, one pass numbers the partitions
// (a dense table indexed by key - min for a single integer-like key whose
// range is under four times the row count, the range found by one pass
// over the keys or, for a remainder by a constant (a % 1000), from the
// divisor without one, else an open-addressing hash
// table over the keys, compared in full; NULL keys form a partition;
// numeric keys with more than one partition per eight rows are sorted
// after all, which is then cheaper),
// aggregates accumulate per partition in input order (float sums equal
// the sorted path's bit for bit), and a second pass writes each row's
// result. When such a group is the query's last and there is no ORDER BY,
// the result is in input order; otherwise, without ORDER BY, it is in the
// last group's (partition, order) order.
//
// Counts alone (count(*), or of a column without NULLs, no FILTER) over
// a key with a dense table skip the numbering: each row's result is its
// key's count, counted by key - min (one key without NULLs: the number of
// rows, nothing counted). Counting keys that come in runs (one
// partition: every row the same) in one set of counters makes each
// increment wait for the one before, so where a sample of the first rows
// shows runs, four sets take the rows in turn (countKeys).
//
// The hash table's slots hold a partition id and 32 bits of its keys'
// hash, so a probe compares keys only when the hash bits agree; it starts
// small and doubles when half full, reserving each growth from the grant.
// With one key column that is not a float, the table keeps its own copy
// of each partition's key (a string's header, an integer), and a probe
// compares the row with that rather than with the partition's first row
// (its row number, value and NULL flag, each a cache miss on a large
// table). On t threads every row's hash is computed over ranges of rows,
// the rows are dealt to t lists by their share of the hash space, and t
// tables each number the rows of their list, in row order (reading only
// its own rows, a table probes ahead as one table does), and thread k
// accumulates and writes its share of the partitions. Whether keys are
// hashed or sorted does not depend on t: the tables count their
// partitions together, a thousand at a time (an atomic addition a
// partition cost a quarter of the numbering of a string key), and the
// total decides.
//
// A lone string key read whole (no row superseded) through a block cache
// is numbered from dictionaries instead (keydict.go): the cache keeps,
// beside each container's blocks of the column, every row's code and every
// distinct value with its hash, made from the loaded rows by the first
// query that partitions by the column. Then one container's codes are the
// partitions as they are, and several containers' values are numbered in
// one table and their rows mapped code by code: no row is hashed or
// compared. A dictionary is served under its column file's CRC-32C and
// size, as a block is, and is not made when it might take more than half
// the cache (it would then be made again by every query).
//
// # Threads
//
// A run uses up to Options.Threads goroutines (default GOMAXPROCS), which
// share its grant. Loading input in memory decodes each column on a
// goroutine of its own, or, with fewer columns than threads (and room in
// the grant for a block per thread), ranges of each column's blocks on
// their own goroutines, each written in place into its rows. A window group over at least 16Ki rows is sorted
// and evaluated in parallel, and its gathers into sorted order are split
// by rows. An integer PARTITION BY or ORDER BY expression with a constant
// (a % 1000) is computed over ranges of rows on the group's threads
// (expr.evalOn), its error the first failing row's as on one. The result
// is the single-thread result, row for row and in the same order.
//
// A step's large buffers (the input's columns, the calls' outputs, the
// packed sort's words and permutation, the result's gathered and Arrow
// columns) are made on the threads at once (makeConcurrently): the runtime
// clears a large allocation on the goroutine that asks for it, so buffers
// made one after another were cleared on one thread while the others
// waited.
//
// The sort. With PARTITION BY, keys that pack into a word are sorted by
// the packed sort on all the threads, unless one bucket of its top
// digit holds most rows. Otherwise rows are hash-partitioned on the
// partition key into one bucket per thread (each bucket keeps its rows'
// input order), each bucket is sorted on its own goroutine, and the
// buckets' partitions are merged by key, which is exactly the
// single-thread sort's stable permutation (the merge gives where each
// partition starts, so the keys are not compared again). A group without
// PARTITION BY whose one ORDER BY key is integer-like without NULLs
// (timestamps, dates, integers) radix-sorts contiguous ranges of its
// rows on their own goroutines, each sorter working in its rows of the
// buffers the merge uses, and merges them pairwise by key, the earlier
// range first among equal keys (stable). Any other group without
// PARTITION BY, and a group whose hash buckets are uneven (one holds more
// than half again its share: one partition or a few hold most rows),
// sorts contiguous ranges of its rows with the single-thread sorter on
// their own goroutines and merges them pairwise by comparing rows, the
// earlier range first among equal rows. Either merge is cut at co-ranks
// into pieces of about n/threads rows so that every round, the last one
// included, uses all the threads: again the single-thread permutation.
// A parallel sort's buffers are reserved from the grant first; when they
// do not fit, the group sorts on one thread.
//
// The evaluation. The sorted rows are cut into ranges of about n/threads
// rows, one goroutine each, wherever the cuts fall in a partition, for
// the calls whose value at a row follows from its position, its peer
// group (numbered over all the rows first) or its frame alone:
// row_number, rank, dense_rank, percent_rank, cume_dist, ntile, lag,
// lead, first_value, last_value, nth_value, and count, sum, avg, min and
// max over sliding frames (ROWS, GROUPS or RANGE offsets), each range
// starting afresh at its first row's frame (a RANGE offset's cursor
// starts there, found by binary search). Aggregates over a
// frame from UNBOUNDED PRECEDING start a range that begins inside a
// partition from a carry: a running aggregate from the aggregate of the
// partition's rows before the range's first frame end, an aggregate over
// the whole partition from the partition's aggregate. Count, integer sum
// and avg, min and max aggregate each range's share of a carry on its own
// goroutine and combine the shares in row order (exactly: 128-bit sums,
// the first of equal extremes); float sums and averages fold the rows of
// a carry in row order on one goroutine, so every addition is the
// single-thread one. The other calls (EXCLUDE and float sums over
// sliding frames, a segment tree over the partition) are evaluated
// in ranges cut at partition starts, so a single partition runs them on
// one thread. Partition and peer group boundaries are found, and string
// results built (one offsets and one data buffer), in ranges of rows on
// all the threads, and results of groups before the last are put back in
// input order on all the threads. A group whose calls read no peer group
// (row_number, ntile, lag, lead, and frames in ROWS mode without EXCLUDE
// GROUP or TIES) does not find its peer groups at all.
//
// # Memory and spilling
//
// Every buffer is counted against a columnar.Budget of the grant, and so
// is an in-memory result until Result.Close; the merges of sorted runs
// count theirs within it (merger.Options.Within). Arrow allocations
// cannot be refused: a run whose budget passed the grant gives correct
// rows, and its Result logs the broken promise as an error when it
// closes (the package's tests fail on it, whatever the test checks).
// Options.BlockCache, a process's cache of decoded blocks, is outside
// every grant: a run that loads its input in memory and reads at most
// half the cache takes the blocks the cache holds and keeps those it
// reads there; it copies them into its vectors as any block, so its grant
// counts the copies. A spilling run, or a larger one, reads around the
// cache. Options.VectorPool, a process's pool of column buffers
// (internal/bufpool), lends a run that evaluates in memory its integer
// and float columns (its input, window outputs and final gathers), which
// its grant counts as fresh ones; they hold what an earlier run left, so
// every value is written before it is read, and the values under a
// result's NULLs are zeroed. They go back when Result.Close has ended the
// lease and the batches read over them are released. String values are
// copied out
// of each decoded block (the block's buffers are reused for the next one)
// into string buffers of 64KiB growing to 4MiB, counted whole, and their
// bytes per row, measured from the containers' manifests, size every
// buffer, sorted run and spilled block. A string column the result
// returns as it is read (an output item, in input order, no row filtered:
// SELECT s, count(*) OVER (PARTITION BY s)) is loaded whole into one
// buffer of that size, and the result's Arrow array uses its bytes rather
// than a copy, counted as the result's until Close; input loaded whole
// reserves what its columns hold beyond that estimate once loaded. A
// buffer whose rows hold more string bytes than their share (long
// strings sorted together) is full early. A result that repeats one
// value on many rows (first_value, last_value, nth_value, min and max of
// strings) can take more than its input's strings: after loading,
// in-memory input whose repeating results would not fit beside it (its
// rows times the argument's longest string) spills instead, and a stream
// sizes its blocks, fills its buffer and cuts a big partition's slices by
// the source's longest such string. Input that fits is evaluated in
// memory. Otherwise the query runs in stages,
// one per window group (and one more for a final ORDER BY): a stage sorts
// its input in runs that fit the grant, spills them as containers and
// merges them with merger.Merge (input already sorted on the group's keys
// skips this; a group without PARTITION BY or ORDER BY, whose runs are in
// no order, concatenates them instead). A run is as many rows as about
// three quarters of the grant holds at what a row of a run takes; on more
// than one thread it is sorted on all of them (as a group in memory is)
// and written in the
// background while the next run is read, its sorted columns counted
// until written. A run, or a chunk of one, is read a block slice at a
// time and cut where its strings reach what its rows were planned to
// hold, so a block of long strings is not taken whole. Spilled containers (runs, their merge, stage results)
// live only as long as the query, so they are written uncompressed and
// without fsync. The stage then streams the sorted rows through a buffer, evaluating
// complete partitions as the buffer fills and writing a container that
// carries the columns later stages need and the results so far (the
// evaluation's columns written as they are; only the rows short of a
// block, which the writer keeps for its next, are copied). The last
// stage's container is the result, which Result streams. A stage's peers
// (rows equal on its window's keys) come in the order the stage before
// left them, where in memory every group's peers are in input order: SQL
// leaves that order open, and calls that see it (row_number, first_value
// over peers, ROWS frames) can give other values to peers in a query of
// several window groups that spills than in one that does not, the same
// on every thread count.
//
// A stage whose group has PARTITION BY takes another path unless the
// first chunk of its input shows partitions too large for it: range
// buckets (buckets.go). Its rows are dealt, unsorted, to buckets of whole
// partitions by ranges of the partition key (the ranges from a sample of
// the first chunk, a quarter of a sorted run's rows so that the rest of
// the input is read while it is dealt; a row's bucket is a binary search
// of the splitters, over words for one integer key (a table lookup when
// its splitters are under 64Ki keys apart), and for one string key over
// each string's first 8 bytes as a word, the strings compared only
// against splitters of the same word; each column of a
// chunk scattered into a write stream per bucket, a string column's bytes
// packed as Arrow lays them out so that each bucket's rows are an Arrow
// array with no second copy (packed.go), written in the background, and
// on more than one thread dealt while the next chunk is read; a chunk is
// scattered into the storage of a chunk already written, its bytes
// reserved in the grant, and without room to be written in the background
// waits for the chunk being written and takes its storage), one
// container each;
// then two buckets at a time are
// evaluated, each under its share of the grant (a sub-budget) on its
// share of the threads, in memory (or, for a bucket larger than planned,
// on this external path of its own), each written as a result container.
// The buckets' results in bucket order are the stage's output, by
// partition, in the same order on any number of threads (the ranges and
// which buckets fit do not depend on them); the last stage's buckets
// stream to the result from memory, each held until it is read, the next
// evaluated meanwhile (bucketstream.go). No merge runs, the input
// is spilled once rather than twice, and the buckets evaluate in
// parallel. A query with neither window functions nor ORDER BY that does
// not fit passes through one stage that numbers its rows in no order
// (row_number() OVER (), dropped from the result), so it streams in
// input order instead of being refused.
//
// A partition larger than the buffer is evaluated in slices; what each
// call needs beyond its slice comes one of five ways:
//
//   - a halo: the slice carries the rows before and after it that its
//     frames reach (ROWS frames with offsets, EXCLUDE CURRENT ROW in
//     them, lag, lead);
//   - a first pass over the partition (read again from the sorted
//     container): aggregates whose frame is the whole partition are
//     written as constants; ntile, percent_rank and cume_dist get the
//     row count; first_value,
//     last_value and nth_value over a ROWS frame with one UNBOUNDED end
//     get the partition's first, n-th or last row (when the other end,
//     and n, reach no further than a halo holds; else cursors);
//   - a carry: running count, sum, avg, min and max over ROWS frames
//     start from the aggregate of the rows before the slice (avg and
//     float sums add the slice's rows to it in order, so the result is
//     the in-memory one bit for bit);
//   - the peer group's start, carried across slices: rank, dense_rank,
//     percent_rank;
//   - two cursors over the sorted container per call, at the frame start
//     and end, moving forward block by block: RANGE and GROUPS frames
//     (offsets, CURRENT ROW peers, peer groups of any size), ROWS offsets
//     beyond a halo, cume_dist. Aggregates add the rows the end cursor
//     passes and remove those the start cursor passes (float sums exactly,
//     so they may differ from the in-memory tree-ordered sum in the last
//     bit); min and max keep a monotonic deque counted against the grant;
//     with EXCLUDE GROUP or TIES two more cursors keep the aggregate of
//     the current row's peers in the frame, which count, sum and avg
//     subtract; min, max, first_value and last_value see the frame as
//     two pieces around the excluded rows (exclude.go).
//
// A halo holds at most a sixteenth of the rows the grant buffers (the
// buffer must hold four halos), and never more than 2^20: calls that
// reach further take cursors instead, lag and lead one of their own, a
// ROWS frame's offsets (running aggregates' and positional calls' too)
// and nth_value's n the cursors above. On input that streams sorted, the
// first pass and the cursors apply WHERE as they read. nth_value with EXCLUDE GROUP or
// EXCLUDE TIES reads the nth row past the current row's peers in the
// frame, which moves back when a peer group has fewer rows in the frame
// than the one before: its own cursor steps back within its block, or
// is put at the row of the nth cursor or the peers' end cursor (a copy
// of that cursor's block), never more than the peers' rows before it.
//
// # Keyed tables
//
// A table with a primary key (columnar, changes.go) keeps every version
// of its rows until a mergeout folds them. Run reads only the current
// ones: when its inputs are keyed it calls columnar.Superseded once,
// before reading any data, and each path drops the rows it names as it
// decodes a block, before WHERE or anything else sees them (changes.go):
// the in-memory load (a column's block ranges land where the dropped
// rows before them leave them), the chunks of sorted runs, and the sorted
// stream with its first passes and cursors, which take the dropped rows
// as part of their filter, by the container's row numbers. A block
// without dropped rows costs one probe of the bitmap; unkeyed inputs
// cost nothing. Stats.SupersededRows counts the rows dropped, and
// InputRows does not. The change columns are not columns of the query's
// table: naming one is an unknown-column error.
//
// # Format
//
// Spilled data lives in a directory windower-* under Options.TempDir,
// removed when the Result is closed (or the run fails):
//
//	stage-N/run-NNNNNN/  a sorted run: the columns the stage reads, then
//	                     computed keys (such as a % 1000) as columns
//	                     __key0, __key1, ...; sorted on the group's
//	                     PARTITION BY (ascending, NULLS LAST) then ORDER BY
//	stage-N/sorted/      the runs merged (merger.Merge), or concatenated for a
//	                     group without keys (no sort key); absent for sorted
//	                     input
//	stage-N/bucket-NNNNN/
//	                     a range bucket: the columns the stage reads, in
//	                     input order (WHERE applied), unsorted
//	stage-N/bucket-NNNNN.out/
//	                     the bucket's result, as stage-N/result/ is; the
//	                     stage's output is these in bucket order
//	stage-N/result/      the stage's output: the input columns later stages
//	                     use, window results so far as __w<item>, and this
//	                     stage's results; the last stage's is the query's
//	                     result (an ORDER BY stage adds a last column __order, and the
//	                     stages before it carry ORDER BY expressions the
//	                     select list lacks as __o<i>; the result drops both)
//
// Each is an ordinary container (see package columnar), so any container
// tool can read it. What a stage has consumed (a bucket once evaluated,
// the runs once merged, the stage before once read) is removed as it
// goes, in the background (remove.go): unlinking hundreds of megabytes
// frees their pages in the page cache, kernel time the evaluation of the
// next bucket does not wait for. Closing the Result waits for those
// removals, then removes the directory.
//
// # RANGE offsets
//
// A RANGE frame with offsets measures distance on its one ORDER BY key:
// a number for integer and float keys, an interval (months, days and
// microseconds, messages.Interval) for date and timestamp keys, applied
// as PostgreSQL applies it: the bound of a row is key - offset
// (PRECEDING) or key + offset (FOLLOWING), the other way round for DESC,
// where timestamp + interval adds the months first, keeping the day of
// the month unless the new month is shorter (2024-01-31 + 1 month =
// 2024-02-29), then the days, then the microseconds, and a date is a
// timestamp at midnight. A timestamp with a time zone is taken in UTC, so
// a day is 24 hours. An offset without months is a constant in the key's
// unit; one with months is computed for every row. The frame's start and
// end only move forward, as in PostgreSQL, which matters when a month
// later two rows fall on the same clamped day in the other order
// (2024-01-30 23:00 and 2024-01-31 01:00 become 2024-02-29 23:00 and
// 01:00): every evaluation path, in memory and with cursors over a big
// partition, finds the same bounds PostgreSQL does (calendar.go). A bound
// beyond the range of the key's type is beyond every row (PostgreSQL
// reports "timestamp out of range").
//
// Results follow PostgreSQL, NULLs and peers included. Result types:
// count, row_number, rank, dense_rank and ntile are int64; percent_rank,
// cume_dist and avg are float64 (avg of integers is computed exactly in
// 128 bits and rounded once more than PostgreSQL's numeric); sum of
// integers is int64, computed in 128 bits, and a sum that does not fit is
// an error (PostgreSQL returns numeric); sum of float64 is float64, and
// sum of float32 (real) is float32, added in float32 as PostgreSQL adds
// it (each addition rounded, an overflow an error), so a sum in row order
// is PostgreSQL's bit for bit; min, max, lag, lead, first_value,
// last_value and nth_value have their argument's type. Float sums over
// sliding frames are summed in tree order (and a partition larger than
// memory's through a cursor, exactly, rounded once) and may differ from
// PostgreSQL's sequential sum in the last bits; for float32 that is
// float32's last bits.
//
// A float sum or avg of finite values that is past its type's range is
// an error (ErrOverflow, PostgreSQL's 22003 "value out of range:
// overflow"), not an infinity; with an infinity or NaN among its values
// it is the infinity or NaN, as in PostgreSQL. PostgreSQL checks each
// addition in frame order; in row order (a whole partition, a running
// frame) strata's sum overflows exactly where it does, and a sliding
// frame, summed in tree order or exactly, overflows where its sum does:
// a frame whose values overflow only added in PostgreSQL's order (a huge
// value, its negation and another huge value, in that order) is an error
// there and a value here. The exact sum of a partition larger than
// memory keeps values of 2^512 and more apart, scaled, so that a frame
// of huge values that does not overflow sums exactly. PostgreSQL's avg
// of float8 also fails when the sum of squares it keeps for variance
// overflows (values past about 1e154); strata keeps no such sum, and its
// avg fails only as its sum does.
package windower
