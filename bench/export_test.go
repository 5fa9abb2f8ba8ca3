package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
)

// TestExportsReadByDuckDB writes one generated table (every column type,
// NULLs, several blocks and containers) with strata's exporters and reads
// each file back with DuckDB: the Parquet file with the types a strata
// column maps to, the CSV file with DuckDB's own type detection typing
// every non-text column (NULL is the empty field, as DuckDB writes it, and
// an empty string "", which DuckDB reads as one with allow_quoted_nulls
// off),
// and the JSON lines; the row count and every column's NULL count agree
// across the three.
func TestExportsReadByDuckDB(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ms, err := columnar.Generate(dir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 16, Containers: 2,
		RowsPerContainer: 3000, BlockRows: 500, NullFraction: 0.1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range ms {
		dirs = append(dirs, columnar.ContainerDir(dir, "t", "p", m.ID))
	}
	files := map[convert.Format]string{}
	for _, f := range []convert.Format{convert.Parquet, convert.CSV, convert.JSONL} {
		path := filepath.Join(dir, "t."+string(f))
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := convert.Export(f, dirs, out, convert.ExportOptions{}); err != nil || n != 6000 {
			t.Fatalf("export %s: %d rows, %v", f, n, err)
		}
		if err := out.Close(); err != nil && !errors.Is(err, os.ErrClosed) { // the Parquet writer closes it
			t.Fatal(err)
		}
		files[f] = path
	}
	duck, err := openDuck(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer duck.Close()
	readers := map[convert.Format]string{
		convert.Parquet: fmt.Sprintf("read_parquet('%s')", files[convert.Parquet]),
		convert.CSV:     fmt.Sprintf("read_csv('%s', header = true, allow_quoted_nulls = false)", files[convert.CSV]),
		convert.JSONL:   fmt.Sprintf("read_json('%s', format = 'newline_delimited')", files[convert.JSONL]),
	}
	types := func(f convert.Format) map[string]string {
		out := map[string]string{}
		for _, row := range duckRows(t, duck, "DESCRIBE SELECT * FROM "+readers[f]) {
			out[row[0]] = row[1]
		}
		return out
	}
	// The Parquet types DuckDB gives strata's column types.
	want := map[string]string{"int64": "BIGINT", "utf8": "VARCHAR", "float64": "DOUBLE", "timestamp": "TIMESTAMP",
		"int32": "INTEGER", "bool": "BOOLEAN", "int8": "TINYINT", "int16": "SMALLINT", "uint8": "UTINYINT",
		"uint16": "USMALLINT", "uint32": "UINTEGER", "uint64": "UBIGINT", "float32": "FLOAT", "date32": "DATE", "binary": "BLOB"}
	pq := types(convert.Parquet)
	schema, _ := columnar.GenSchema(16, 1)
	for _, fl := range schema.Fields() {
		tn, _ := columnar.TypeName(fl.Type)
		if got, ok := pq[fl.Name]; !ok || (want[tn] != "" && got != want[tn]) {
			t.Errorf("parquet column %s (%s): DuckDB type %q, want %q", fl.Name, tn, got, want[tn])
		}
	}
	csvTypes := types(convert.CSV)
	for _, fl := range schema.Fields() {
		tn, _ := columnar.TypeName(fl.Type)
		if tn != "utf8" && tn != "binary" && csvTypes[fl.Name] == "VARCHAR" {
			t.Errorf("csv column %s (%s): DuckDB detects VARCHAR", fl.Name, tn)
		}
	}
	counts := func(f convert.Format) string {
		var sel []string
		for _, fl := range schema.Fields() {
			sel = append(sel, fmt.Sprintf(`count(*) - count("%s")`, fl.Name))
		}
		return strings.Join(duckRows(t, duck, fmt.Sprintf("SELECT count(*), %s FROM %s", strings.Join(sel, ", "), readers[f]))[0], " ")
	}
	ref := counts(convert.Parquet)
	if !strings.HasPrefix(ref, "6000 ") || strings.Count(ref, " 0") == len(schema.Fields()) {
		t.Fatalf("parquet: rows and NULLs per column %q: want 6000 rows and some NULLs", ref)
	}
	for _, f := range []convert.Format{convert.CSV, convert.JSONL} {
		if got := counts(f); got != ref {
			t.Errorf("%s: rows and NULLs per column %q, parquet %q", f, got, ref)
		}
	}
}

// duckRows runs query and returns its rows as strings (NULL as "NULL").
func duckRows(t *testing.T, duck *duckDB, query string) [][]string {
	t.Helper()
	rows, err := duck.conn.QueryContext(context.Background(), query)
	if err != nil {
		t.Fatalf("DuckDB: %s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		cells := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("DuckDB: %s: %v", query, err)
		}
		row := make([]string, len(cols))
		for i, c := range cells {
			row[i] = "NULL"
			if c.Valid {
				row[i] = c.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("DuckDB: %s: %v", query, err)
	}
	return out
}
