package convert

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
)

// source generates one container of every type and returns its dir.
func source(t *testing.T, rows int) (string, *columnar.Manifest) {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Columns: 17, KeyColumns: 2, Containers: 1, RowsPerContainer: rows, BlockRows: 300, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return columnar.ContainerDir(data, "t", "p", ms[0].ID), ms[0]
}

// readAll returns every column of the container, whole.
func readAll(t *testing.T, dir string) arrow.RecordBatch {
	t.Helper()
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]int, c.Schema().NumFields())
	for i := range cols {
		cols[i] = i
	}
	br, err := c.OpenColumns(cols)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var recs []arrow.RecordBatch
	for {
		r, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return concatRecords(t, c.Schema(), recs)
}

func concatRecords(t *testing.T, schema *arrow.Schema, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, schema.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		var err error
		if len(parts) == 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, schema.Field(i).Type, 0)
			continue
		}
		if cols[i], err = array.Concatenate(parts, memory.DefaultAllocator); err != nil {
			t.Fatal(err)
		}
	}
	return array.NewRecordBatch(schema, cols, n)
}

func assertSameRows(t *testing.T, got, want arrow.RecordBatch) {
	t.Helper()
	if got.NumRows() != want.NumRows() || got.NumCols() != want.NumCols() {
		t.Fatalf("got %dx%d, want %dx%d", got.NumRows(), got.NumCols(), want.NumRows(), want.NumCols())
	}
	for i := range int(want.NumCols()) {
		if !arrow.TypeEqual(got.Column(i).DataType(), want.Column(i).DataType()) {
			t.Errorf("column %s: type %s, want %s", want.ColumnName(i), got.Column(i).DataType(), want.Column(i).DataType())
			continue
		}
		if !array.ApproxEqual(got.Column(i), want.Column(i), array.WithNaNsEqual(true)) {
			t.Errorf("column %s differs", want.ColumnName(i))
		}
	}
}

func importOpts(t *testing.T, m *columnar.Manifest, perContainer int) ImportOptions {
	return ImportOptions{DataDir: t.TempDir(), Table: "t", Projection: "p", SortKey: m.SortKey, RowsPerContainer: perContainer, BlockRows: 300}
}

func TestParquetRoundTrip(t *testing.T) {
	dir, m := source(t, 1000)
	want := readAll(t, dir)
	var buf bytes.Buffer
	if err := ExportParquet(dir, &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	o := importOpts(t, m, 1000)
	ms, err := ImportParquet(bytes.NewReader(buf.Bytes()), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("%d containers", len(ms))
	}
	got := readAll(t, columnar.ContainerDir(o.DataDir, "t", "p", ms[0].ID))
	assertSameRows(t, got, want)
	if err := columnar.Verify(columnar.ContainerDir(o.DataDir, "t", "p", ms[0].ID)); err != nil {
		t.Fatal(err)
	}

	// Split into K containers, each sorted, together holding every row.
	o = importOpts(t, m, 0)
	o.Containers = 3
	ms, err = ImportParquet(bytes.NewReader(buf.Bytes()), o)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, cm := range ms {
		rows += cm.Rows
		if err := columnar.Verify(columnar.ContainerDir(o.DataDir, "t", "p", cm.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if len(ms) != 3 || rows != 1000 {
		t.Fatalf("%d containers of %d rows in all", len(ms), rows)
	}
}

func TestCSVRoundTrip(t *testing.T) {
	dir, m := source(t, 700)
	want := readAll(t, dir)
	var buf bytes.Buffer
	if err := ExportCSV(dir, &buf, ExportOptions{Null: `\N`}); err != nil {
		t.Fatal(err)
	}
	o := importOpts(t, m, 700)
	o.Schema = want.Schema()
	o.Nulls, o.StringsNull = []string{`\N`}, true
	ms, err := ImportCSV(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, columnar.ContainerDir(o.DataDir, "t", "p", ms[0].ID))
	assertSameRows(t, got, want)
}

func TestArrowExport(t *testing.T) {
	dir, m := source(t, 1000)
	want := readAll(t, dir)
	var buf bytes.Buffer
	if err := ExportArrow(dir, &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	fr, err := ipc.NewFileReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if fr.NumRecords() != len(m.Blocks) {
		t.Fatalf("%d record batches, want %d", fr.NumRecords(), len(m.Blocks))
	}
	var recs []arrow.RecordBatch
	for i := range fr.NumRecords() {
		r, err := fr.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	assertSameRows(t, concatRecords(t, fr.Schema(), recs), want)

	buf.Reset()
	if err := ExportArrow(dir, &buf, ExportOptions{ArrowStream: true}); err != nil {
		t.Fatal(err)
	}
	sr, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for sr.Next() {
		rows += sr.RecordBatch().NumRows()
	}
	if rows != m.Rows {
		t.Fatalf("stream holds %d rows, want %d", rows, m.Rows)
	}
}

func TestImportCSVSortsIntoContainers(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "people.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "age", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	o := ImportOptions{
		DataDir: t.TempDir(), Table: "people", Projection: "by_age", Schema: schema, StringsNull: true,
		SortKey:          columnar.SortKey{{Name: "age", Desc: true, NullsFirst: true}, {Name: "name"}},
		RowsPerContainer: 4,
	}
	ms, err := ImportCSV(f, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Rows != 4 || ms[1].Rows != 2 {
		t.Fatalf("containers: %d", len(ms))
	}
	var got []string
	for _, m := range ms {
		var out bytes.Buffer
		if err := ExportCSV(columnar.ContainerDir(o.DataDir, o.Table, o.Projection, m.ID), &out, ExportOptions{NoHeader: true, Null: "NULL"}); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimSpace(out.String()))
	}
	want := []string{
		"bob,NULL,3,Bergen\ncarol,41,7.5,Oslo\nalice,30,9.25,NULL\ndave,30,NULL,Oslo",
		"\"frank, jr\",41,-0.5,Oslo\nerin,25,1000,Bergen",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("container %d:\n%s\nwant\n%s", i, got[i], want[i])
		}
	}
}

func TestImportErrors(t *testing.T) {
	if _, err := ImportCSV(strings.NewReader("a\n1\n"), ImportOptions{DataDir: t.TempDir(), Table: "t", Projection: "p"}); err == nil {
		t.Fatal("import without a sort key succeeded")
	}
	_, err := ImportCSV(strings.NewReader("a\n1\n"), ImportOptions{DataDir: t.TempDir(), Table: "t", Projection: "p", SortKey: columnar.SortKey{{Name: "b"}}})
	if !errors.Is(err, columnar.ErrSchemaMismatch) {
		t.Fatalf("unknown key column: %v", err)
	}
	if _, err := ImportParquet(bytes.NewReader([]byte("not parquet")), ImportOptions{DataDir: t.TempDir(), Table: "t", Projection: "p", SortKey: columnar.SortKey{{Name: "a"}}}); err == nil {
		t.Fatal("garbage parquet accepted")
	}
	if err := ExportCSV(filepath.Join(t.TempDir(), "nope"), io.Discard, ExportOptions{}); !errors.Is(err, columnar.ErrNotFound) {
		t.Fatalf("export of a missing container: %v", err)
	}
}
