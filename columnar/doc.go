// Package columnar stores the rows of a projection (a table in one sort
// order) as immutable containers, and reads them back a column and a block
// at a time, so that a job can work on a table of any width in memory that
// does not grow with the width.
//
// A container is written once by a Writer (Create, Write or WriteColumn,
// Commit) and then only read (Open, OpenColumn, OpenKeyColumns,
// OpenColumns) and eventually deleted (Remove). Rows of a sorted container
// are in the order of its SortKey; the writer does not sort (the convert
// subpackage imports unsorted data), but it refuses blocks out of order at
// Commit, and Verify checks the order of every row.
//
// Every buffer a reader or writer makes for Arrow data comes from the
// memory.Allocator in its options, so a Budget passed there sees what a job
// holds. KeyEncoder turns sort-key values into normalized keys, byte strings
// that compare with bytes.Compare in the row order, shared by the merger and
// the windower.
//
// # Format
//
// A container is a directory, by convention DATA/<table>/<projection>/<id>
// (ContainerDir), holding:
//
//	manifest.json        the manifest (below)
//	col-0000.arrow       column 0
//	col-0001.arrow       column 1, and so on, one file per schema column
//
// Commit is atomic. The writer fills a temporary directory
// ".<id>.tmp-<random>" beside the final one; at Commit it finishes and
// fsyncs every column file, writes and fsyncs manifest.json, fsyncs the
// temporary directory, renames it to <id> and fsyncs the parent. A
// directory without a dot prefix is therefore complete. Temporary
// directories left by a crash are the parent's owner's to remove (the
// scheduler's orphan sweep; TempDirs lists a container's). A removal
// renames the container to ".<id>.rm-<unique>" first, and removing the
// container again finishes one a crash interrupted
// (DataDir.RemoveContainer). WriterOptions.NoSync skips the fsyncs, for data that can be
// made again (spill runs, generated data): still atomic for readers, not
// durable.
//
// Column files. Each column file is a standard Arrow IPC file (readable by
// any Arrow implementation) whose schema has one nullable or non-nullable
// field, the column. Its record batches are the column's blocks: block i
// holds rows [i*block_rows, min((i+1)*block_rows, rows)), the same rows in
// every column file. Bodies are compressed with the Arrow IPC body
// compression named in the manifest (LZ4 frame by default, or zstd, or
// none). The file layout is Arrow's:
//
//	"ARROW1" 0x00 0x00                     magic and padding (8 bytes)
//	schema message                          header_len - 8 bytes
//	block 0 message, block 1 message, ...   each: 0xFFFFFFFF, int32 metadata
//	                                        length, flatbuffer metadata, body
//	0xFFFFFFFF 0x00000000                   end of stream
//	footer, int32 footer length, "ARROW1"
//
// In a compressed body each buffer is compressed on its own, its
// uncompressed length (int64) in front (Arrow's BodyCompression method
// BUFFER), and padded to 64 bytes. An uncompressed body is as Arrow's
// encoder lays it out: each buffer padded to 8 bytes, IPC's alignment
// (before 2026-12, to 64 bytes; the block's metadata locates every
// buffer, so readers take either). Readers never use the footer: the
// manifest locates every block, so a block is read with one positioned
// read of exactly its bytes. The decoder supports exactly the layouts
// above: one field node, two or three buffers, LZ4 frame, zstd or no body
// compression, the codec taken from each block's own BodyCompression.
//
// Codecs. Arrow IPC defines two body compression codecs and no others,
// LZ4_FRAME and ZSTD (Message.fbs CompressionType); a body compressed any
// other way is not a file other Arrow readers can read. Each codec is one
// file (codec_lz4.go, codec_zstd.go) implementing the codec interface of
// codec.go, and one line of its registry, where it carries its Arrow codec
// id. A Writer refuses a codec whose id Arrow does not define, and the
// decoder knows only registered ids, so every Compression a Writer accepts
// keeps the column files readable by any Arrow implementation. A codec
// beyond those two (Snappy, say) would break that promise, and the
// registry does not take it.
//
// Arrow IPC by hand. The writer lays each file out itself, as arrow's IPC
// file writer would, and the reader decodes each block's message itself,
// rather than through arrow's ipc.FileWriter and ipc.FileReader, for three
// reasons:
//
//  1. One compressor per Writer. Arrow's file writer makes a compressor
//     per file, and a zstd compressor holds about a megabyte of state: a
//     wide container paid for one per column (a 100-column zstd write
//     allocated 254 MB; with one compressor shared by the Writer's column
//     files, 4.9 MB, about twice as fast).
//  2. Decompression into the job's memory. Each buffer is decompressed
//     straight into a buffer from the reader's allocator, which a Budget
//     counts, in one pass: no intermediate copy, no per-block codec
//     set-up (BenchmarkBlockDecode compares it with arrow's reader, about
//     three times cheaper for zstd).
//  3. Damage is bounded. Arrow's IPC loader trusts the vector lengths in a
//     message's flatbuffer metadata and allocates by them. The decoder
//     checks every offset and length it follows against the metadata's
//     size, lets decompression allocate no more than the block's raw_bytes
//     allow, and validates offsets before an array is built, so a damaged
//     block is an error, never a panic or an unbounded allocation.
//
// Arrow's encoder still lays out each block's buffers (slicing, bitmap
// shifting, offset rebasing); the tests check the decoder against arrow's
// IPC reader, and Verify reads every file with arrow's file reader, footer
// included.
//
// Manifest. manifest.json is one JSON object:
//
//	version      1
//	table, projection, id
//	schema       [{name, type, nullable, timezone?}]; type is one of int8,
//	             int16, int32, int64, uint8, uint16, uint32, uint64,
//	             float32, float64, bool, utf8, binary, date32, timestamp_us
//	sort_key     [{name, desc?, nulls_first?}]; absent or empty: unsorted
//	rows         total rows
//	block_rows   rows per block (every block but the last is full)
//	compression  "lz4", "zstd" or "none"
//	blocks       [{first_row, rows, min_key, max_key}]: per block, the
//	             normalized keys (base64) of its first and last rows, which
//	             are its least and greatest keys in a sorted container
//	files        [{column, name, size, crc32c, header_len, header_crc32c,
//	             blocks: [{offset, length, crc32c, raw_bytes}]}], one per
//	             column in schema order; raw_bytes is the block's
//	             uncompressed Arrow buffer size
//	epochs       [first, last] epochs of the data, as the writer was told
//	created      RFC 3339 time of the commit
//	primary_key  [names]: a keyed table's key columns (absent: unkeyed);
//	             the schema then ends with the change columns (below)
//	changes      {min_version, max_version, markers}: a keyed
//	             container's change statistics, the least and greatest
//	             value of its version column (0 and 0 when it has no
//	             rows) and how many rows its deleted column sets
//
// Change columns. A keyed container's last two columns are
// _strata_version (int64, not null) and _strata_deleted (bool, not null);
// changes.go gives their meaning. The writer records "changes" for every
// keyed container; Superseded trusts it to skip reading a version column
// whose rows all have one version and a deleted column without markers.
// A manifest written before the field has none ("unknown"): its change
// columns are read, as they always were. A full mergeout writes the
// versions at or below its change floor as 0, as a load does ("freezing",
// merger.Options.FreezeThrough), so a folded table's version column is
// one value and, like a loaded one's, compresses to next to nothing with
// the codecs as they are (no encoding of its own; a few hundredths of a
// byte a row, mostly the blocks' IPC framing).
//
// A committed manifest never changes, so a process caches the manifests
// it has decoded by their bytes (manifestcache.go): opening a container
// again reads its manifest but does not decode the JSON again.
//
// A container is read from a Source (source.go): a directory
// (DirSource; Open), or anything else that can read a file's byte ranges,
// such as an object store (package store) or a worker's depot (package
// depot). Readers make one ranged read per block, at the offset and
// length the manifest gives, and read the next block ahead when it is
// not local.
//
// A process may keep decoded blocks in a BlockCache (blockcache.go), which
// a reader given it (UseCache) consults before reading a block: a block is
// served from it only under the CRC-32C and stored length the reader's
// manifest gives the block, so the cache needs no invalidation beyond
// containers being immutable.
//
// Checksums are CRC-32C (Castagnoli): of each file as a whole, of its
// header (the bytes before block 0), and of each block's message bytes.
// Readers check the header when opening a column and each block's checksum
// before decoding it; Verify also checks whole files, so damage in a footer
// is found too. A mismatch, a size that differs from the manifest, a
// missing file or a block that does not decode is reported as a
// *CorruptError naming the container, the file and the block, wrapping
// ErrCorrupt. Decoding of a damaged block never allocates more than twice
// the block's raw_bytes (plus a small constant) and never panics.
//
// Normalized keys. The key of a row is the concatenation, over the sort-key
// columns in order, of one part per column:
//
//	NULL:      marker (0x00 if NULLS FIRST, 0x02 if NULLS LAST), then for
//	           fixed-width types as many zero bytes as a value takes
//	non-NULL:  0x01, then the value bytes
//
// Value bytes are big-endian: signed integers, date32 and timestamp_us
// with the sign bit flipped; unsigned integers as they are; bool as one
// byte 0 or 1; floats as their IEEE bits, all bits inverted when negative
// and only the sign bit flipped otherwise, after mapping -0.0 to +0.0 and
// every NaN to one NaN that sorts after +Inf (so -0.0 = 0.0, NaN = NaN, and
// NaN is greater than every other value); utf8 and binary as their bytes
// with each 0x00 written 0x00 0xFF, then the terminator 0x00 0x00, which
// makes a string sort before every longer string it prefixes. For a DESC
// column every value byte (terminator included) is inverted; the NULL
// marker is not, so NULLS FIRST/LAST hold in either direction. Each part is
// self-delimiting, so bytes.Compare of two keys orders rows exactly as the
// sort key does, column by column.
package columnar
