package hugepage

import "unsafe"

// alignment is the alignment of Allocator's buffers, Arrow's: a buffer
// starts on a 64-byte boundary.
const alignment = 64

// Allocator allocates byte buffers from the Go heap as Arrow's
// memory.GoAllocator does (zeroed, 64-byte aligned, freed by the
// collector), and advises huge pages for those of MinBytes or more before
// their first write. It satisfies Arrow's memory.Allocator; its zero
// value is ready to use.
//
// An Arrow array of a million strings has a data buffer of tens of
// megabytes that is written once, front to back: from the Go allocator
// its every 4KiB page faulted on that write.
type Allocator struct{}

// Allocate returns a zeroed buffer of size bytes whose capacity is size.
func (Allocator) Allocate(size int) []byte {
	buf := Make[byte](size+alignment, size+alignment)
	shift := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & (alignment - 1))
	return buf[shift : shift+size : shift+size]
}

// Reallocate returns b resized to size bytes: b itself when its capacity
// suffices, else a new buffer holding b's bytes.
func (a Allocator) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	buf := a.Allocate(size)
	copy(buf, b)
	return buf
}

// Free does nothing: the collector frees the buffer once nothing holds it.
func (Allocator) Free([]byte) {}
