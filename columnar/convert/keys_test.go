package convert

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/strata-db/strata/columnar"
)

// keyedOpts imports into a fresh directory with the sort key and primary
// key given, rows containers of at most perContainer rows.
func keyedOpts(t testing.TB, sortKey string, perContainer int, pk ...string) ImportOptions {
	key, err := columnar.ParseSortKey(sortKey)
	if err != nil {
		t.Fatal(err)
	}
	return ImportOptions{DataDir: t.TempDir(), Table: "t", Projection: "p", Name: "in.csv", SortKey: key,
		RowsPerContainer: perContainer, BlockRows: 4, PrimaryKey: pk, TempDir: t.TempDir()}
}

// checkKeyed checks the containers ms are a keyed table's: the manifest
// names the key, the schema ends with the change columns (version 0 and
// not deleted on every row), the key columns are not null, and together
// they hold rows rows.
func checkKeyed(t *testing.T, o ImportOptions, ms []*columnar.Manifest, rows int64) {
	t.Helper()
	var n int64
	for _, m := range ms {
		dir := columnar.ContainerDir(o.DataDir, m.Table, m.Projection, m.ID)
		if err := columnar.Verify(dir); err != nil {
			t.Fatalf("container %s: %v", m.ID, err)
		}
		if !slices.Equal(m.PrimaryKey, o.PrimaryKey) {
			t.Fatalf("container %s: primary key %v, want %v", m.ID, m.PrimaryKey, o.PrimaryKey)
		}
		for _, c := range m.Schema {
			if columnar.IsChangeColumn(c.Name) {
				continue
			}
			if slices.Contains(o.PrimaryKey, c.Name) == c.Nullable {
				t.Errorf("container %s: column %s nullable %v", m.ID, c.Name, c.Nullable)
			}
		}
		rec := readAll(t, dir)
		nf := int(rec.NumCols())
		if rec.ColumnName(nf-2) != columnar.VersionColumn || rec.ColumnName(nf-1) != columnar.DeletedColumn {
			t.Fatalf("container %s ends with %s, %s", m.ID, rec.ColumnName(nf-2), rec.ColumnName(nf-1))
		}
		vers, dels := rec.Column(nf-2).(*array.Int64), rec.Column(nf-1).(*array.Boolean)
		for i := range int(rec.NumRows()) {
			if vers.Value(i) != 0 || dels.Value(i) || vers.IsNull(i) || dels.IsNull(i) {
				t.Fatalf("container %s row %d: version %d, deleted %v", m.ID, i, vers.Value(i), dels.Value(i))
			}
		}
		n += rec.NumRows()
		rec.Release()
	}
	if n != rows {
		t.Fatalf("%d rows in %d containers, want %d", n, len(ms), rows)
	}
}

func TestImportCSVPrimaryKey(t *testing.T) {
	in := "id,name,amount\n3,c,1.5\n1,a,2\n2,b,\n5,e,1\n4,d,0\n7,g,\n6,f,3\n"
	for _, tt := range []struct {
		name, sortKey string
		pk            []string
	}{
		{"int key, the sort key", "id", []string{"id"}},
		{"int key, not in the sort key", "amount", []string{"id"}},
		{"text key", "name DESC", []string{"name"}},
		{"two columns, the sort key's first in another order", "name, id, amount", []string{"id", "name"}},
		{"two columns, not leading the sort key", "amount, id", []string{"name", "id"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := keyedOpts(t, tt.sortKey, 3, tt.pk...)
			ms, err := ImportCSV(strings.NewReader(in), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 3 {
				t.Fatalf("%d containers, want 3", len(ms))
			}
			checkKeyed(t, o, ms, 7)
		})
	}
}

// TestImportCSVDuplicateKey: two rows of one key anywhere in the input
// fail the import, naming the first duplicate in input order, its key and
// the lines of both rows; lines are counted as an editor counts them
// (blank lines, rows spanning lines).
func TestImportCSVDuplicateKey(t *testing.T) {
	in := "id,name,note\n" + // line 1
		"5,e,x\n" + // 2
		"1,a,\"two\nlines\"\n" + // 3-4
		"\n" + // 5, skipped
		"3,c,x\n" + // 6
		"2,b,x\n" + // 7
		"7,a,x\n" + // 8
		"4,d,x\n" + // 9
		"3,z,x\n" + // 10: repeats line 6's id (another container)
		"6,f,x\n" + // 11
		"1,q,x\n" + // 12: repeats line 3's id, after line 10
		"6,f,y\n" // 13: repeats line 11's id and name
	for _, tt := range []struct {
		name, sortKey string
		per           int
		pk            []string
		want          string
	}{
		{"across containers, key leads the sort key", "id", 3, []string{"id"}, `duplicate primary key (id)=(3): line 10 repeats line 6`},
		{"across containers, key not in the sort key", "note DESC", 3, []string{"id"}, `duplicate primary key (id)=(3): line 10 repeats line 6`},
		{"one container", "id", 100, []string{"id"}, `duplicate primary key (id)=(3): line 10 repeats line 6`},
		{"text key", "name", 2, []string{"name"}, `duplicate primary key (name)=("a"): line 8 repeats line 3`},
		{"two columns", "name, id", 4, []string{"id", "name"}, `duplicate primary key (id, name)=(6, "f"): line 13 repeats line 11`},
		{"two columns, not in the sort key", "note", 4, []string{"name", "id"}, `duplicate primary key (name, id)=("f", 6): line 13 repeats line 11`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := keyedOpts(t, tt.sortKey, tt.per, tt.pk...)
			ms, err := ImportCSV(strings.NewReader(in), o)
			var de *DuplicateKeyError
			if !errors.As(err, &de) || !errors.Is(err, columnar.ErrDuplicateKey) {
				t.Fatalf("import = %d containers, %v; want a duplicate key error", len(ms), err)
			}
			if want := "import csv in.csv: " + tt.want; err.Error() != want {
				t.Fatalf("error %q\nwant  %q", err, want)
			}
			if len(ms) == 0 {
				t.Fatal("no containers returned for the caller to remove")
			}
		})
	}
}

// TestImportDuplicateStopsEarly: a container holding a key twice ends the
// import there; the rest of the input is not read.
func TestImportDuplicateStopsEarly(t *testing.T) {
	var b strings.Builder
	b.WriteString("id\n1\n1\n")
	for i := 2; i < 1000; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	o := keyedOpts(t, "id", 10, "id")
	ms, err := ImportCSV(strings.NewReader(b.String()), o)
	if err == nil || !strings.Contains(err.Error(), "duplicate primary key (id)=(1): line 3 repeats line 2") {
		t.Fatalf("import: %v", err)
	}
	if len(ms) != 1 {
		t.Fatalf("%d containers written before the refusal, want 1", len(ms))
	}
}

func TestImportCSVNullKey(t *testing.T) {
	in := "id,name\n1,a\n2,b\n3,c\n4,\n,e\n"
	for _, tt := range []struct {
		pk   []string
		want string
	}{
		{[]string{"id"}, `import csv: in.csv:6: column "id": NULL in a primary key column`},
		{[]string{"name", "id"}, `import csv: in.csv:5: column "name": NULL in a primary key column`},
	} {
		o := keyedOpts(t, "id", 2, tt.pk...)
		o.StringsNull = true
		ms, err := ImportCSV(strings.NewReader(in), o)
		if !errors.Is(err, ErrNullKey) || err.Error() != tt.want {
			t.Errorf("key %v: %v, want %q", tt.pk, err, tt.want)
		}
		for _, m := range ms {
			os.RemoveAll(columnar.ContainerDir(o.DataDir, m.Table, m.Projection, m.ID))
		}
	}
}

func TestImportCSVKeyColumns(t *testing.T) {
	for _, tt := range []struct {
		in   string
		pk   []string
		want string
	}{
		{"id,name\n1,a\n", []string{"nope"}, `primary key column "nope" is not in the input (its columns: id, name)`},
		{"id,name\n1,a\n", []string{"id", "id"}, `column "id" named twice`},
		{"id,_strata_x\n1,a\n", []string{"id"}, `column "_strata_x": names starting with _strata_ are reserved`},
	} {
		o := keyedOpts(t, "id", 10, tt.pk...)
		ms, err := ImportCSV(strings.NewReader(tt.in), o)
		if err == nil || !strings.Contains(err.Error(), tt.want) || len(ms) != 0 {
			t.Errorf("key %v over %q: %d containers, %v; want %q", tt.pk, tt.in, len(ms), err, tt.want)
		}
		if entries, _ := os.ReadDir(filepath.Join(o.DataDir, "t", "p")); len(entries) != 0 {
			t.Errorf("key %v: %d entries written", tt.pk, len(entries))
		}
	}
}

// parquetFile writes the columns as a Parquet file.
func parquetFile(t testing.TB, schema *arrow.Schema, cols ...arrow.Array) []byte {
	t.Helper()
	rec := array.NewRecordBatch(schema, cols, int64(cols[0].Len()))
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestImportParquetPrimaryKey(t *testing.T) {
	mem := memory.DefaultAllocator
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ib := array.NewInt64Builder(mem)
	sb := array.NewStringBuilder(mem)
	for i := range 100 {
		ib.Append(int64((i * 37) % 100))
		sb.Append(fmt.Sprintf("s%d", i%10))
	}
	ids, strs := ib.NewArray(), sb.NewArray()
	good := parquetFile(t, schema, ids, strs)

	o := keyedOpts(t, "s", 30, "k")
	o.Name = "in.parquet"
	ms, err := ImportParquet(bytes.NewReader(good), o)
	if err != nil {
		t.Fatal(err)
	}
	checkKeyed(t, o, ms, 100)

	// Keyed on s, rows 1 and 11 (s1) are the first duplicate.
	o = keyedOpts(t, "k", 30, "s")
	o.Name = "in.parquet"
	_, err = ImportParquet(bytes.NewReader(good), o)
	if want := `import parquet in.parquet: duplicate primary key (s)=("s0"): row 11 repeats row 1`; err == nil || err.Error() != want || !errors.Is(err, columnar.ErrDuplicateKey) {
		t.Fatalf("duplicate: %v\nwant %q", err, want)
	}

	// A NULL key, at row 42.
	sb.Reserve(100)
	for i := range 100 {
		if i == 41 {
			sb.AppendNull()
		} else {
			sb.Append(fmt.Sprintf("u%d", i))
		}
	}
	withNull := parquetFile(t, schema, ids, sb.NewArray())
	o = keyedOpts(t, "k", 30, "s")
	o.Name = "in.parquet"
	_, err = ImportParquet(bytes.NewReader(withNull), o)
	if want := `import parquet in.parquet: row 42: column "s": NULL in a primary key column`; err == nil || err.Error() != want {
		t.Fatalf("NULL key: %v\nwant %q", err, want)
	}
}

func TestRowLines(t *testing.T) {
	var l rowLines
	for row, line := range []int{2, 3, 5, 6, 7, 10, 11} {
		l.add(int64(row), line)
	}
	for row, want := range []int{2, 3, 5, 6, 7, 10, 11} {
		if got := l.line(int64(row)); got != want {
			t.Errorf("row %d: line %d, want %d", row, got, want)
		}
	}
	if len(l.from) != 3 {
		t.Errorf("%d runs, want 3", len(l.from))
	}
}

// BenchmarkImportKeyCheck imports 1M rows of CSV (an int64 key, a text and
// a float column) into containers of 128Ki rows with and without a
// primary key; the difference is the key check. With "-key-not-sorted"
// the key is not the sort key, so each run is sorted on its own.
func BenchmarkImportKeyCheck(b *testing.B) {
	const rows = 1 << 20
	var in bytes.Buffer
	in.WriteString("id,name,amount\n")
	for i := range rows {
		// ids shuffled over the input, so each container spans the range
		fmt.Fprintf(&in, "%d,n%d,%d.5\n", (int64(i)*7919)%rows, i%1000, i%97)
	}
	for _, tt := range []struct {
		name, sortKey string
		pk            []string
	}{
		{"no-key", "id", nil},
		{"key", "id", []string{"id"}},
		{"key-not-sorted", "name", []string{"id"}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				o := keyedOpts(b, tt.sortKey, 128<<10, tt.pk...)
				o.BlockRows = columnar.DefaultBlockRows
				var ks KeyCheckStats
				o.KeyStats = &ks
				start := time.Now()
				ms, err := ImportCSV(bytes.NewReader(in.Bytes()), o)
				if err != nil || len(ms) != 8 {
					b.Fatalf("%d containers, %v", len(ms), err)
				}
				b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
				if tt.pk != nil {
					if ks.Keys != rows || ks.Runs != 8 {
						b.Fatalf("key check: %+v", ks)
					}
					b.ReportMetric(float64(ks.Elapsed.Milliseconds()), "check-ms")
					b.ReportMetric(float64(ks.RunBytes), "run-bytes")
				}
			}
		})
	}
}
