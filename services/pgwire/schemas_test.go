package main

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/strata-db/strata/columnar"
)

// TestSchemaKept: the check before a query's job reads its table's schema
// once, not at every query. A query naming a column the kept schema lacks
// (the table loaded again with more columns) is checked against the schema
// read anew and runs; a Describe reads the schema anew; a query whose job
// fails forgets the schema.
func TestSchemaKept(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	count := func(sql string, mode pgx.QueryExecMode) int {
		t.Helper()
		rows, err := c.Query(ctx, sql, mode)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return len(rowsOf(t, rows))
	}
	const q = "SELECT k0, row_number() OVER (ORDER BY k0) FROM t"
	before := s.be.tableReads.Load()
	for range 5 {
		if n := count(q, pgx.QueryExecModeSimpleProtocol); n != 600 {
			t.Fatalf("%d rows, want 600", n)
		}
	}
	if reads := s.be.tableReads.Load() - before; reads != 1 {
		t.Fatalf("5 queries read the schema %d times, want once", reads)
	}

	// The table loaded again with two more columns.
	dir := t.TempDir()
	ms, err := columnar.Generate(dir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 8, Containers: 1, RowsPerContainer: 50, BlockRows: 16, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	old, err := columnar.ReadManifest(s.be.dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	added := ""
	for _, col := range ms[0].Schema {
		if !slices.ContainsFunc(old.Schema, func(o columnar.ColumnSchema) bool { return o.Name == col.Name }) {
			added = col.Name
		}
	}
	if added == "" {
		t.Fatal("the table loaded again has no new column")
	}
	oldDirs := s.be.dirs
	s.be.dirs = []string{columnar.ContainerDir(dir, ms[0].Table, ms[0].Projection, ms[0].ID)}
	before = s.be.tableReads.Load()
	if n := count("SELECT "+added+" FROM t", pgx.QueryExecModeSimpleProtocol); n != 50 {
		t.Fatalf("a column the table gained: %d rows, want 50", n)
	}
	if reads := s.be.tableReads.Load() - before; reads != 1 {
		t.Fatalf("a query the kept schema refused read the schema %d times, want once", reads)
	}
	// A Describe (the extended protocol's) reads it anew.
	before = s.be.tableReads.Load()
	if n := count("SELECT "+added+" FROM t", pgx.QueryExecModeDescribeExec); n != 50 {
		t.Fatalf("described: %d rows, want 50", n)
	}
	if s.be.tableReads.Load() == before {
		t.Fatal("a Describe used the kept schema")
	}
	// The table loaded again as it was: the kept schema lets the query of
	// the column it lost through, its job fails, and the schema is read
	// anew for the next query.
	s.be.dirs = oldDirs
	_, err = c.Query(ctx, "SELECT "+added+" FROM t", pgx.QueryExecModeSimpleProtocol)
	wantCode(t, err, "42703")
	before = s.be.tableReads.Load()
	_, err = c.Query(ctx, "SELECT "+added+" FROM t", pgx.QueryExecModeSimpleProtocol)
	wantCode(t, err, "42703")
	if reads := s.be.tableReads.Load() - before; reads != 1 {
		t.Fatalf("after a failed job the schema was read %d times, want once", reads)
	}
}
