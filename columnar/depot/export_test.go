package depot

// SetSegmentBytes sets the fetch segment size for a test and returns what
// restores it.
func SetSegmentBytes(n int64) func() {
	old := segmentBytes
	segmentBytes = n
	return func() { segmentBytes = old }
}

// CanLock reports whether Open locks the depot directory here.
const CanLock = canLock
