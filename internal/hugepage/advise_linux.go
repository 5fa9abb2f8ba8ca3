package hugepage

import "syscall"

// advise marks b, whole huge pages, MADV_HUGEPAGE; an error (a kernel
// without transparent huge pages) is ignored: it is advice.
func advise(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }
