package columnar

import "sync/atomic"

// IOStats counts the work readers and writers do. One IOStats may be shared
// by any number of readers and writers at once; a nil *IOStats counts nothing.
type IOStats struct {
	FilesOpened        atomic.Int64 // column files opened for reading
	BlocksRead         atomic.Int64 // blocks read from disk (checksummed)
	BlocksDecompressed atomic.Int64 // blocks decoded into Arrow arrays
	BlocksCached       atomic.Int64 // blocks served from a BlockCache (neither read nor decoded)
	BytesRead          atomic.Int64 // bytes read from column files
	BlocksWritten      atomic.Int64 // blocks written
	BytesWritten       atomic.Int64 // bytes written to column files
	RawBytesRead       atomic.Int64 // uncompressed Arrow bytes of the blocks decoded
	RawBytesWritten    atomic.Int64 // uncompressed Arrow bytes of the blocks written
}
