// Package convert moves rows between strata containers and common file
// formats: it imports CSV and Parquet into containers sorted by a key, and
// exports a container as CSV, Parquet or an Arrow IPC file or stream.
//
// Import streams the input and cuts it into containers of
// ImportOptions.RowsPerContainer rows; each container is sorted in memory
// (a stable sort on the normalized key, so equal keys keep input order)
// and written column by column. K containers come out of an input of about
// K*RowsPerContainer rows, each sorted on its own, their key ranges
// overlapping as they would after K separate loads — the input mergeout
// consolidates.
//
// CSV follows arrow's csv package: a header row names the columns, binary
// values are base64, and NULL is written and read as ImportOptions.Null /
// ExportOptions.Null (default: the empty field).
package convert
