package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" database/sql driver
)

// duckDB is one DuckDB database with a single pinned connection, so session
// settings (threads, memory_limit) apply to every statement the bench runs.
type duckDB struct {
	db   *sql.DB
	conn *sql.Conn
}

// openDuck opens a DuckDB database: in memory when path is empty, otherwise
// a database file at path.
func openDuck(ctx context.Context, path string) (*duckDB, error) {
	db, err := sql.Open("duckdb", path)
	if err != nil {
		return nil, fmt.Errorf("open duckdb %q: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect duckdb %q: %w", path, err)
	}
	return &duckDB{db: db, conn: conn}, nil
}

func (d *duckDB) Close() error {
	err := d.conn.Close()
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *duckDB) exec(ctx context.Context, query string, args ...any) error {
	if _, err := d.conn.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("duckdb: %s: %w", firstLine(query), err)
	}
	return nil
}

// setThreads sets DuckDB's worker threads (1 for the single-threaded figures).
func (d *duckDB) setThreads(ctx context.Context, n int) error {
	return d.exec(ctx, fmt.Sprintf("SET threads = %d", n))
}

// setMemory sets memory_limit and the directory DuckDB spills to.
func (d *duckDB) setMemory(ctx context.Context, limit int64, tempDir string) error {
	if err := d.exec(ctx, fmt.Sprintf("SET memory_limit = '%dMiB'", max(1, limit/mib))); err != nil {
		return err
	}
	return d.exec(ctx, "SET temp_directory = "+sqlString(tempDir))
}

func (d *duckDB) version(ctx context.Context) (string, error) {
	var v string
	if err := d.conn.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", fmt.Errorf("duckdb version: %w", err)
	}
	return v, nil
}

// queryRow runs a query that returns one row and discards the values: the
// timed form of a window query (aggregates over its output) returns one row.
func (d *duckDB) queryRow(ctx context.Context, query string) error {
	rows, err := d.conn.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("duckdb: %s: %w", firstLine(query), err)
	}
	return drainSQLRows(rows, query)
}

// fetch runs a query and returns every row in canonical form.
func (d *duckDB) fetch(ctx context.Context, query string) (*resultSet, error) {
	rows, err := d.conn.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("duckdb: %s: %w", firstLine(query), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	rs := newResultSet(len(cols))
	dest := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	row := make([]value, len(cols))
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("duckdb: scan %s: %w", firstLine(query), err)
		}
		for i, v := range dest {
			cv, err := canonical(v)
			if err != nil {
				return nil, fmt.Errorf("duckdb: column %s: %w", cols[i], err)
			}
			row[i] = cv
		}
		rs.append(row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckdb: %s: %w", firstLine(query), err)
	}
	return rs, nil
}

func drainSQLRows(rows *sql.Rows, query string) error {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	dest := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("scan %s: %w", firstLine(query), err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", firstLine(query), err)
	}
	return nil
}

// parquetList renders paths as a DuckDB list literal for read_parquet.
func parquetList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = sqlString(filepath.ToSlash(p))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
