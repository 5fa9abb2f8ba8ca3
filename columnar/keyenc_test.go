package columnar

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// compareRows is the direct comparator the normalized keys must agree
// with: per key column NULLS FIRST/LAST, then the value (DESC reversed).
// Floats: -0.0 == +0.0; NaN == NaN and NaN > +Inf.
func compareRows(key SortKey, cols []arrow.Array, i, j int) int {
	for k, sc := range key {
		a := cols[k]
		ni, nj := a.IsNull(i), a.IsNull(j)
		switch {
		case ni && nj:
			continue
		case ni || nj:
			c := 1 // i is NULL
			if nj {
				c = -1
			}
			if sc.NullsFirst {
				c = -c
			}
			return c
		}
		c := compareValues(a, i, j)
		if sc.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func compareFloat(x, y float64) int {
	xn, yn := math.IsNaN(x), math.IsNaN(y)
	switch {
	case xn && yn:
		return 0
	case xn:
		return 1
	case yn:
		return -1
	}
	return cmp.Compare(x, y) // -0.0 == 0.0 here
}

func compareValues(arr arrow.Array, i, j int) int {
	switch a := arr.(type) {
	case *array.Int8:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int16:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint8:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint16:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Float32:
		return compareFloat(float64(a.Value(i)), float64(a.Value(j)))
	case *array.Float64:
		return compareFloat(a.Value(i), a.Value(j))
	case *array.Date32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Timestamp:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Boolean:
		x, y := a.Value(i), a.Value(j)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case *array.String:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Binary:
		return bytes.Compare(a.Value(i), a.Value(j))
	}
	panic(fmt.Sprintf("no comparator for %T", arr))
}

// edgeArray makes values of type t biased to edge cases: extremes, zero,
// -0.0, NaN, ±Inf, empty strings, strings that prefix others, embedded NULs.
func edgeArray(mem memory.Allocator, t arrow.DataType, rng *rand.Rand, n int) arrow.Array {
	b := array.NewBuilder(mem, t)
	defer b.Release()
	strs := []string{"", "a", "a\x00", "a\x00\x00", "a\x00b", "a\xff", "ab", "abc", "b", "\x00", "\xff\xff", "ba"}
	for range n {
		if rng.IntN(8) == 0 {
			b.AppendNull()
			continue
		}
		r := rng.IntN(6)
		switch bb := b.(type) {
		case *array.Int8Builder:
			bb.Append([]int8{math.MinInt8, -1, 0, 1, math.MaxInt8, int8(rng.Int())}[r])
		case *array.Int16Builder:
			bb.Append([]int16{math.MinInt16, -1, 0, 1, math.MaxInt16, int16(rng.Int())}[r])
		case *array.Int32Builder:
			bb.Append([]int32{math.MinInt32, -1, 0, 1, math.MaxInt32, int32(rng.Int())}[r])
		case *array.Int64Builder:
			bb.Append([]int64{math.MinInt64, -1, 0, 1, math.MaxInt64, int64(rng.Uint64())}[r])
		case *array.Uint8Builder:
			bb.Append([]uint8{0, 1, 127, 128, 255, uint8(rng.Int())}[r])
		case *array.Uint16Builder:
			bb.Append([]uint16{0, 1, 1 << 15, 1<<15 - 1, math.MaxUint16, uint16(rng.Int())}[r])
		case *array.Uint32Builder:
			bb.Append([]uint32{0, 1, 1 << 31, 1<<31 - 1, math.MaxUint32, rng.Uint32()}[r])
		case *array.Uint64Builder:
			bb.Append([]uint64{0, 1, 1 << 63, 1<<63 - 1, math.MaxUint64, rng.Uint64()}[r])
		case *array.Float32Builder:
			v := []float32{float32(math.Copysign(0, -1)), 0, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(rng.NormFloat64())}[r]
			if r == 5 && rng.IntN(2) == 0 {
				v = -math.SmallestNonzeroFloat32
			}
			bb.Append(v)
		case *array.Float64Builder:
			v := []float64{math.Copysign(0, -1), 0, math.NaN(), math.Inf(1), math.Inf(-1), rng.NormFloat64()}[r]
			if r == 2 && rng.IntN(2) == 0 {
				v = math.Float64frombits(0xFFF8000000000001) // a negative NaN payload
			}
			bb.Append(v)
		case *array.BooleanBuilder:
			bb.Append(r%2 == 0)
		case *array.Date32Builder:
			bb.Append(arrow.Date32([]int32{math.MinInt32, -1, 0, 1, math.MaxInt32, rng.Int32()}[r]))
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp([]int64{math.MinInt64, -1, 0, 1, math.MaxInt64, rng.Int64()}[r]))
		case *array.StringBuilder:
			bb.Append(strs[rng.IntN(len(strs))])
		case *array.BinaryBuilder:
			bb.Append([]byte(strs[rng.IntN(len(strs))]))
		}
	}
	return b.NewArray()
}

func sign(x int) int { return cmp.Compare(x, 0) }

func TestKeyEncoderOrderMatchesComparator(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	mem := memory.NewGoAllocator()
	for trial := range 200 {
		// A random key of 1..3 columns of random types and directions.
		nk := 1 + rng.IntN(3)
		fields := make([]arrow.Field, nk)
		key := make(SortKey, nk)
		for k := range nk {
			fields[k] = arrow.Field{Name: fmt.Sprintf("k%d", k), Type: genTypes[rng.IntN(len(genTypes))], Nullable: true}
			key[k] = SortColumn{Name: fields[k].Name, Desc: rng.IntN(2) == 0, NullsFirst: rng.IntN(2) == 0}
		}
		schema := arrow.NewSchema(fields, nil)
		enc, err := NewKeyEncoder(schema, key)
		if err != nil {
			t.Fatal(err)
		}
		const n = 64
		cols := make([]arrow.Array, nk)
		for k := range nk {
			full := edgeArray(mem, fields[k].Type, rng, n+3)
			cols[k] = array.NewSlice(full, 3, n+3) // a non-zero array offset
			full.Release()
		}
		var kb KeyBatch
		if err := enc.EncodeBatch(&kb, cols, 0, n); err != nil {
			t.Fatal(err)
		}
		keys := make([][]byte, n)
		for i := range n {
			keys[i] = enc.AppendRow(nil, cols, i)
			if !bytes.Equal(keys[i], kb.Key(i)) {
				t.Fatalf("trial %d (%s): row %d: EncodeBatch %x != AppendRow %x", trial, key, i, kb.Key(i), keys[i])
			}
		}
		for i := range n {
			for j := range n {
				want := compareRows(key, cols, i, j)
				if got := sign(bytes.Compare(keys[i], keys[j])); got != want {
					t.Fatalf("trial %d (%s): rows %d, %d: keys compare %d, values compare %d", trial, key, i, j, got, want)
				}
			}
		}
		for _, c := range cols {
			c.Release()
		}
	}
}

func TestKeyEncoderBatchSubrange(t *testing.T) {
	schema, key := GenSchema(4, 4)
	rng := rand.New(rand.NewPCG(1, 1))
	cols := make([]arrow.Array, 4)
	for k := range cols {
		cols[k] = edgeArray(memory.DefaultAllocator, schema.Field(k).Type, rng, 100)
		defer cols[k].Release()
	}
	enc, err := NewKeyEncoder(schema, key)
	if err != nil {
		t.Fatal(err)
	}
	var kb KeyBatch
	if err := enc.EncodeBatch(&kb, cols, 10, 40); err != nil {
		t.Fatal(err)
	}
	if kb.Len() != 30 {
		t.Fatalf("Len %d", kb.Len())
	}
	for i := range 30 {
		if want := enc.AppendRow(nil, cols, 10+i); !bytes.Equal(kb.Key(i), want) {
			t.Fatalf("row %d differs", i)
		}
	}
	if err := enc.EncodeBatch(&kb, cols, 0, 101); err == nil {
		t.Fatal("range past the end accepted")
	}
	if err := enc.EncodeBatch(&kb, cols[:2], 0, 1); err == nil {
		t.Fatal("too few columns accepted")
	}
}

func TestKeyEncoderEncodeBatchAllocs(t *testing.T) {
	schema, key := GenSchema(3, 3)
	rng := rand.New(rand.NewPCG(1, 1))
	cols := make([]arrow.Array, 3)
	for k := range cols {
		cols[k] = genKeyArray(memory.DefaultAllocator, schema.Field(k).Type, rng, 4096, k, 1000)
		defer cols[k].Release()
	}
	enc, _ := NewKeyEncoder(schema, key)
	var kb KeyBatch
	allocs := testing.AllocsPerRun(20, func() {
		if err := enc.EncodeBatch(&kb, cols, 0, 4096); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("EncodeBatch allocates %.1f times per call in steady state", allocs)
	}
}
