package columnar

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestTakeEveryType(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(3, 9))
	for _, typ := range genTypes {
		full := edgeArray(mem, typ, rng, 205)
		arr := array.NewSlice(full, 5, 205) // with an array offset
		full.Release()
		perm := rng.Perm(arr.Len())
		inv := make([]int, len(perm))
		for i, p := range perm {
			inv[p] = i
		}
		shuffled, err := Take(mem, arr, perm)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Take(mem, shuffled, inv)
		if err != nil {
			t.Fatal(err)
		}
		if !array.ApproxEqual(back, arr, array.WithNaNsEqual(true)) {
			t.Errorf("%s: take and inverse take do not give the array back", typ)
		}
		for i, p := range perm[:20] {
			if shuffled.IsNull(i) != arr.IsNull(p) || (!arr.IsNull(p) && compareAcross(shuffled, i, arr, p) != 0) {
				t.Errorf("%s: row %d is not row %d", typ, i, p)
			}
		}
		arr.Release()
		shuffled.Release()
		back.Release()
	}
}

// compareAcross compares a value of one array with a value of another of
// the same type, through their normalized keys.
func compareAcross(a arrow.Array, i int, b arrow.Array, j int) int {
	schema, key := oneColumn(a.DataType())
	enc, _ := NewKeyEncoder(schema, key)
	ka := enc.AppendColumn(nil, 0, a, i)
	kb := enc.AppendColumn(nil, 0, b, j)
	return bytes.Compare(ka, kb)
}

func oneColumn(t arrow.DataType) (*arrow.Schema, SortKey) {
	return arrow.NewSchema([]arrow.Field{{Name: "v", Type: t, Nullable: true}}, nil), SortKey{{Name: "v"}}
}
