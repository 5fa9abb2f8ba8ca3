package windower

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/internal/hugepage"
)

// TestAppendStringsShareBuffer: string values appended block by block
// read back as they were (empty strings, NULLs, a block larger than a
// string buffer among them), the small blocks' bytes cut from one buffer
// one after the other, not a buffer each; and a value stays as it was
// when the buffer it is in has no room for the next block.
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
	if v.payload != payload {
		t.Errorf("payload %d, the blocks' bytes are %d", v.payload, payload)
	}
}
