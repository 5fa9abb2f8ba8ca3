// Package convert moves rows between strata containers and common file
// formats: it imports CSV and Parquet into containers sorted by a key, and
// exports a container as CSV, Parquet (zstd by default) or an Arrow IPC
// file or stream.
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
// CSV follows arrow's csv package: a header row names the columns and
// binary values are base64. NULL is read as any of ImportOptions.Nulls
// (default: the empty field and NULL) and written as ExportOptions.Null
// (default: the empty field). Without a schema, column types are inferred
// from the first InferRows rows. Input with a header and no rows imports
// as no containers.
//
// Nothing in the input makes an import panic: arrow's readers panic on
// some damaged input, and those panics become errors wrapping ErrMalformed.
// Every error names the input (ImportOptions.Name) and, once rows are
// read, where in it the reader was.
package convert
