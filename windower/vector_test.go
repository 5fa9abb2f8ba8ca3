package windower

import (
	"math/rand/v2"
	"path/filepath"
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
// column of a few short strings holds a buffer of minStringBuffer bytes,
// not the few bytes of its values that the manifest's average gives.
func TestStringBuffersCounted(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	_, rec := randomTable(rng, 3)
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	rec.Release()
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "s", Expr: col("s")},
		{Alias: "n", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
	}}
	res, err := Run(t.Context(), q, []string{dir}, Options{Grant: 256 << 20, TempDir: t.TempDir(), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	if rows := drain(t, res); len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	if peak := res.Stats().PeakBytes; peak < minStringBuffer {
		t.Errorf("peak %d bytes, less than the %d-byte string buffer the column holds", peak, minStringBuffer)
	}
}
