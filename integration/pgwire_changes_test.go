package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-db/strata/internal/pgauth"
)

// TestPgwireChanges runs the scheduler, a windower, a walwriter applying
// changes and pgwire as processes, and changes a keyed table with SQL
// through pgx: INSERT, UPDATE of a column by an expression of itself,
// DELETE, a key without a row (0, nothing sent), in the simple and the
// extended protocol ($n parameters). Each statement returns once its
// changes are visible, so a SELECT through pgwire right after it sees
// them (read-your-writes), and the table read by the CLI at the end is
// the model's. Then the errors, with their SQLSTATEs, none of which
// sends a change.
func TestPgwireChanges(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "walwriter", "pgwire", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	d.start("walwriter", "walwriter-1", "--flush-interval", "200ms")
	pgAddr := freeAddr(t)
	d.start("pgwire", "pgwire-1", "--pg-listen", pgAddr)
	m := loadKeyed(t, d, "acc", 30)
	d.cli("load", "--table", "plain", "--columns", "3", "--containers", "1", "--rows", "10", "--seed", "1")

	pw, err := os.ReadFile(pgauth.PasswordFile(d.dataDir, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", url.QueryEscape(strings.TrimSpace(string(pw))), pgAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	// row reads id's row through pgwire: "" if it has none.
	row := func(t *testing.T, id int64) string {
		t.Helper()
		rows, err := c.Query(ctx, "SELECT id, g, v, s, count(*) OVER () AS n FROM acc WHERE id = $1", id)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var id, g, n int64
			var v float64
			var s *string
			if err := rows.Scan(&id, &g, &v, &s, &n); err != nil {
				t.Fatal(err)
			}
			str := "NULL"
			if s != nil {
				str = *s
			}
			out = append(out, fmt.Sprintf("%d|%d|%g|%s", id, g, v, str))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(out) > 1 {
			t.Fatalf("id %d has %d rows: %v", id, len(out), out)
		}
		return strings.Join(out, "")
	}
	model := func(id int64) string {
		r, ok := m[id]
		if !ok {
			return ""
		}
		s := "NULL"
		if r[3] != nil {
			s = r[3].(string)
		}
		return fmt.Sprintf("%d|%d|%g|%s", id, r[1].(int64), r[2].(float64), s)
	}
	exec := func(t *testing.T, wantTag string, ids []int64, sql string, args ...any) {
		t.Helper()
		start := time.Now()
		tag, err := c.Exec(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if tag.String() != wantTag {
			t.Fatalf("%s: tag %q, want %q", sql, tag, wantTag)
		}
		t.Logf("%s: %s in %v", sql, tag, time.Since(start).Round(time.Millisecond))
		// Read-your-writes: visible to the very next query.
		for _, id := range ids {
			if got, want := row(t, id), model(id); got != want {
				t.Fatalf("after %s: id %d is %q, want %q", sql, id, got, want)
			}
		}
	}

	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		c.Config().DefaultQueryExecMode = mode
		base := int64(100 * (int(mode) + 1))
		m[base] = []any{base, int64(1), 2.5, "new"}
		m[base+1] = []any{base + 1, int64(2), 0.25, nil}
		exec(t, "INSERT 0 2", []int64{base, base + 1}, "INSERT INTO acc (id, g, v, s) VALUES ($1, 1, 2.5, $2), ($3, $4, 0.25, NULL)", base, "new", base+1, 2)
		id := int64(3 + mode)
		m[id][2] = m[id][2].(float64) + 5
		m[id][1] = m[id][1].(int64) * 2
		exec(t, "UPDATE 1", []int64{id}, "UPDATE acc SET v = v + $1, g = g * 2 WHERE id = $2", 5, id)
		m[base][3] = "new, changed"
		exec(t, "UPDATE 1", []int64{base}, "UPDATE acc SET s = s || ', changed' WHERE id = $1", base)
		delete(m, base+1)
		exec(t, "DELETE 1", []int64{base + 1}, "DELETE FROM acc WHERE id = $1", base+1)
		// Keys without a row: nothing sent, 0.
		last := updatesLastSeq(t, d)
		exec(t, "DELETE 0", nil, "DELETE FROM acc WHERE id = $1", base+1)
		exec(t, "UPDATE 0", nil, "UPDATE acc SET g = 0 WHERE id = $1", 9999)
		if got := updatesLastSeq(t, d); got != last {
			t.Fatalf("a key without a row sent %d changes", got-last)
		}
	}
	c.Config().DefaultQueryExecMode = pgx.QueryExecModeCacheStatement

	seq := updatesLastSeq(t, d)
	for _, tc := range []struct{ sql, code string }{
		{"INSERT INTO nope (id) VALUES (1)", "42P01"},
		{"UPDATE acc SET nope = 1 WHERE id = 1", "42703"},
		{"INSERT INTO plain (k0) VALUES (1)", "0A000"},
		{"UPDATE acc SET g = 1 WHERE g = 1", "0A000"},
		{"DELETE FROM acc WHERE id > 3", "0A000"},
		{"INSERT INTO acc (g) VALUES (1)", "23502"},
		{"INSERT INTO acc (id, g) VALUES (500, 'x')", "22P02"},
		{"UPDATE acc SET g = g + 9223372036854775807 WHERE id = 2", "22003"},
		{"INSERT INTO acc (id) VALUES (2)", "23505"},
	} {
		_, err := c.Exec(ctx, tc.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != tc.code {
			t.Errorf("%s: %v, want SQLSTATE %s", tc.sql, err, tc.code)
		}
	}
	if !strings.Contains(fmt.Sprint(execErr(ctx, c, "DELETE FROM plain WHERE k0 = 1")), "table plain is append-only: it has no primary key") {
		t.Error("a table without a primary key: the error does not say append-only")
	}
	if got := updatesLastSeq(t, d); got != seq {
		t.Fatalf("refused statements sent %d changes", got-seq)
	}
	// The whole table, read by the CLI: the model.
	compareRows(t, "after the SQL changes", queryChanged(t, d, "acc"), changedRows(m))
}

func execErr(ctx context.Context, c *pgx.Conn, sql string) error {
	_, err := c.Exec(ctx, sql)
	return err
}
