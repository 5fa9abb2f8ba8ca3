package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/strata-db/strata/columnar"
)

// maxSchemas bounds the schemas a server keeps; past it they are all
// forgotten and read again as queries need them.
const maxSchemas = 1024

// schemaCache keeps the columns of each table a query was checked against,
// for every session of a server. A window query is checked before its job
// (its result types worked out over the table's schema without data, so an
// unknown column is reported without a job), and reading the schema is a
// catalog request and a manifest read: a third of a small query's time.
//
// A kept schema is only ever used to let a query through: a query it
// refuses is checked again against the schema read anew, and a query whose
// job fails forgets its table's. The result's own columns are what a client
// is sent, so a table loaded again with other columns since changes no
// answer. A Describe, whose columns a client is promised before the job,
// reads the schema anew.
type schemaCache struct {
	mu     sync.Mutex
	tables map[string][]columnar.ColumnSchema
}

// columns returns the columns of table, read from b unless kept (or fresh
// is set) and kept then; kept says they were kept before. A table the
// catalog does not hold is a *pgError 42P01.
func (c *schemaCache) columns(ctx context.Context, b backend, table string, fresh bool) (cols []columnar.ColumnSchema, kept bool, err error) {
	if !fresh {
		c.mu.Lock()
		cols, ok := c.tables[table]
		c.mu.Unlock()
		if ok {
			return cols, true, nil
		}
	}
	tables, err := b.tables(ctx, table)
	if err != nil {
		return nil, false, jobError(err)
	}
	found := false
	for _, t := range tables {
		if t.name == table {
			cols, found = t.columns, true
		}
	}
	if !found {
		c.forget(table)
		return nil, false, &pgError{code: "42P01", msg: fmt.Sprintf("relation %q does not exist", table)}
	}
	if cols == nil {
		return nil, false, &pgError{code: "58030", msg: fmt.Sprintf("cannot read the schema of table %q from the data directory", table)}
	}
	c.mu.Lock()
	if c.tables == nil || len(c.tables) >= maxSchemas {
		c.tables = map[string][]columnar.ColumnSchema{}
	}
	c.tables[table] = cols
	c.mu.Unlock()
	return cols, false, nil
}

// forget drops table's schema.
func (c *schemaCache) forget(table string) {
	c.mu.Lock()
	delete(c.tables, table)
	c.mu.Unlock()
}
