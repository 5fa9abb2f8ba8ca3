package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
)

func TestImportCSV(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,name,score\n")
	for i := range 2500 {
		// ids descend, so every container must be re-sorted.
		fmt.Fprintf(&b, "%d,n%d,%d.5\n", 2500-i, i%7, i)
	}
	b.WriteString(",nullid,1.0\n")
	path := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	f := &loadFlags{table: "imp", projection: "p", rows: 1000, blockRows: 256, csvPath: path, sortKey: "id"}
	// The first import writes c0000..c0002, the second adds c0003..c0005.
	for load, firstID := range []int{0, 3} {
		ms, err := importLoad(context.Background(), data, f, columnar.CompressionLZ4)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for i, m := range ms {
			if want := fmt.Sprintf("c%04d", firstID+i); m.ID != want {
				t.Fatalf("load %d: container %d named %s, want %s", load, i, m.ID, want)
			}
			total += m.Rows
			dir := columnar.ContainerDir(data, "imp", "p", m.ID)
			if err := columnar.Verify(dir); err != nil {
				t.Fatal(err)
			}
			if got, err := columnar.ReadManifest(dir); err != nil || got.ID != m.ID || got.BlockRows != 256 {
				t.Fatalf("%s: manifest %+v, %v", m.ID, got, err)
			}
			checkSortedInt64(t, dir)
		}
		if total != 2501 || len(ms) != 3 {
			t.Fatalf("load %d: %d rows in %d containers, want 2501 in 3", load, total, len(ms))
		}
	}
	checkNoTemp(t, data)
}

// checkNoTemp fails if anything dot-prefixed is left under dir.
func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".") {
			t.Errorf("%s left behind", path)
		}
		return err
	})
}

func TestImportCSVNulls(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(path, []byte("id,s\n3,NULL\n2,\n1,-\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		nulls []string
		want  int // NULLs in column s
	}{
		{nil, 2},
		{[]string{"-"}, 1},
		{[]string{"-", "NULL", ""}, 3},
	} {
		data := filepath.Join(t.TempDir(), "data")
		f := &loadFlags{table: "n", projection: "p", rows: 10, blockRows: 256, csvPath: path, sortKey: "id", nulls: tt.nulls}
		ms, err := importLoad(context.Background(), data, f, columnar.CompressionLZ4)
		if err != nil {
			t.Fatal(err)
		}
		c, err := columnar.Open(columnar.ContainerDir(data, "n", "p", ms[0].ID), columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.OpenColumn(1)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a.NullN() != tt.want {
			t.Errorf("--null %q: %d NULLs, want %d", tt.nulls, a.NullN(), tt.want)
		}
		a.Release()
		r.Close()
	}
}

func TestImportFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csvPath, []byte("a,b\n3,x\n1,y\n2,z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyPath := filepath.Join(dir, "empty.csv")
	if err := os.WriteFile(emptyPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	headerPath := filepath.Join(dir, "header.csv")
	if err := os.WriteFile(headerPath, []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		flags loadFlags
		check func(error) bool
	}{
		{"unknown sort column", context.Background(), loadFlags{csvPath: csvPath, sortKey: "nope"},
			func(err error) bool { return errors.Is(err, columnar.ErrSchemaMismatch) }},
		{"no sort key", context.Background(), loadFlags{csvPath: csvPath},
			func(err error) bool { return errors.Is(err, errUsage) }},
		{"bad sort key", context.Background(), loadFlags{csvPath: csvPath, sortKey: "a sideways"},
			func(err error) bool { return errors.Is(err, errUsage) }},
		{"csv and parquet", context.Background(), loadFlags{csvPath: csvPath, pqPath: csvPath, sortKey: "a"},
			func(err error) bool { return errors.Is(err, errUsage) }},
		{"missing file", context.Background(), loadFlags{csvPath: filepath.Join(dir, "nope.csv"), sortKey: "a"},
			func(err error) bool { return errors.Is(err, os.ErrNotExist) }},
		{"empty file", context.Background(), loadFlags{csvPath: emptyPath, sortKey: "a"},
			func(err error) bool { return err != nil }},
		{"header only", context.Background(), loadFlags{csvPath: headerPath, sortKey: "a"},
			func(err error) bool { return strings.Contains(err.Error(), "no rows") }},
		{"not parquet", context.Background(), loadFlags{pqPath: csvPath, sortKey: "a"},
			func(err error) bool { return err != nil }},
		{"interrupted", canceled, loadFlags{csvPath: csvPath, sortKey: "a"},
			func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			f := tt.flags
			f.table, f.projection, f.rows, f.blockRows = "imp", "p", 2, 256
			ms, err := importLoad(tt.ctx, data, &f, columnar.CompressionLZ4)
			if err == nil || !tt.check(err) {
				t.Fatalf("import = %d containers, %v", len(ms), err)
			}
			if entries, _ := os.ReadDir(filepath.Join(data, "imp", "p")); len(entries) != 0 {
				t.Fatalf("a failed import left %d entries behind", len(entries))
			}
		})
	}
}

// checkSortedInt64 checks column 0 (int64, NULLS LAST) is ascending.
func checkSortedInt64(t *testing.T, dir string) {
	t.Helper()
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br, err := c.OpenColumns([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var prev int64 = -1 << 63
	sawNull := false
	for {
		rec, err := br.Next()
		if err != nil {
			break
		}
		col := rec.Column(0).(*array.Int64)
		for i := range col.Len() {
			if col.IsNull(i) {
				sawNull = true
				continue
			}
			if sawNull || col.Value(i) < prev {
				t.Fatalf("%s: row out of order at value %d after %d (null seen %v)", dir, col.Value(i), prev, sawNull)
			}
			prev = col.Value(i)
		}
		rec.Release()
	}
}

func TestImportParquetRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ms, err := columnar.Generate(dir, columnar.GenOptions{Table: "g", Projection: "p", Columns: 15, Containers: 1, RowsPerContainer: 3000})
	if err != nil {
		t.Fatal(err)
	}
	pq := filepath.Join(dir, "g.parquet")
	if _, err := exportFile([]string{columnar.ContainerDir(dir, "g", "p", ms[0].ID)}, pq, convert.Parquet, convert.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	f := &loadFlags{table: "g", projection: "p", rows: 2000, blockRows: columnar.DefaultBlockRows, pqPath: pq, sortKey: "k0 DESC"}
	out, err := importLoad(context.Background(), filepath.Join(dir, "data"), f, columnar.CompressionZstd)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Rows != 2000 || out[1].Rows != 1000 || len(out[0].Schema) != 15 {
		t.Fatalf("imported %d containers: %+v", len(out), out)
	}
	for _, m := range out {
		if m.Compression != "zstd" || !m.SortKey.Equal(columnar.SortKey{{Name: "k0", Desc: true, NullsFirst: true}}) {
			t.Fatalf("%s: compression %s, sort key %s", m.ID, m.Compression, m.SortKey)
		}
		if err := columnar.Verify(columnar.ContainerDir(filepath.Join(dir, "data"), "g", "p", m.ID)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGenerateAddsToAProjection(t *testing.T) {
	data := t.TempDir()
	opts := columnar.GenOptions{Table: "g", Projection: "p", Columns: 4, Containers: 2, RowsPerContainer: 100, Seed: 1}
	first, err := generate(context.Background(), data, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := generate(context.Background(), data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].ID != "c0000" || first[1].ID != "c0001" || second[0].ID != "c0002" || second[1].ID != "c0003" {
		t.Fatalf("ids %s %s then %s %s", first[0].ID, first[1].ID, second[0].ID, second[1].ID)
	}
	for _, id := range []string{"c0000", "c0001", "c0002", "c0003"} {
		dir := columnar.ContainerDir(data, "g", "p", id)
		if err := columnar.Verify(dir); err != nil {
			t.Fatal(err)
		}
		m, err := columnar.ReadManifest(dir)
		if err != nil || m.ID != id {
			t.Fatalf("%s: manifest names %v, %v", id, m.ID, err)
		}
	}
	checkNoTemp(t, data)
}

func TestNextContainerNumber(t *testing.T) {
	for _, tt := range []struct {
		entries []string
		want    int
	}{
		{nil, 0},
		{[]string{"c0000", "c0001"}, 2},
		{[]string{"c0007", "c0002"}, 8},
		{[]string{"m-0001"}, 1},
		{[]string{".c0000.tmp-123"}, 0},
		{[]string{"c0003", ".c0009.tmp-1", "cx"}, 4},
		{[]string{"c12345"}, 12346},
	} {
		dir := t.TempDir()
		for _, e := range tt.entries {
			if err := os.Mkdir(filepath.Join(dir, e), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := nextContainerNumber(dir); err != nil || got != tt.want {
			t.Errorf("%v: next %d, %v; want %d", tt.entries, got, err, tt.want)
		}
	}
	if got, err := nextContainerNumber(filepath.Join(t.TempDir(), "none")); err != nil || got != 0 {
		t.Errorf("missing projection: next %d, %v", got, err)
	}
}

// loadCSV runs strata load on a CSV file holding in, without a scheduler,
// and returns the manifests of the containers written.
func loadCSV(t *testing.T, in string, args ...string) ([]*columnar.Manifest, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	args = append([]string{"--table", "t", "--csv", path, "--data", data, "--no-register"}, args...)
	if err := runLoad(context.Background(), args); err != nil {
		if entries, _ := os.ReadDir(filepath.Join(data, "t", "p")); len(entries) != 0 {
			t.Errorf("a failed load left %d entries behind", len(entries))
		}
		// Name the file as the user did, not by its temporary path.
		return nil, errors.New(strings.ReplaceAll(err.Error(), path, "t.csv"))
	}
	var ms []*columnar.Manifest
	for i := 0; ; i++ {
		m, err := columnar.ReadManifest(columnar.ContainerDir(data, "t", "p", fmt.Sprintf("c%04d", i)))
		if err != nil {
			break
		}
		ms = append(ms, m)
	}
	if len(ms) == 0 {
		t.Fatal("no containers written")
	}
	return ms, nil
}

// columnTypes renders a manifest's columns as "name type[/zone] ...".
func columnTypes(m *columnar.Manifest) string {
	var b []string
	for _, c := range m.Schema {
		s := c.Name + " " + c.Type
		if c.TimeZone != "" {
			s += "/" + c.TimeZone
		}
		b = append(b, s)
	}
	return strings.Join(b, ", ")
}

func TestLoadCSVTimestamps(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		// DuckDB: TIMESTAMP.
		{"id,ts\n1,2024-01-15 10:30:00\n", "id int64, ts timestamp_us"},
		// DuckDB: TIMESTAMPTZ.
		{"id,ts\n1,2024-01-15T10:30:00Z\n", "id int64, ts timestamp_us/UTC"},
		{"id,ts\n1,2024-01-15T10:30:00+02:00\n2,2024-01-15 10:30:00.5+0200\n", "id int64, ts timestamp_us/UTC"},
		{"id,d\n1,2024-01-15\n", "id int64, d date32"},
	} {
		ms, err := loadCSV(t, tt.in, "--sort-key", "id")
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got := columnTypes(ms[0]); got != tt.want {
			t.Errorf("%q: columns %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestLoadCSVFlags(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		args     []string
		want     string
		rows     int64
	}{
		{"schema", "id,ts,name,amount\n1,2024-01-15 10:30:00,a,2.5\n",
			[]string{"--schema", `id int32, ts timestamptz, "name" varchar, amount double`}, "id int32, ts timestamp_us/UTC, name utf8, amount float64", 1},
		{"tab", "id\tname\n1\ta,b\n2\tc\n", []string{"--delimiter", `\t`}, "id int64, name utf8", 2},
		{"semicolon", "id;v\n1;2,5\n", []string{"--delimiter", ";"}, "id int64, v utf8", 1},
		{"no header", "1,x\n2,y\n3,z\n", []string{"--no-header", "--sort-key", "column0"}, "column0 int64, column1 utf8", 3},
		{"no header, schema", "1,x\n2,y\n", []string{"--no-header", "--schema", "id uint16, s text"}, "id uint16, s utf8", 2},
		{"all three", "1|2024-01-15\n", []string{"--no-header", "--delimiter", "|", "--schema", "id int64, d date"}, "id int64, d date32", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--sort-key", "id"}, tt.args...)
			ms, err := loadCSV(t, tt.in, args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := columnTypes(ms[0]); got != tt.want || ms[0].Rows != tt.rows {
				t.Fatalf("columns %s, %d rows; want %s, %d rows", got, ms[0].Rows, tt.want, tt.rows)
			}
		})
	}
}

func TestLoadCSVErrors(t *testing.T) {
	late := "id,amount\n1,5\n2,6\n" + strings.Repeat("3,7\n", convert.InferRows) + "4,2.5\n"
	for _, tt := range []struct {
		name, in string
		args     []string
		usage    bool
		msg      string // the error holds it
	}{
		{name: "late type error", in: late, msg: fmt.Sprintf(`t.csv:%d: column "amount": cannot parse "2.5" as int64`, convert.InferRows+4)},
		{name: "schema type error", in: "id,amount\n1,1\n2,3\n3,2.5\n", args: []string{"--schema", "id int64, amount int64"},
			msg: `import csv: t.csv:4: column "amount": cannot parse "2.5" as int64`},
		{name: "duplicate header column", in: "id,a,a\n1,2,3\n",
			msg: `t.csv:1: column "a": appears twice in the header (fields 2 and 3)`},
		{name: "ragged row", in: "id,a\n1,2\n2,3,4\n", msg: "t.csv:3: 3 fields, the header has 2"},
		{name: "schema does not match the header", in: "id,b\n1,2\n", args: []string{"--schema", "id int64, a int64"},
			msg: `t.csv:1: column "b": the schema's column 2 is "a"`},
		{name: "schema too short", in: "id,a,b\n1,2,3\n", args: []string{"--schema", "id int64, a int64"},
			msg: "t.csv:1: the header has 3 columns (id, a, b), the schema 2 (id, a)"},
		{name: "unknown type", in: "id\n1\n", args: []string{"--schema", "id int64, ts timestmp"}, usage: true,
			msg: `--schema: schema "id int64, ts timestmp": column "ts": unknown type "timestmp"`},
		{name: "long delimiter", in: "id\n1\n", args: []string{"--delimiter", ";;"}, usage: true, msg: "--delimiter"},
		{name: "quote delimiter", in: "id\n1\n", args: []string{"--delimiter", `"`}, usage: true, msg: "--delimiter"},
		{name: "zone in a timestamp column", in: "id,ts\n1,2024-01-15T10:30:00Z\n", args: []string{"--schema", "id int64, ts timestamp"},
			msg: `t.csv:2: column "ts": cannot parse "2024-01-15T10:30:00Z" as timestamp: it has a zone offset`},
		{name: "sort key not in the file", in: "id\n1\n", args: []string{"--sort-key", "nope"}, msg: `sort column "nope" is not in the schema`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--sort-key", "id"}, tt.args...)
			_, err := loadCSV(t, tt.in, args...)
			if err == nil {
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not hold %q", err, tt.msg)
			}
			// loadCSV rewrites the error; check usage errors directly.
			if tt.usage {
				f := &loadFlags{table: "t", projection: "p", rows: 10, csvPath: "t.csv", sortKey: "id"}
				for i := 0; i+1 < len(tt.args); i += 2 {
					switch tt.args[i] {
					case "--schema":
						f.schema = tt.args[i+1]
					case "--delimiter":
						f.delimiter = tt.args[i+1]
					}
				}
				if _, err := importLoad(context.Background(), t.TempDir(), f, columnar.CompressionLZ4); !errors.Is(err, errUsage) {
					t.Errorf("importLoad: %v, want a usage error", err)
				}
			}
		})
	}
	// CSV flags with a Parquet file.
	for _, f := range []loadFlags{{schema: "a int64"}, {delimiter: ";"}, {noHeader: true}} {
		f.table, f.projection, f.rows, f.pqPath, f.sortKey = "t", "p", 10, "x.parquet", "a"
		if _, err := importLoad(context.Background(), t.TempDir(), &f, columnar.CompressionLZ4); !errors.Is(err, errUsage) {
			t.Errorf("%+v: %v, want a usage error", f, err)
		}
	}
}

func TestParseDelimiter(t *testing.T) {
	for in, want := range map[string]rune{",": ',', ";": ';', `\t`: '\t', "\t": '\t', "|": '|', "¦": '¦'} {
		if got, err := parseDelimiter(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", ";;", `"`, "\n", "\r", "\xff", `\n`} {
		if got, err := parseDelimiter(in); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}
