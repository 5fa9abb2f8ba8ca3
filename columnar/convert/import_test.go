package convert

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/strata-db/strata/columnar"
)

func csvOpts(t testing.TB, key string) ImportOptions {
	return ImportOptions{DataDir: t.TempDir(), Table: "t", Projection: "p", Name: "in.csv", SortKey: columnar.SortKey{{Name: key}}}
}

func TestImportCSVWithoutRows(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	for _, tt := range []struct {
		name   string
		in     string
		schema *arrow.Schema
	}{
		{"header only, inferred", "a,b\n", nil},
		{"header only without newline, inferred", "a,b", nil},
		{"header only, schema", "a,b\n", schema},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := csvOpts(t, "a")
			o.Schema = tt.schema
			ms, err := ImportCSV(strings.NewReader(tt.in), o)
			if err != nil || len(ms) != 0 {
				t.Fatalf("import = %d containers, %v; want none and no error", len(ms), err)
			}
			if entries, _ := os.ReadDir(filepath.Join(o.DataDir, "t", "p")); len(entries) != 0 {
				t.Fatalf("%d entries written", len(entries))
			}
		})
	}
	if _, err := ImportCSV(strings.NewReader(""), csvOpts(t, "a")); err == nil || !strings.Contains(err.Error(), "in.csv") {
		t.Fatalf("empty input: %v, want an error naming the input", err)
	}
}

// TestImportCSVMalformed feeds input arrow's readers choke on: each must
// be an error naming the input, never a panic.
func TestImportCSVMalformed(t *testing.T) {
	for _, in := range []string{
		"a,b\n1,2,3\n",
		"a,b\n1\n",
		"a,b\n1,2\n3\n",
		"a,b\n\"1,2\n",
		"a,b\n1,x\n2,y\n\"3\"x,z\n",
	} {
		o := csvOpts(t, "a")
		ms, err := ImportCSV(strings.NewReader(in), o)
		if err == nil {
			t.Errorf("%q: imported %d containers", in, len(ms))
			continue
		}
		if !strings.Contains(err.Error(), "in.csv") {
			t.Errorf("%q: error does not name the input: %v", in, err)
		}
	}
}

func TestImportCSVNulls(t *testing.T) {
	in := "id,s,x\n1,,\n2,NULL,NULL\n3,-,-\n4,v,5\n"
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	for _, tt := range []struct {
		name        string
		nulls       []string
		stringsNull bool
		// want: rows 1-4 exported with NULL as "~".
		want string
		bad  bool
	}{
		{name: "default", want: "1,,~\n2,NULL,~\n3,-,-\n4,v,5", bad: true}, // "-" is no int
		{name: "default, strings too", stringsNull: true, want: "1,~,~\n2,~,~\n3,-,-\n4,v,5", bad: true},
		{name: "dash", nulls: []string{"-"}, stringsNull: true, want: "1,,\n2,NULL,NULL\n3,~,~\n4,v,5", bad: true}, // "" is no int
		{name: "dash and defaults", nulls: []string{"", "NULL", "-"}, stringsNull: true, want: "1,~,~\n2,~,~\n3,~,~\n4,v,5"},
		// The empty string is exported as "", as DuckDB does, apart from NULL.
		{name: "dash and defaults, not strings", nulls: []string{"", "NULL", "-"}, want: "1,\"\",~\n2,NULL,~\n3,-,~\n4,v,5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := csvOpts(t, "id")
			o.Schema, o.Nulls, o.StringsNull = schema, tt.nulls, tt.stringsNull
			ms, err := ImportCSV(strings.NewReader(in), o)
			if tt.bad {
				if err == nil {
					t.Fatal("a field that is neither NULL nor an int was accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := ExportCSV(columnar.ContainerDir(o.DataDir, "t", "p", ms[0].ID), &out, ExportOptions{NoHeader: true, Null: "~"}); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	// Inferred types: NULL does not make a number column a string one.
	o := csvOpts(t, "id")
	ms, err := ImportCSV(strings.NewReader("id,x\n2,NULL\n1,7\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	if typ := ms[0].Schema[1].Type; typ != "int64" {
		t.Fatalf("column x inferred as %s, want int64", typ)
	}
}

func TestImportFirstIDAndProgress(t *testing.T) {
	var b strings.Builder
	b.WriteString("k\n")
	for i := range 25 {
		b.WriteString(strings.Repeat("9", 1+i%5) + "\n")
	}
	o := csvOpts(t, "k")
	o.IDPrefix, o.FirstID, o.RowsPerContainer = "c", 7, 10
	var calls [][2]int64
	o.Progress = func(containers int, rows int64) { calls = append(calls, [2]int64{int64(containers), rows}) }
	ms, err := ImportCSV(strings.NewReader(b.String()), o)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"c0007", "c0008", "c0009"} {
		m, err := columnar.ReadManifest(columnar.ContainerDir(o.DataDir, "t", "p", want))
		if err != nil || ms[i].ID != want || m.ID != want {
			t.Fatalf("container %d: %s (manifest %v), want %s", i, ms[i].ID, err, want)
		}
	}
	if want := [][2]int64{{1, 10}, {2, 20}, {3, 25}}; len(calls) != 3 || calls[0] != want[0] || calls[1] != want[1] || calls[2] != want[2] {
		t.Fatalf("progress calls %v, want %v", calls, want)
	}
	o.FirstID = -1
	if _, err := ImportCSV(strings.NewReader(b.String()), o); err == nil {
		t.Fatal("negative FirstID accepted")
	}
}

func TestImportCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var b strings.Builder
	b.WriteString("k\n")
	for i := range 100 {
		b.WriteString(strings.Repeat("1", 1+i%9) + "\n")
	}
	o := csvOpts(t, "k")
	o.Context, o.RowsPerContainer, o.BlockRows = ctx, 10, 10
	// Cancel once the first container is written.
	o.Progress = func(int, int64) { cancel() }
	ms, err := ImportCSV(strings.NewReader(b.String()), o)
	if !errors.Is(err, context.Canceled) || len(ms) != 1 {
		t.Fatalf("import = %d containers, %v; want 1 and context.Canceled", len(ms), err)
	}
	// Parquet: canceled before it starts.
	dir, m := source(t, 100)
	var pq bytes.Buffer
	if err := ExportParquet(dir, &pq, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	po := importOpts(t, m, 50)
	po.Context = ctx
	if ms, err := ImportParquet(bytes.NewReader(pq.Bytes()), po); !errors.Is(err, context.Canceled) {
		t.Fatalf("parquet import = %d containers, %v; want context.Canceled", len(ms), err)
	}
}

// TestImportDamagedParquet imports a good Parquet file with bytes damaged
// in many places: every import must end in a result or an error, not a
// panic.
func TestImportDamagedParquet(t *testing.T) {
	dir, m := source(t, 300)
	var good bytes.Buffer
	if err := ExportParquet(dir, &good, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	data := good.Bytes()
	step := max(1, len(data)/150)
	failed := 0
	for off := 0; off < len(data); off += step {
		bad := bytes.Clone(data)
		bad[off] ^= 0xa5
		o := importOpts(t, m, 300)
		o.Name = "bad.parquet"
		if _, err := ImportParquet(bytes.NewReader(bad), o); err != nil {
			failed++
			if !strings.Contains(err.Error(), "bad.parquet") {
				t.Fatalf("offset %d: error does not name the file: %v", off, err)
			}
		}
	}
	for _, n := range []int{0, 4, len(data) / 2, len(data) - 1} {
		if _, err := ImportParquet(bytes.NewReader(data[:n]), importOpts(t, m, 300)); err == nil {
			t.Fatalf("file cut to %d bytes imported", n)
		}
	}
	if failed == 0 {
		t.Fatal("no damaged file failed to import")
	}
}

func FuzzImportCSV(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,x\n2,y\n", "a,b\n", "a\n\n", "a,b\n1,2,3\n", "a\n\"1\n", "a,b\n,\nNULL,NULL\n", "a;b\n1;2\n",
		"a,b\n1.5,true\n-3,false\n", "a,b\n2020-01-01,\"q\"\"q\"\n",
		"a,b\n2024-01-15 10:30:00,2024-01-15T10:30:00.5+02:00\n", "\ufeffa,\n1,x\n", "a,a\n1,2\n", "a,b\n1,\"x\ny\"\n2,\xff\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	var n int
	f.Fuzz(func(t *testing.T, in string) {
		n++
		o := ImportOptions{DataDir: dir, Table: "t", Projection: "p", Name: "fuzz.csv", IDPrefix: "f", FirstID: n * 1000,
			SortKey: columnar.SortKey{{Name: "a"}}, RowsPerContainer: 4, BlockRows: 2}
		ms, err := ImportCSV(strings.NewReader(in), o)
		if err != nil {
			return
		}
		for _, m := range ms {
			d := columnar.ContainerDir(dir, "t", "p", m.ID)
			if err := columnar.Verify(d); err != nil {
				t.Fatalf("imported container does not verify: %v", err)
			}
			os.RemoveAll(d)
		}
	})
}

func TestParquetCompression(t *testing.T) {
	dir, m := source(t, 2000)
	want := readAll(t, dir)
	sizes := map[ParquetCompression]int{}
	for _, c := range []ParquetCompression{ParquetZstd, ParquetSnappy, ParquetUncompressed} {
		var buf bytes.Buffer
		if err := ExportParquet(dir, &buf, ExportOptions{ParquetCompression: c}); err != nil {
			t.Fatal(err)
		}
		sizes[c] = buf.Len()
		pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
		if err != nil {
			t.Fatal(err)
		}
		if got := cc.Compression(); got.String() != map[ParquetCompression]string{ParquetZstd: "ZSTD", ParquetSnappy: "SNAPPY", ParquetUncompressed: "UNCOMPRESSED"}[c] {
			t.Errorf("%s: column chunk compressed with %s", c, got)
		}
		pf.Close()
		o := importOpts(t, m, 2000)
		ms, err := ImportParquet(bytes.NewReader(buf.Bytes()), o)
		if err != nil {
			t.Fatal(err)
		}
		assertSameRows(t, readAll(t, columnar.ContainerDir(o.DataDir, "t", "p", ms[0].ID)), want)
		if p, err := ParseParquetCompression(c.String()); err != nil || p != c {
			t.Errorf("ParseParquetCompression(%q) = %v, %v", c, p, err)
		}
	}
	if sizes[ParquetZstd] >= sizes[ParquetUncompressed] {
		t.Errorf("zstd file %d bytes, uncompressed %d", sizes[ParquetZstd], sizes[ParquetUncompressed])
	}
	if err := ExportParquet(dir, io.Discard, ExportOptions{ParquetCompression: 9}); err == nil {
		t.Error("unknown compression accepted")
	}
	if _, err := ParseParquetCompression("gzip"); err == nil {
		t.Error("gzip parsed")
	}
}
