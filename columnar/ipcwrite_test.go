package columnar

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestUncompressedBodyWrittenAsLaidOut: arrow's encoder lays out a block's
// buffers as an uncompressed column file may hold them (laidOut), for
// every type a container holds, with and without NULLs, sliced or not,
// so that writeMessage writes such a body without copying it. And a
// layout that is not (a buffer out of line, past the body's end, or
// overlapping the one before) is refused, so the copy that lays it out
// runs.
func TestUncompressedBodyWrittenAsLaidOut(t *testing.T) {
	mem := memory.NewGoAllocator()
	arrays := map[string]arrow.Array{}
	ints := array.NewInt64Builder(mem)
	strs := array.NewStringBuilder(mem)
	bools := array.NewBooleanBuilder(mem)
	for i := range 1000 {
		if i%7 == 3 {
			ints.AppendNull()
			strs.AppendNull()
			bools.AppendNull()
			continue
		}
		ints.Append(int64(i))
		strs.Append(string(make([]byte, i%13)))
		bools.Append(i%3 == 0)
	}
	arrays["int64"] = ints.NewArray()
	arrays["string"] = strs.NewArray()
	arrays["bool"] = bools.NewArray()
	for name, arr := range map[string]arrow.Array{"int64": arrays["int64"], "string": arrays["string"], "bool": arrays["bool"]} {
		arrays[name+" sliced"] = array.NewSlice(arr, 5, 905)
		arrays[name+" no nulls"] = array.NewSlice(arr, 4, 6)
		arrays[name+" empty"] = array.NewSlice(arr, 0, 0)
	}
	for name, arr := range arrays {
		schema := arrow.NewSchema([]arrow.Field{{Name: "c", Type: arr.DataType(), Nullable: true}}, nil)
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, int64(arr.Len()))
		p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(mem))
		rec.Release()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var raw appendWriter
		if _, err := p.WritePayload(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p.Release()
		meta, body, err := splitMessage(raw.b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l, err := parseBatchLayout(meta)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !laidOut(l, body) {
			t.Errorf("%s: arrow's layout %v of a %d-byte body is not the writer's", name, l.buffers[:l.nbufs], len(body))
		}
		last := l.nbufs - 1
		for what, bad := range map[string]func(*batchLayout){
			"misaligned":   func(m *batchLayout) { m.buffers[last][0] += 4 },
			"past the end": func(m *batchLayout) { m.buffers[last][1] = int64(len(body)) - m.buffers[last][0] + 1 },
			"overlapping":  func(m *batchLayout) { m.buffers[last][0] = m.buffers[last-1][0] },
		} {
			m := l
			bad(&m)
			if m.buffers[last-1][1] == 0 && what == "overlapping" {
				continue // nothing to overlap
			}
			if laidOut(m, body) {
				t.Errorf("%s: a buffer %s taken as laid out: %v of %d bytes", name, what, m.buffers[:m.nbufs], len(body))
			}
		}
	}
}
