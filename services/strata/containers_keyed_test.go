package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// TestContainersCurrentRows: for a keyed table the containers table says
// how many rows of each live container a query sees: a loaded container
// of 10 rows, 3 of them updated and 2 deleted by a container of changes,
// shows 5 current; the changes' container shows its 3 rows (its 2 delete
// markers are not rows a query sees).
func TestContainersCurrentRows(t *testing.T) {
	data := t.TempDir()
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for id := int64(1); id <= 10; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(id * 10)
		b.Field(2).(*array.Int64Builder).Append(0)
		b.Field(3).(*array.BooleanBuilder).Append(false)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	sk := columnar.SortKey{{Name: "id"}}
	w, err := columnar.Create(columnar.ContainerDir(data, "k", "p", "c0000"), columnar.WriterOptions{Table: "k", Projection: "p", ID: "c0000",
		Schema: schema, SortKey: sk, PrimaryKey: []string{"id"}, BlockRows: 4, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := applier.NewTable(m)
	if err != nil {
		t.Fatal(err)
	}
	batch := tbl.NewBatch()
	types := tbl.Types()
	for i, id := range []int64{2, 4, 6, 8, 9} {
		key, _ := messages.EncodeRow(types[:1], []any{id})
		c := applier.Change{Version: uint64(100 + i), Key: key, Delete: id >= 8}
		if !c.Delete {
			row, _ := messages.EncodeRow(types[:2], []any{id, int64(-1)})
			if c.Row, err = messages.SplitRow(types[:2], row); err != nil {
				t.Fatal(err)
			}
		}
		batch.Add(c)
	}
	if _, err := batch.Write(filepath.Join(data, "k", "p", "w-5"), "w-5", applier.WriteOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	pcs := []messages.ProjectionCatalog{{Table: "k", Projection: "p", PrimaryKey: []string{"id"}, Live: []messages.ContainerRef{
		{Table: "k", Projection: "p", ID: "c0000", Rows: 10}, {Table: "k", Projection: "p", ID: "w-5", Rows: 5}}}}
	cur := currentRows(context.Background(), data, pcs)
	if cur["k/p/c0000"] != 5 || cur["k/p/w-5"] != 3 || len(cur) != 2 {
		t.Fatalf("current rows %v, want c0000 5 and w-5 3", cur)
	}
}
