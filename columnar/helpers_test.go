package columnar

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// allTypesSchema has one nullable column of every supported type.
func allTypesSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(genTypes))
	for i, t := range genTypes {
		n, _ := TypeName(t)
		fields[i] = arrow.Field{Name: n, Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// randomRecord makes n rows of schema with NULLs.
func randomRecord(mem memory.Allocator, schema *arrow.Schema, rng *rand.Rand, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = genArray(mem, f.Type, rng, n, 0.1)
	}
	rec := array.NewRecordBatch(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// readColumn concatenates every block of column col.
func readColumn(t testing.TB, c *Container, col int) arrow.Array {
	t.Helper()
	r, err := c.OpenColumn(col)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var parts []arrow.Array
	for {
		a, err := r.Next()
		if err != nil {
			break
		}
		parts = append(parts, a)
	}
	if len(parts) != r.NumBlocks() {
		t.Fatalf("read %d blocks of column %d, want %d", len(parts), col, r.NumBlocks())
	}
	if len(parts) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, c.Schema().Field(col).Type, 0)
	}
	out, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		p.Release()
	}
	return out
}

func newTestRand() *rand.Rand { return rand.New(rand.NewPCG(11, 13)) }

// newTestDecompressors returns a fresh set of the codecs' decompressors, as
// a Container makes them.
func newTestDecompressors() *decompressors {
	d := makeDecompressors()
	return &d
}
