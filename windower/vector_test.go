package windower

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/internal/hugepage"
	"github.com/strata-db/strata/messages"
)

// TestAppendStringsShareBuffer: string values appended block by block
// read back as they were (empty strings, NULLs, a block larger than a
// string buffer among them), the small blocks' bytes cut from one buffer
// one after the other, not a buffer each; a value stays as it was when
// the buffer it is in has no room for the next block; and the vector
// counts the buffers it holds whole, their unused tails too.
func TestAppendStringsShareBuffer(t *testing.T) {
	mem := memory.NewGoAllocator()
	block := func(vals []string, valid []bool) arrow.Array {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.AppendValues(vals, valid)
		return b.NewArray()
	}
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	big := long("x", hugepage.MinBytes+7)
	blocks := [][]string{
		{long("a", 100), "", long("b", 300), "null"},
		{long("e", 200), "", ""},
		{big, "after big"},
		{"i", "jk"},
	}
	valid := [][]bool{{true, true, true, false}, {true, true, true}, {true, true}, {true, true}}
	v := &vector{kind: kindString, typ: arrow.BinaryTypes.String}
	var want []string
	var payload, firstBlock int64
	for i, vals := range blocks {
		arr := block(vals, valid[i])
		if err := v.appendArrow(arr); err != nil {
			t.Fatal(err)
		}
		payload += int64(len(arr.(*array.String).ValueBytes()))
		if i == 0 {
			firstBlock = payload
		}
		arr.Release()
		for j, s := range vals {
			if !valid[i][j] {
				s = "\x00NULL" // checked by the NULL flag, not the value
			}
			want = append(want, s)
		}
	}
	if len(v.strs) != len(want) {
		t.Fatalf("%d values, want %d", len(v.strs), len(want))
	}
	for i := range want {
		if null := want[i] == "\x00NULL"; null != (v.nulls != nil && v.nulls[i]) {
			t.Errorf("value %d: NULL %v, want %v", i, !null, null)
			continue
		} else if null {
			continue
		}
		if v.strs[i] != want[i] {
			t.Errorf("value %d: %.20q (%d bytes), want %.20q (%d bytes)", i, v.strs[i], len(v.strs[i]), want[i], len(want[i]))
		}
	}
	// The second block's bytes follow the first's in the same buffer.
	if end, next := unsafe.Add(unsafe.Pointer(unsafe.StringData(v.strs[0])), firstBlock), unsafe.Pointer(unsafe.StringData(v.strs[4])); end != next {
		t.Errorf("the second block's strings are not in the first's buffer, right after its %d bytes", firstBlock)
	}
	// The payload counts each buffer whole, its unused tail too: the first
	// (minStringBuffer) the two small blocks, one the size of the big
	// block, then one of hugepage.MinBytes (twice the last, at most that)
	// for the last block.
	bigBlock := int64(len(big) + len("after big"))
	if want := int64(minStringBuffer) + bigBlock + hugepage.MinBytes; v.payload != want || v.payload < payload {
		t.Errorf("payload %d, want the buffers' %d (the blocks' bytes are %d)", v.payload, want, payload)
	}
}

// The grant counts the string buffers a loaded column holds whole: a
// vector of a few short strings whose bytes are not known holds a buffer
// of minStringBuffer bytes, and counts it. A loaded column knows its
// strings' bytes from the manifests (strExpect), and holds no more: a
// column of long strings took buffers doubling up to hugepage.MinBytes,
// and held more than twice what its reservation counted (a range bucket
// of 4800-byte strings at the smallest grant failed to load,
// TestBucketsSealLongStrings).
func TestStringBuffersCounted(t *testing.T) {
	mem := memory.NewGoAllocator()
	block := func(vals ...string) arrow.Array {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.AppendValues(vals, nil)
		return b.NewArray()
	}
	short := &vector{kind: kindString, typ: arrow.BinaryTypes.String}
	arr := block("a", "bc", "def")
	if err := short.appendArrow(arr); err != nil {
		t.Fatal(err)
	}
	arr.Release()
	if short.payload != minStringBuffer {
		t.Errorf("three short strings: payload %d, want the %d-byte buffer they are in", short.payload, minStringBuffer)
	}
	long := strings.Repeat("long string ", 400)
	const blocks, rows = 20, 95
	known := &vector{kind: kindString, typ: arrow.BinaryTypes.String, strExpect: int64(blocks * rows * len(long))}
	for range blocks {
		vals := make([]string, rows)
		for i := range vals {
			vals[i] = long
		}
		arr := block(vals...)
		if err := known.appendArrow(arr); err != nil {
			t.Fatal(err)
		}
		arr.Release()
	}
	if known.payload != known.strExpect {
		t.Errorf("%d blocks of %d %d-byte strings, expected: payload %d, want %d", blocks, rows, len(long), known.payload, known.strExpect)
	}
	for i, s := range known.strs {
		if s != long {
			t.Fatalf("row %d: %d bytes, want the %d-byte string", i, len(s), len(long))
		}
	}
}

// TestStringArrayUsesInputBytes: a string column read whole into one
// buffer (its bytes known, strHint) becomes an Arrow array over those
// bytes, on any number of threads, with NULLs and empty strings among
// them; goMemoryBytes counts them, as the budget does not. A column in
// another order, or whose bytes are in more than one buffer, is copied
// into the budget; either way the values are the same.
func TestStringArrayUsesInputBytes(t *testing.T) {
	mem := memory.NewGoAllocator()
	rng := rand.New(rand.NewPCG(7, 8))
	const blocks, rows = 9, 3000
	var want []string
	var wantNull []bool
	var total int
	var arrs []arrow.Array
	for range blocks {
		b := array.NewStringBuilder(mem)
		for range rows {
			switch k := rng.IntN(10); {
			case k == 0:
				b.AppendNull()
				want, wantNull = append(want, ""), append(wantNull, true)
			case k == 1:
				b.Append("")
				want, wantNull = append(want, ""), append(wantNull, false)
			default:
				s := strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(40))
				b.Append(s)
				want, wantNull = append(want, s), append(wantNull, false)
				total += len(s)
			}
		}
		arrs = append(arrs, b.NewArray())
		b.Release()
	}
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	load := func(hint int) *vector {
		v := &vector{kind: kindString, typ: arrow.BinaryTypes.String, strHint: hint}
		for _, a := range arrs {
			if err := v.appendArrow(a); err != nil {
				t.Fatal(err)
			}
		}
		return v
	}
	check := func(name string, arr arrow.Array, order []int) {
		t.Helper()
		s := arr.(*array.String)
		for i, r := range order {
			if s.IsNull(i) != wantNull[r] || (!wantNull[r] && s.Value(i) != want[r]) {
				t.Fatalf("%s: row %d: %q (NULL %v), want %q (NULL %v)", name, i, s.Value(i), s.IsNull(i), want[r], wantNull[r])
			}
		}
	}
	inOrder := make([]int, len(want))
	for i := range inOrder {
		inOrder[i] = i
	}
	whole := load(total)
	if len(whole.whole) < total || whole.payload != int64(len(whole.whole)) {
		t.Fatalf("the column's %d bytes known, its first buffer %d bytes, the vector's %d", total, len(whole.whole), whole.payload)
	}
	for _, threads := range []int{1, 2, 3} {
		counted := memory.NewCheckedAllocator(mem)
		arr := whole.toArrowParallel(counted, threads, nil)
		check("one buffer", arr, inOrder)
		data, buf := arr.Data().Buffers()[2], whole.whole
		at, lo := uintptr(unsafe.Pointer(unsafe.SliceData(data.Bytes()))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		if data.Mutable() || at < lo || at >= lo+uintptr(len(buf)) || data.Len() != total {
			t.Errorf("%d threads: the bytes were copied, not used where they are", threads)
		}
		if got := goMemoryBytes([]arrow.Array{arr}); got != int64(total) {
			t.Errorf("%d threads: goMemoryBytes %d, want the column's %d bytes", threads, got, total)
		}
		if counted.CurrentAlloc() >= total {
			t.Errorf("%d threads: the budget holds %d bytes, the column's %d among them", threads, counted.CurrentAlloc(), total)
		}
		arr.Release()
		counted.AssertSize(t, 0)
	}
	// Bytes in several buffers (none known up front): copied, and no
	// buffer kept.
	parts := load(0)
	if parts.whole != nil {
		t.Fatal("a column whose bytes were not known kept its first buffer")
	}
	arr := parts.toArrowParallel(mem, 2, nil)
	check("several buffers", arr, inOrder)
	if !arr.Data().Buffers()[2].Mutable() {
		t.Error("bytes in several buffers were not copied")
	}
	arr.Release()
	// Another order: copied.
	perm := rng.Perm(len(want))
	p32 := make([]int32, len(perm))
	for i, r := range perm {
		p32[i] = int32(r)
	}
	arr = gatherParallel(whole, p32, 2).toArrowParallel(mem, 2, nil)
	check("gathered", arr, perm)
	if !arr.Data().Buffers()[2].Mutable() {
		t.Error("a gathered column's bytes were not copied")
	}
	arr.Release()
	// A run of bytes across two buffers that lie next to each other is
	// not one buffer's.
	back := make([]byte, 200)
	addr := func(i int) uintptr { return uintptr(unsafe.Pointer(&back[i])) }
	sp := byteSpan{backToBack: true, first: addr(90), end: addr(110)}
	if got := sp.within(back[:100:100]); got != nil {
		t.Errorf("a span across two buffers read as %d bytes of one", len(got))
	}
	sp = byteSpan{backToBack: true, first: addr(110), end: addr(130)}
	if got := sp.within(back[100:]); len(got) != 20 || &got[0] != &back[110] {
		t.Errorf("a span inside the second buffer read as %d bytes", len(got))
	}
}

// TestResultUsesInputStrings: a query that returns a string column as it
// is read (SELECT s, count(*) OVER (PARTITION BY s), one thread, several
// blocks) holds the input's bytes in its result, not a copy, and the
// grant counts them until the result is closed; its rows are those of a
// run on two threads, which copies them.
func TestResultUsesInputStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	_, rec := randomTable(rng, 20000) // 5 blocks
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	rec.Release()
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "s", Expr: col("s")},
		{Alias: "n", Window: &messages.WindowCall{Func: "count", Star: true, PartitionBy: []messages.Expr{{Column: "s"}}}},
	}}
	var rows [2][]string
	for i, threads := range []int{1, 2} {
		res, err := Run(t.Context(), q, []string{dir}, Options{Grant: 64 << 20, TempDir: t.TempDir(), Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		if threads == 1 {
			data := res.cols[0].Data().Buffers()[2]
			if data.Mutable() {
				t.Error("one thread: the result's strings were copied")
			}
			if held := res.budget.InUse(); held < int64(data.Len()) {
				t.Errorf("the grant holds %d bytes for a result of %d bytes of strings", held, data.Len())
			}
		}
		budget := res.budget
		rows[i] = drain(t, res)
		res.Close()
		if n := budget.InUse(); n != 0 {
			t.Errorf("%d threads: %d bytes still counted after Close", threads, n)
		}
	}
	if len(rows[0]) != 20000 || !slices.Equal(rows[0], rows[1]) {
		t.Errorf("one thread gave %d rows, two %d, or they differ", len(rows[0]), len(rows[1]))
	}
}

// TestFillValidity: the validity bitmap, the NULL count and the values
// zeroed under NULLs, eight flags at a time, against a flag at a time, for
// lengths that are and are not multiples of 8, NULLs none to all, on one
// to four threads.
func TestFillValidity(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 7, 8, 9, 63, 64, 65, 1000, parallelMinRows + 13} {
		for _, p := range []float64{0, 0.001, 0.3, 0.97, 1} {
			nulls := make([]bool, n)
			for i := range nulls {
				nulls[i] = rng.Float64() < p
			}
			for threads := 1; threads <= 4; threads++ {
				bm := make([]byte, (n+7)/8)
				for i := range bm {
					bm[i] = 0x5a // fillValidity writes every byte
				}
				under := make([]uint64, n)
				for i := range under {
					under[i] = uint64(i) + 1
				}
				got := fillValidity(bm, nulls, threads, under)
				want := 0
				for i, null := range nulls {
					valid := bm[i/8]>>(i%8)&1 == 1
					if valid == null {
						t.Fatalf("n %d, p %g, threads %d: row %d NULL %v but its bit is %v", n, p, threads, i, null, valid)
					}
					if null {
						want++
						if under[i] != 0 {
							t.Fatalf("n %d, p %g, threads %d: the value under NULL row %d is %d, want 0", n, p, threads, i, under[i])
						}
					} else if under[i] != uint64(i)+1 {
						t.Fatalf("n %d, p %g, threads %d: the value of row %d changed to %d", n, p, threads, i, under[i])
					}
				}
				if got != want {
					t.Fatalf("n %d, p %g, threads %d: %d NULLs counted, want %d", n, p, threads, got, want)
				}
				if n%8 != 0 && bm[n/8]>>(n%8) != 0 {
					t.Fatalf("n %d, p %g, threads %d: bits past the last row set: %08b", n, p, threads, bm[n/8])
				}
			}
		}
	}
}
