package convert

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/strata-db/strata/columnar"
)

// tableDirs generates a table of n containers of every type and returns
// their dirs and the schema.
func tableDirs(t *testing.T, n, rows int) ([]string, *arrow.Schema, int64) {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Columns: 17, KeyColumns: 2, Containers: n, RowsPerContainer: rows, BlockRows: 300, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	var total int64
	for _, m := range ms {
		dirs = append(dirs, columnar.ContainerDir(data, "t", "p", m.ID))
		total += m.Rows
	}
	schema, err := ms[0].ArrowSchema()
	if err != nil {
		t.Fatal(err)
	}
	return dirs, schema, total
}

func TestExportTableParquet(t *testing.T) {
	dirs, schema, total := tableDirs(t, 3, 700)
	var buf bytes.Buffer
	rows, err := Export(Parquet, dirs, &buf, ExportOptions{})
	if err != nil || rows != total {
		t.Fatalf("Export = %d rows, %v; want %d", rows, err, total)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NumRows() != total {
		t.Fatalf("parquet holds %d rows, want %d", got.NumRows(), total)
	}
	for i, f := range schema.Fields() {
		if g := got.Schema().Field(i); g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			t.Errorf("column %d: %s %s, want %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
	}
	// The rows are the containers' in order.
	var want []arrow.RecordBatch
	for _, d := range dirs {
		want = append(want, readAll(t, d))
	}
	wantAll := concatRecords(t, want[0].Schema(), want)
	tr := array.NewTableReader(got, total)
	defer tr.Release()
	var recs []arrow.RecordBatch
	for tr.Next() {
		r := tr.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	assertSameRows(t, concatRecords(t, got.Schema(), recs), wantAll)
}

func TestExportTableArrowCodecs(t *testing.T) {
	dirs, _, total := tableDirs(t, 2, 500)
	for _, c := range []ArrowCompression{ArrowUncompressed, ArrowLZ4, ArrowZstd} {
		var buf bytes.Buffer
		if _, err := Export(Arrow, dirs, &buf, ExportOptions{ArrowCompression: c}); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		fr, err := ipc.NewFileReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		var rows int64
		for i := range fr.NumRecords() {
			r, err := fr.RecordBatchAt(i)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			rows += r.NumRows()
		}
		if rows != total {
			t.Errorf("%s: %d rows, want %d", c, rows, total)
		}
	}
	if c, err := ParseArrowCompression("lz4"); err != nil || c != ArrowLZ4 {
		t.Errorf("ParseArrowCompression(lz4) = %v, %v", c, err)
	}
	if _, err := ParseArrowCompression("snappy"); err == nil {
		t.Error("ParseArrowCompression(snappy) succeeded")
	}
}

// nullsContainer writes a container of an int64 key, a nullable utf8 and
// a nullable float64 column holding rows, and returns its dir.
func nullsContainer(t *testing.T, keys []int64, names []*string, amounts []*float64) string {
	t.Helper()
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "order id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	dir := filepath.Join(t.TempDir(), "c0000")
	w, err := columnar.Create(dir, columnar.WriterOptions{Schema: schema, SortKey: columnar.SortKey{{Name: "order id"}}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i, k := range keys {
			b.Field(0).(*array.Int64Builder).Append(k)
			if names[i] == nil {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(*names[i])
			}
			if amounts[i] == nil {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.Float64Builder).Append(*amounts[i])
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ptr[T any](v T) *T { return &v }

func TestExportCSVNullsAndEmpty(t *testing.T) {
	dir := nullsContainer(t, []int64{1, 2}, []*string{ptr("a,b"), nil}, []*float64{nil, ptr(2.5)})
	var buf bytes.Buffer
	if _, err := Export(CSV, []string{dir}, &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "order id,name,amount\n1,\"a,b\",\n2,,2.5\n"; buf.String() != want {
		t.Errorf("CSV = %q, want %q", buf.String(), want)
	}
	buf.Reset()
	if _, err := Export(CSV, []string{dir}, &buf, ExportOptions{Null: "NULL", Columns: []string{"amount", "order id"}}); err != nil {
		t.Fatal(err)
	}
	if want := "amount,order id\nNULL,1\n2.5,2\n"; buf.String() != want {
		t.Errorf("CSV of --columns amount,order id = %q, want %q", buf.String(), want)
	}
	if _, err := Export(CSV, []string{dir}, &buf, ExportOptions{Columns: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `no column "nope"`) {
		t.Errorf("an unknown column: %v", err)
	}

	// An empty string, or one that spells NULL, is quoted: it is not NULL.
	strs := nullsContainer(t, []int64{1, 2, 3}, []*string{ptr(""), ptr("NULL"), ptr(" x")}, []*float64{nil, nil, nil})
	for null, want := range map[string]string{
		"":     "order id,name,amount\n1,\"\",\n2,NULL,\n3,\" x\",\n",
		"NULL": "order id,name,amount\n1,\"\",NULL\n2,\"NULL\",NULL\n3,\" x\",NULL\n",
	} {
		buf.Reset()
		if _, err := Export(CSV, []string{strs}, &buf, ExportOptions{Null: null}); err != nil {
			t.Fatal(err)
		}
		if buf.String() != want {
			t.Errorf("CSV with NULL as %q = %q, want %q", null, buf.String(), want)
		}
	}

	empty := nullsContainer(t, nil, nil, nil)
	for _, tc := range []struct {
		format Format
		want   string
	}{{CSV, "order id,name,amount\n"}, {JSONL, ""}} {
		buf.Reset()
		rows, err := Export(tc.format, []string{empty}, &buf, ExportOptions{})
		if err != nil || rows != 0 || buf.String() != tc.want {
			t.Errorf("%s of a 0-row table: %d rows, %q, %v; want %q", tc.format, rows, buf.String(), err, tc.want)
		}
	}
	buf.Reset()
	if _, err := Export(Parquet, []string{empty}, &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != 0 || pf.MetaData().Schema.NumColumns() != 3 {
		t.Errorf("parquet of a 0-row table: %d rows, %d columns", pf.NumRows(), pf.MetaData().Schema.NumColumns())
	}
}

func TestExportJSONL(t *testing.T) {
	dir := nullsContainer(t, []int64{1, 2, 3}, []*string{ptr("x\ny"), nil, ptr("z")}, []*float64{nil, ptr(2.5), ptr(math.Inf(1))})
	var buf bytes.Buffer
	if _, err := Export(JSONL, []string{dir}, &buf, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `{"order id":1,"name":"x\ny","amount":null}` + "\n" +
		`{"order id":2,"name":null,"amount":2.5}` + "\n" +
		`{"order id":3,"name":"z","amount":"Infinity"}` + "\n"
	if buf.String() != want {
		t.Errorf("JSONL =\n%s\nwant\n%s", buf.String(), want)
	}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Errorf("line %q: %v", sc.Text(), err)
		}
	}
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]Format{"a.csv": CSV, "b.PARQUET": Parquet, "c.arrow": Arrow, "d.jsonl": JSONL, "e.ndjson": JSONL} {
		if got, err := FormatOf(path); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := FormatOf("x.xlsx"); err == nil {
		t.Error("FormatOf(x.xlsx) succeeded")
	}
}
