package columnar_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// Write a sorted container a record batch at a time, then stream one of
// its columns back block by block.
func Example() {
	data, _ := os.MkdirTemp("", "columnar-example")
	defer os.RemoveAll(data)

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	dir := columnar.ContainerDir(data, "users", "by_id", "c0001")
	w, err := columnar.Create(dir, columnar.WriterOptions{
		Table: "users", Projection: "by_id", ID: "c0001",
		Schema: schema, SortKey: columnar.SortKey{{Name: "id"}}, BlockRows: 2,
	})
	if err != nil {
		log.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"ann", "", "cy"}, []bool{true, false, true})
	rec := b.NewRecordBatch()
	if err := w.Write(rec); err != nil {
		log.Fatal(err)
	}
	rec.Release()
	m, err := w.Commit()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows", m.Rows, "blocks", len(m.Blocks), "files", len(m.Files))

	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := c.OpenColumn(1)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		arr, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(arr)
		arr.Release()
	}
	fmt.Println(filepath.Base(dir), columnar.Verify(dir))
	// Output:
	// rows 3 blocks 2 files 2
	// ["ann" (null)]
	// ["cy"]
	// c0001 <nil>
}

// Normalized keys compare with bytes.Compare in the sort key's order:
// here DESC with NULLS FIRST.
func ExampleKeyEncoder() {
	schema := arrow.NewSchema([]arrow.Field{{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	enc, err := columnar.NewKeyEncoder(schema, columnar.SortKey{{Name: "score", Desc: true, NullsFirst: true}})
	if err != nil {
		log.Fatal(err)
	}
	fb := array.NewFloat64Builder(memory.DefaultAllocator)
	fb.AppendValues([]float64{1.5, 0, 7}, nil)
	fb.AppendNull()
	col := fb.NewArray()
	defer col.Release()

	var kb columnar.KeyBatch
	if err := enc.EncodeBatch(&kb, []arrow.Array{col}, 0, col.Len()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("null before 7:", bytes.Compare(kb.Key(3), kb.Key(2)) < 0)
	fmt.Println("7 before 1.5:", bytes.Compare(kb.Key(2), kb.Key(0)) < 0)
	fmt.Println("1.5 before 0:", bytes.Compare(kb.Key(0), kb.Key(1)) < 0)
	// Output:
	// null before 7: true
	// 7 before 1.5: true
	// 1.5 before 0: true
}
