// Package hugepage asks the kernel to back large Go buffers with
// transparent huge pages.
//
// The Go heap is mapped with 4KiB pages, and where transparent huge pages
// are "madvise" (the common default; /sys/kernel/mm/transparent_hugepage/
// enabled) the runtime does not ask for them: each first touch of a 4KiB
// page of a fresh buffer is a page fault. Filling the buffers of a window
// query over 10M rows faulted about 70,000 times, and on a virtual machine
// a fault costs more than the sort. Advise marks the whole 2MiB pages
// inside a buffer (madvise MADV_HUGEPAGE) before it is first written, so
// its first touch faults once per 2MiB. The mark stays on the address
// range, so the heap's later reuse of it gets huge pages too.
//
// Make is make with that advice; Allocator is Arrow's Go allocator with
// it, for Arrow buffers.
//
// It is advice: where the kernel has no transparent huge pages, or they
// are "never", or the platform is not Linux, Advise does nothing.
package hugepage

import "unsafe"

// Size is the size of a transparent huge page on the platforms this
// package advises (x86-64, and arm64 with 4KiB base pages).
const Size = 2 << 20

// MinBytes is the least storage Advise marks: two huge pages, so that at
// least one lies whole inside it.
const MinBytes = 2 * Size

// Advise marks the whole huge pages inside the storage of s (up to its
// capacity) to be backed by transparent huge pages, if it spans at least
// MinBytes.
func Advise[T any](s []T) {
	var zero T
	size := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if size < MinBytes {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(s[:1]))
	p := uintptr(base)
	beg := (p + Size - 1) &^ (Size - 1)
	end := (p + size) &^ (Size - 1)
	if end > beg {
		advise(unsafe.Slice((*byte)(unsafe.Add(base, beg-p)), end-beg))
	}
}

// Make is make([]T, n, capacity), its storage advised (Advise) before
// its first write.
func Make[T any](n, capacity int) []T {
	s := make([]T, n, capacity)
	Advise(s)
	return s
}
