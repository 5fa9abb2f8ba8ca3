package convert

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// writeKeyed writes a keyed container of rows (id, v, version, deleted)
// in blocks of 2 rows.
func writeKeyed(t *testing.T, dir string, rows [][4]any) {
	t.Helper()
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r[0].(int64))
		if r[1] == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(r[1].(string))
		}
		b.Field(2).(*array.Int64Builder).Append(r[2].(int64))
		b.Field(3).(*array.BooleanBuilder).Append(r[3].(bool))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "k", Projection: "p", ID: filepath.Base(dir), Schema: schema,
		SortKey: columnar.SortKey{{Name: "id"}}, PrimaryKey: []string{"id"}, BlockRows: 2, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestExportKeyedCurrentRows: a keyed table exports the rows a query
// sees: a row a newer version replaced, and a deleted one, are left out,
// and so are the change columns unless named.
func TestExportKeyedCurrentRows(t *testing.T) {
	root := t.TempDir()
	load, changes := filepath.Join(root, "c0000"), filepath.Join(root, "w-9")
	writeKeyed(t, load, [][4]any{{int64(1), "a", int64(0), false}, {int64(2), "b", int64(0), false}, {int64(3), "c", int64(0), false}, {int64(4), "d", int64(0), false}, {int64(5), nil, int64(0), false}})
	writeKeyed(t, changes, [][4]any{{int64(2), "B", int64(7), false}, {int64(4), nil, int64(8), true}, {int64(6), "f", int64(9), false}})
	var out bytes.Buffer
	n, err := Export(CSV, []string{load, changes}, &out, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "id,v\n1,a\n3,c\n5,\n2,B\n6,f\n"
	if n != 5 || out.String() != want {
		t.Fatalf("exported %d rows:\n%s\nwant 5:\n%s", n, out.String(), want)
	}
	out.Reset()
	if _, err := Export(CSV, []string{load, changes}, &out, ExportOptions{Columns: []string{"id", columnar.VersionColumn}}); err != nil {
		t.Fatal(err)
	}
	if want := "id,_strata_version\n1,0\n3,0\n5,0\n2,7\n6,9\n"; out.String() != want {
		t.Fatalf("named change column:\n%s\nwant\n%s", out.String(), want)
	}
}
