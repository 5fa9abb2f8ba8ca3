// Package windower evaluates SQL window functions over the containers of
// a table, within a memory grant.
//
// A query arrives as a messages.WindowQuery (the windower/sqlparse package
// turns SQL text into one at the edge). Run validates it against the
// table's schema before reading anything: unknown columns and functions,
// wrong argument types, NULL or negative frame offsets and a grant below
// MinGrant are errors that name the select item.
//
// # Evaluation
//
// Window calls with the same PARTITION BY and ORDER BY form a group that
// shares one sort. Rows are put in (partition, order) order with a stable
// LSD radix sort over order-preserving 64-bit keys (comparison sort for
// strings); input already in that order streams without a sort. Then each
// partition is evaluated with state that is allocated once per query and
// reused for every partition, choosing per call the cheapest algorithm for
// its frame:
//
//   - frame = whole partition: one aggregate per partition;
//   - frame starting at UNBOUNDED PRECEDING: a running aggregate, O(1) per row;
//   - sliding frames: count and integer sum/avg add entering and remove
//     leaving rows; min and max keep a monotonic deque;
//   - everything else (EXCLUDE, float sums over sliding frames): a segment
//     tree over the partition, O(log n) per row.
//
// Results follow PostgreSQL, NULLs and peers included. Result types:
// count, row_number, rank, dense_rank and ntile are int64; percent_rank,
// cume_dist and avg are float64 (avg of integers is computed exactly in
// 128 bits and rounded once more than PostgreSQL's numeric); sum of
// integers is int64, computed in 128 bits, and a sum that does not fit is
// an error (PostgreSQL returns numeric); sum of floats is float64; min,
// max, lag, lead, first_value, last_value and nth_value have their
// argument's type. Float sums over sliding frames are summed in tree order
// and may differ from PostgreSQL's sequential sum in the last bits.
package windower
