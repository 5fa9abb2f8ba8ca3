package merger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// testSchema has every supported type; k1 and k2 are the sort key.
func testSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "k1", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "k2", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "seq", Type: arrow.PrimitiveTypes.Int64}, // input*1e9+row: tells rows apart
	}, nil)
}

var testKey = columnar.SortKey{{Name: "k1"}, {Name: "k2", Desc: true, NullsFirst: true}}

// randomRecord makes n rows of schema; keys are drawn from keyRange values
// so duplicates are common; seqBase numbers the rows.
func randomRecord(rng *rand.Rand, schema *arrow.Schema, n, keyRange int, seqBase int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range n {
		for c, f := range schema.Fields() {
			fb := b.Field(c)
			if f.Nullable && rng.IntN(10) == 0 {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int8Builder:
				fb.Append(int8(rng.Int()))
			case *array.Int16Builder:
				fb.Append(int16(rng.Int()))
			case *array.Int32Builder:
				fb.Append(int32(rng.IntN(keyRange)) - int32(keyRange/2))
			case *array.Int64Builder:
				if f.Name == "seq" {
					fb.Append(seqBase + int64(i))
				} else {
					fb.Append(rng.Int64() - rng.Int64())
				}
			case *array.Uint8Builder:
				fb.Append(uint8(rng.Uint32()))
			case *array.Uint16Builder:
				fb.Append(uint16(rng.Uint32()))
			case *array.Uint32Builder:
				fb.Append(rng.Uint32())
			case *array.Uint64Builder:
				fb.Append(rng.Uint64())
			case *array.Float32Builder:
				fb.Append(rng.Float32()*200 - 100)
			case *array.Float64Builder:
				fb.Append(rng.NormFloat64())
			case *array.BooleanBuilder:
				fb.Append(rng.IntN(2) == 0)
			case *array.StringBuilder:
				if f.Name == "k2" {
					fb.Append(string([]byte{'a' + byte(rng.IntN(3))}))
				} else {
					fb.Append(string(bytes.Repeat([]byte{'x' + byte(rng.IntN(3))}, rng.IntN(20))))
				}
			case *array.BinaryBuilder:
				v := make([]byte, rng.IntN(12))
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				fb.Append(v)
			case *array.Date32Builder:
				fb.Append(arrow.Date32(rng.IntN(40000)))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(rng.Int64N(1 << 50)))
			default:
				panic(fmt.Sprintf("no generator for %T", fb))
			}
		}
	}
	return b.NewRecordBatch()
}

// sortRecord stably sorts rec by key, returning the sorted record.
func sortRecord(t testing.TB, rec arrow.RecordBatch, key columnar.SortKey) arrow.RecordBatch {
	t.Helper()
	keys := rowKeys(t, rec, key)
	idx := make([]int, rec.NumRows())
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		a, err := columnar.Take(memory.DefaultAllocator, rec.Column(c), idx)
		if err != nil {
			t.Fatal(err)
		}
		cols[c] = a
		defer a.Release()
	}
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

func rowKeys(t testing.TB, rec arrow.RecordBatch, key columnar.SortKey) [][]byte {
	t.Helper()
	enc, err := columnar.NewKeyEncoder(rec.Schema(), key)
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := key.Indices(rec.Schema())
	kc := make([]arrow.Array, len(idx))
	for j, c := range idx {
		kc[j] = rec.Column(c)
	}
	keys := make([][]byte, rec.NumRows())
	for i := range keys {
		keys[i] = enc.AppendRow(nil, kc, i)
	}
	return keys
}

// writeContainer writes rec (already sorted) as a container.
func writeContainer(t testing.TB, dir string, rec arrow.RecordBatch, key columnar.SortKey, blockRows int) {
	t.Helper()
	w, err := columnar.Create(dir, columnar.WriterOptions{
		Table: "t", Projection: "p", ID: filepath.Base(dir),
		Schema: rec.Schema(), SortKey: key, BlockRows: blockRows,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() > 0 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// makeInputs writes k sorted containers of random sizes (every fifth one
// empty) and returns their directories.
func makeInputs(t testing.TB, dir string, rng *rand.Rand, k, maxRows, keyRange, blockRows int) []string {
	t.Helper()
	schema := testSchema()
	var dirs []string
	for i := range k {
		n := rng.IntN(maxRows + 1)
		if i%5 == 4 {
			n = 0
		}
		rec := randomRecord(rng, schema, n, keyRange, int64(i)*1e9)
		sorted := sortRecord(t, rec, testKey)
		rec.Release()
		d := filepath.Join(dir, fmt.Sprintf("in%03d", i))
		writeContainer(t, d, sorted, testKey, blockRows)
		sorted.Release()
		dirs = append(dirs, d)
	}
	return dirs
}

// formatRows renders each row as one string of its cells.
func formatRows(rec arrow.RecordBatch) []string {
	out := make([]string, rec.NumRows())
	var buf bytes.Buffer
	for i := range out {
		buf.Reset()
		for c := range int(rec.NumCols()) {
			a := rec.Column(c)
			if a.IsNull(i) {
				buf.WriteString("∅")
			} else {
				buf.WriteString(a.ValueStr(i))
			}
			buf.WriteByte('|')
		}
		out[i] = buf.String()
	}
	return out
}

// readContainerRows reads every row of a container, formatted.
func readContainerRows(t testing.TB, dir string) []string {
	t.Helper()
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cols := make([]int, c.Schema().NumFields())
	for i := range cols {
		cols[i] = i
	}
	r, err := c.OpenColumns(cols)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, formatRows(rec)...)
		rec.Release()
	}
}

// referenceMerge stable-sorts the concatenated rows of the inputs by key.
func referenceMerge(t testing.TB, dirs []string) []string {
	t.Helper()
	type row struct {
		key  []byte
		text string
	}
	var all []row
	for _, d := range dirs {
		c, err := columnar.Open(d, columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cols := make([]int, c.Schema().NumFields())
		for i := range cols {
			cols[i] = i
		}
		r, err := c.OpenColumns(cols)
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			keys := rowKeys(t, rec, c.SortKey())
			for i, s := range formatRows(rec) {
				all = append(all, row{keys[i], s})
			}
			rec.Release()
		}
		r.Close()
		c.Close()
	}
	slices.SortStableFunc(all, func(a, b row) int { return bytes.Compare(a.key, b.key) })
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = r.text
	}
	return out
}
