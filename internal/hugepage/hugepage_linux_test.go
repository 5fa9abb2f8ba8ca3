package hugepage

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestMakeAdvises: a buffer of MinBytes or more made by Make lies in a
// mapping marked for huge pages (VmFlags "hg" in /proc/self/smaps) over
// the whole 2MiB pages inside it.
func TestMakeAdvises(t *testing.T) {
	if mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("no transparent huge pages here (%q, %v)", mode, err)
	}
	big := Make[int64](0, 4<<20) // 32MiB
	big = append(big, 1)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	inner := (p + Size - 1) &^ (Size - 1)
	if !marked(t, inner) {
		t.Errorf("the first whole huge page of a 32MiB buffer (%#x) is not marked for huge pages", inner)
	}
}

// marked reports whether the mapping of this process holding addr has the
// "hg" (MADV_HUGEPAGE) flag.
func marked(t *testing.T, addr uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := mappingRange(line); ok {
			in = addr >= lo && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(" "+strings.TrimPrefix(line, "VmFlags:")+" ", " hg ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping holds %#x", addr)
	return false
}

// mappingRange parses the first line of a mapping in smaps,
// "lo-hi perms ...".
func mappingRange(line string) (lo, hi uintptr, ok bool) {
	f := strings.Fields(line)
	if len(f) < 2 || strings.HasSuffix(f[0], ":") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(a, 16, 64)
	h, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}

func TestAllocator(t *testing.T) {
	var a Allocator
	for _, size := range []int{0, 1, 63, 64, 65, 4096, MinBytes - 1, MinBytes, 3*MinBytes + 5} {
		buf := a.Allocate(size)
		if len(buf) != size || cap(buf) != size {
			t.Fatalf("Allocate(%d): len %d, cap %d", size, len(buf), cap(buf))
		}
		if size == 0 {
			continue
		}
		if p := uintptr(unsafe.Pointer(&buf[0])); p%alignment != 0 {
			t.Errorf("Allocate(%d) at %#x: not %d-byte aligned", size, p, alignment)
		}
		for i, x := range buf {
			if x != 0 {
				t.Fatalf("Allocate(%d): byte %d is %d, not zero", size, i, x)
			}
		}
		buf[size-1] = 7
		grown := a.Reallocate(size+MinBytes, buf)
		if len(grown) != size+MinBytes || grown[size-1] != 7 || grown[size] != 0 {
			t.Fatalf("Reallocate(%d) of a %d-byte buffer: len %d, byte %d is %d, byte %d is %d", size+MinBytes, size, len(grown), size-1, grown[size-1], size, grown[size])
		}
		if same := a.Reallocate(size-1, grown); unsafe.SliceData(same) != unsafe.SliceData(grown) || len(same) != size-1 {
			t.Errorf("Reallocate(%d) of a buffer with room moved it or cut it to %d bytes", size-1, len(same))
		}
	}
}

func TestAllocatorAdvises(t *testing.T) {
	if mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("no transparent huge pages here (%q, %v)", mode, err)
	}
	buf := Allocator{}.Allocate(4 * Size)
	p := uintptr(unsafe.Pointer(&buf[0]))
	inner := (p + Size - 1) &^ (Size - 1)
	if !marked(t, inner) {
		t.Errorf("the first whole huge page of an 8MiB Arrow buffer (%#x) is not marked for huge pages", inner)
	}
}
