package main

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
)

func TestExportContainer(t *testing.T) {
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "r", Projection: "p", Columns: 16, Containers: 1, RowsPerContainer: 3000, BlockRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	dir := columnar.ContainerDir(data, "r", "p", ms[0].ID)
	for _, tc := range []struct {
		kind string
		opts convert.ExportOptions
	}{
		{"csv", convert.ExportOptions{Null: "NULL"}},
		{"arrow", convert.ExportOptions{}},
		{"parquet", convert.ExportOptions{}},
		{"parquet", convert.ExportOptions{ParquetCompression: convert.ParquetSnappy}},
	} {
		kind := tc.kind
		t.Run(kind+"/"+tc.opts.ParquetCompression.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out."+kind)
			n, err := exportFile([]string{dir}, path, convert.Format(kind), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if n != 3000 {
				t.Fatalf("exported %d rows, want 3000", n)
			}
			if got := countRows(t, path, kind); got != 3000 {
				t.Fatalf("file holds %d rows, want 3000", got)
			}
			if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
				t.Fatalf("temporary file left: %v", err)
			}
		})
	}
}

func countRows(t *testing.T, path, kind string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch kind {
	case "csv":
		// Generated strings hold no newlines: one line per row plus the header.
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		var n int64
		for sc.Scan() {
			n++
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		return n - 1
	case "arrow":
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var n int64
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			n += rec.NumRows()
		}
		return n
	default:
		r, err := file.NewParquetReader(f)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return r.NumRows()
	}
}

func TestPrintRowsAndFormats(t *testing.T) {
	if _, _, err := (&exportFlags{out: "x.txt"}).options(); err == nil {
		t.Fatal("unsupported --out extension accepted")
	}
	if k, _, err := (&exportFlags{out: "X.PARQUET"}).options(); err != nil || k != "parquet" {
		t.Fatalf("--out X.PARQUET: %q, %v", k, err)
	}
	tb := newTable("a", "b")
	tb.add("1", "x,y")
	out := filepath.Join(t.TempDir(), "o")
	f, _ := os.Create(out)
	if err := tb.print(f, "csv"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.ReadFile(out)
	if string(got) != "a,b\n1,\"x,y\"\n" {
		t.Fatalf("csv output %q", got)
	}
}
