// Package convert moves rows between strata containers and common file
// formats: it imports CSV and Parquet into containers sorted by a key, and
// exports containers as CSV, Parquet (zstd by default), an Arrow IPC file
// or stream (uncompressed by default), or JSON lines.
//
// Import streams the input and cuts it into containers of
// ImportOptions.RowsPerContainer rows; each container is sorted in memory
// (a stable sort on the normalized key, so equal keys keep input order)
// and written column by column. K containers come out of an input of about
// K*RowsPerContainer rows, each sorted on its own, their key ranges
// overlapping as they would after K separate loads — the input mergeout
// consolidates. Containers are named <IDPrefix><FirstID>, ...; an import
// into a projection that already has containers passes the next free
// number. ImportOptions.Context stops an import, and Progress reports each
// container as it is committed.
//
// # CSV
//
// CSV is read much as DuckDB's read_csv reads it, without its dialect
// sniffing (the delimiter is ImportOptions.Comma, default a comma). A
// header row names the columns (trimmed of spaces; an empty name becomes
// column<i>; a name given twice is an error, where DuckDB renames it); with ImportOptions.NoHeader the first row is data and the
// columns are named by the schema or, without one, column0, column1, ...
// (zero-padded to one width: column00 .. column10 for 11 columns). A
// UTF-8 byte order mark before the first row is skipped; lines may end in
// CRLF; fields may be quoted, holding the delimiter, doubled quotes and
// line breaks; blank lines are skipped. Every row must have as many fields
// as the header (or the schema, or the first row).
//
// NULL is read as any of ImportOptions.Nulls (default: the empty field and
// NULL; in utf8 columns only with StringsNull) and written as
// ExportOptions.Null (default: the empty field). Binary values are base64
// (written as PostgreSQL's bytea hex, \x and hex digits, with
// ExportOptions.ByteaHex).
//
// The schema is ImportOptions.Schema (ParseSchema reads one written as
// "id int64, ts timestamp, name varchar") or, without one, inferred from
// the first InferRows rows: each column nullable and of the first of
// these that reads every one of its non-NULL values:
//
//	int64      decimal integers
//	float64    decimal numbers, NaN, Inf (not hex, not an integer too big for int64 to be exact)
//	bool       true, false, True, FALSE, t, f, ... (strconv.ParseBool; 1 and 0 alone are int64)
//	date32     2024-01-15
//	timestamp  timestamp[us] without a zone: 2024-01-15 10:30:00, 2024-01-15T10:30:00.123456,
//	           10:30 without seconds, and plain dates (midnight)
//	timestamptz timestamp[us, tz=UTC]: a timestamp with a zone offset, Z, +02:00, +0200 or +02
//	           (optionally after a space), converted to UTC
//	utf8       anything else, and a column of NULLs only
//
// A column mixing timestamps with and without a zone offset (or dates and
// zoned timestamps) is utf8, as DuckDB falls back to VARCHAR: the two are
// different kinds of value and no choice of zone for the naive ones would
// be right for everyone. A timestamp more precise than microseconds is not
// a timestamp (it stays text rather than lose digits). With a schema, a
// timestamp column refuses a value with a zone offset and a timestamptz
// column reads a value without one as UTC.
//
// Input with a header and no rows imports as no containers.
//
// # Primary keys
//
// With ImportOptions.PrimaryKey the import makes the first containers of
// a keyed table (columnar's change columns): the schema is the input's
// with the key columns not null and every other column nullable (a delete
// marker has them NULL), then _strata_version and _strata_deleted, every
// row version 0 and not deleted, and each manifest names the key. An
// input column named with the reserved prefix _strata_ is refused.
//
// A NULL in a key column fails the import at the first such row, a
// *CSVError naming the line and column for CSV ("t.csv:4: column "id":
// NULL in a primary key column"), the row for Parquet; both wrap
// ErrNullKey. Two rows with one key anywhere in the input fail it with a
// *DuplicateKeyError (wrapping columnar.ErrDuplicateKey) naming the first
// duplicate in input order, its key values and the row it repeats:
// "duplicate primary key (id)=(7): line 9 repeats line 3" (CSV lines as
// an editor counts them; "row 9 repeats row 3" for Parquet). Keys are
// compared as normalized keys, so -0.0 and 0.0, or two NaNs, are one key,
// as version resolution (columnar.Superseded) sees them.
//
// The check scales with the input, not memory. Each container's keys are
// encoded when it is written and appended, sorted, as a run to one
// temporary file (ImportOptions.TempDir, unlinked at once): in the
// container's order when the key's columns are the sort key's first
// columns (in any order), else sorted on their own. An entry is the
// normalized key, the row's input position and its row in the container
// (about 17 bytes for an int64 key). After the last container a k-way
// merge of the runs finds equal keys, holding one buffer per run (at most
// 32MiB together); the key values for the message are read back from the
// container. A run holding a key twice ends the import after that
// container, since the first duplicate is then among the containers
// written. CSV line numbers are kept as runs of rows whose line is the
// row plus a constant, a few entries however long the input. On 1Mi rows
// in 8 containers the check took 0.25 s with the key leading the sort key
// and 0.65 s without (BenchmarkImportKeyCheck), a 16MB run file.
//
// # Export
//
// Export writes containers of one schema, one after the other and one
// block at a time, to one file: what it holds at once is a block of the
// exported columns (ExportOptions.Columns, default all) and what the
// format's writer buffers. CSV is written as DuckDB's COPY ... TO writes
// it: a header row even when there are no rows, NULL as the empty field
// (ExportOptions.Null), every line ending in a newline. Parquet stores the
// Arrow schema, so types read back as they were. Arrow is uncompressed
// unless ExportOptions.ArrowCompression says lz4 or zstd, since some
// readers (apache-arrow JS) have no codecs. JSON lines are one object per
// row, keys in column order and values typed (AppendJSONRow): numbers,
// true/false, null, strings for text, dates and timestamps, base64 for
// binary, and "NaN", "Infinity", "-Infinity" for the floats JSON cannot
// write.
//
// # Errors
//
// An error at a place in a CSV input is a *CSVError: it names the input
// (ImportOptions.Name), the line (1-based, the header being line 1, as an
// editor counts; a row spanning lines is placed by the field in question)
// and the column, as in
//
//	t.csv:4: column "amount": cannot parse "2.5" as int64
//
// A value that does not fit a column whose type was inferred says which
// lines the type was inferred from. The sort key and the schema are
// checked against each other before any row is read.
//
// Nothing in the input makes an import panic: arrow's readers panic on
// some damaged input, and those panics become errors wrapping ErrMalformed.
// Every error names the input (ImportOptions.Name); a Parquet error, once
// rows are read, says from which row on the reader failed.
package convert
