package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/pgauth"
)

// pgwireSQL gives the same rows whatever the order of equal keys; ORDER
// BY k0 (unique) makes LIMIT and OFFSET deterministic.
const pgwireSQL = `SELECT k0, c004_int32,
	rank() OVER (PARTITION BY c004_int32 % 4 ORDER BY k0) AS r,
	count(*) OVER (PARTITION BY c004_int32 % 4) AS n,
	sum(c004_int32) OVER (PARTITION BY c004_int32 % 4) AS s
	FROM t`

// TestPgwire runs the scheduler, pgwire and a windower as processes,
// loads a table with the CLI and queries it over the PostgreSQL protocol
// with pgx (simple and extended protocol, text and binary results, a $1
// parameter) and psql, comparing the rows with the CLI's; then the
// errors a client gets: wrong password, unsupported statement, syntax,
// unknown table, a cancel request and a statement timeout.
func TestPgwire(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "pgwire", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	pgAddr := freeAddr(t)
	d.start("pgwire", "pgwire-1", "--pg-listen", pgAddr)
	d.cli("load", "--table", "t", "--columns", "6", "--containers", "3", "--rows", "400", "--seed", "7", "--block-rows", "128")

	pw, err := os.ReadFile(pgauth.PasswordFile(d.dataDir, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimSpace(string(pw))
	host, port, _ := strings.Cut(pgAddr, ":")
	connURL := func(user, password string) string {
		return fmt.Sprintf("postgres://%s:%s@%s/strata?sslmode=disable", url.PathEscape(user), url.QueryEscape(password), pgAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, connURL("strata", password))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	wantCode := func(t *testing.T, err error, code string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != code {
			t.Fatalf("error %v, want SQLSTATE %s", err, code)
		}
	}

	// No windower yet: a window job waits, so a cancel request and a
	// statement timeout meet a statement that is waiting.
	t.Run("cancel", func(t *testing.T) {
		c := connect(t)
		go func() {
			time.Sleep(time.Second)
			_ = c.PgConn().CancelRequest(context.Background())
		}()
		start := time.Now()
		_, err := c.Exec(ctx, "SELECT k0, row_number() OVER () AS n FROM t", pgx.QueryExecModeSimpleProtocol)
		wantCode(t, err, "57014")
		if time.Since(start) > 20*time.Second {
			t.Fatalf("cancel took %v", time.Since(start))
		}
		// The session goes on.
		var one int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatal(one, err)
		}
		if _, err := c.Exec(ctx, "SET statement_timeout = '300ms'"); err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "SELECT k0, row_number() OVER () AS n FROM t")
		wantCode(t, err, "57014")
	})

	d.start("windower", "windower-1", "--memory", "512MiB")

	// The CLI's rows of the same query.
	cliRows := func(sql string) []string {
		out := d.cli("window", "--format", "csv", "--null-string", "NULL", "--rows", "1000000", sql)
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil || len(recs) == 0 {
			t.Fatalf("CLI csv: %v\n%s", err, out)
		}
		var rows []string
		for _, r := range recs[1:] {
			rows = append(rows, strings.Join(r, "|"))
		}
		return rows
	}
	want := cliRows(pgwireSQL)
	slices.Sort(want)
	if len(want) != 1200 {
		t.Fatalf("CLI gave %d rows", len(want))
	}
	pgxRows := func(t *testing.T, rows pgx.Rows) []string {
		t.Helper()
		var out []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			f := make([]string, len(vals))
			for i, v := range vals {
				if v == nil {
					f[i] = "NULL"
				} else {
					f[i] = fmt.Sprint(v)
				}
			}
			out = append(out, strings.Join(f, "|"))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	t.Run("pgx", func(t *testing.T) {
		c := connect(t)
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
			// Simple protocol: text; extended: binary for the integers.
			rows, err := c.Query(ctx, pgwireSQL, mode)
			if err != nil {
				t.Fatal(err)
			}
			got := pgxRows(t, rows)
			slices.Sort(got)
			compareRows(t, fmt.Sprintf("pgx %v", mode), got, want)
			fds := rows.FieldDescriptions()
			if len(fds) != 5 || fds[0].DataTypeOID != 20 || fds[1].DataTypeOID != 23 {
				t.Fatalf("%v: fields %+v", mode, fds)
			}
		}
		// Text results in the extended protocol too.
		res := c.PgConn().ExecParams(ctx, pgwireSQL+" ORDER BY k0 LIMIT 3", nil, nil, nil, []int16{0})
		r := res.Read()
		if r.Err != nil || len(r.Rows) != 3 || r.FieldDescriptions[0].Format != 0 {
			t.Fatalf("text extended: %v %d rows", r.Err, len(r.Rows))
		}
		// A $1 parameter, against the CLI with the value in the text.
		rows, err := c.Query(ctx, pgwireSQL+" WHERE c004_int32 > $1", int64(0))
		if err != nil {
			t.Fatal(err)
		}
		got := pgxRows(t, rows)
		slices.Sort(got)
		w := cliRows(pgwireSQL + " WHERE c004_int32 > 0")
		slices.Sort(w)
		if len(w) == 0 || len(w) == len(want) {
			t.Fatalf("the filter keeps %d of %d rows", len(w), len(want))
		}
		compareRows(t, "pgx $1", got, w)
		// LIMIT and OFFSET on the outer query.
		rows, err = c.Query(ctx, pgwireSQL+" ORDER BY k0 LIMIT 7 OFFSET 5")
		if err != nil {
			t.Fatal(err)
		}
		got = pgxRows(t, rows)
		all := cliRows(pgwireSQL + " ORDER BY k0")
		compareRows(t, "LIMIT 7 OFFSET 5", got, all[5:12])
		// What clients ask on connect.
		var v, tz string
		if err := c.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil || !strings.Contains(v, "strata") {
			t.Fatal(v, err)
		}
		if _, err := c.Exec(ctx, "SET application_name TO 'pgwire-test'"); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&v); err != nil || v != "pgwire-test" {
			t.Fatal(v, err)
		}
		if err := c.QueryRow(ctx, "SHOW TimeZone").Scan(&tz); err != nil || tz != "UTC" {
			t.Fatal(tz, err)
		}
		for _, q := range []string{"BEGIN", "COMMIT", "ROLLBACK", ""} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%q: %v", q, err)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := pgx.Connect(ctx, connURL("strata", "wrong"))
		wantCode(t, err, "28P01")
		_, err = pgx.Connect(ctx, connURL("nobody", "wrong"))
		wantCode(t, err, "28P01")
		c := connect(t)
		for _, tc := range []struct{ sql, code string }{
			{"INSERT INTO t VALUES (1)", "0A000"},
			{"SELECT k0 FROM t GROUP BY k0", "0A000"},
			{"SELEC k0 FROM t", "42601"},
			{"SELECT k0, rank() OVER (ORDER BY k0) AS r FROM nope", "42P01"},
			{"SELECT nope, rank() OVER (ORDER BY k0) AS r FROM t", "42703"},
		} {
			for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
				_, err := c.Exec(ctx, tc.sql, mode)
				wantCode(t, err, tc.code)
			}
		}
		// Still a working session.
		var one int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatal(one, err)
		}
	})

	t.Run("psql", func(t *testing.T) {
		psql, err := exec.LookPath("psql")
		if err != nil {
			t.Skip("psql is not on PATH")
		}
		run := func(args ...string) string {
			t.Helper()
			cmd := exec.CommandContext(ctx, psql, append([]string{fmt.Sprintf("host=%s port=%s user=strata dbname=strata", host, port), "-X", "-v", "ON_ERROR_STOP=1"}, args...)...)
			cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=10")
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("psql %v: %v\n%s%s", args, err, out.String(), errb.String())
			}
			return out.String()
		}
		out := run("-A", "-t", "-F", "|", "-P", "null=NULL", "-c", pgwireSQL)
		got := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(got)
		compareRows(t, "psql", got, want)
		if out := run("-c", `\dt`); !strings.Contains(out, "public | t    | table") {
			t.Fatalf(`\dt:\n%s`, out)
		}
		out = run("-c", `\d t`)
		for _, s := range []string{`Table "public.t"`, "k0", "bigint", "c004_int32", "integer", "c001_utf8", "text"} {
			if !strings.Contains(out, s) {
				t.Fatalf(`\d t lacks %q:\n%s`, s, out)
			}
		}
	})
}

// TestPgwireOverStore: with the containers in a bucket and no directory
// shared, pgwire reads the tables' manifests and each result from the
// store; its rows are the CLI's.
func TestPgwireOverStore(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "pgwire", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	srv := s3test.Start(t, "strata")
	storeURL := srv.URL
	d := newDeployment(t)
	own := ownDir(t)
	d.start("scheduler", "scheduler", "--data", own("scheduler"), "--store", storeURL)
	wdir := own("windower")
	d.start("windower", "windower-1", "--memory", "512MiB", "--data", wdir, "--store", storeURL, "--depot", filepath.Join(wdir, "depot"))
	pgData := own("pgwire")
	pgAddr := freeAddr(t)
	d.start("pgwire", "pgwire-1", "--data", pgData, "--store", storeURL, "--pg-listen", pgAddr)
	d.cli("load", "--data", own("cli-load"), "--store", storeURL, "--table", "t", "--columns", "6", "--containers", "3", "--rows", "300", "--seed", "5", "--block-rows", "100")

	out := d.cli("window", "--data", own("cli-window"), "--store", storeURL, "--format", "csv", "--null-string", "NULL", "--rows", "1000000", pgwireSQL)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 901 {
		t.Fatalf("CLI csv: %d records, %v", len(recs), err)
	}
	var want []string
	for _, r := range recs[1:] {
		want = append(want, strings.Join(r, "|"))
	}
	slices.Sort(want)

	pw, err := os.ReadFile(pgauth.PasswordFile(pgData, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", url.QueryEscape(strings.TrimSpace(string(pw))), pgAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, pgwireSQL)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		f := make([]string, len(vals))
		for i, v := range vals {
			f[i] = "NULL"
			if v != nil {
				f[i] = fmt.Sprint(v)
			}
		}
		got = append(got, strings.Join(f, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	compareRows(t, "pgwire over the store", got, want)
	// The staging directories of results are gone once sent.
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgwire-result-*")); len(left) > 0 {
		t.Logf("staging directories left (maybe another test's): %v", left)
	}
}

// TestPgwireAuthenticatedNATS: a data directory made before pgwire had a
// NATS role of its own has no pgwire.password (its scheduler, started
// before then, made none): pgwire then connects as cli-admin, as it used
// to, says so in its log, and works within that role's permissions (a
// violation in any log fails the test). Under its own role:
// TestEmbeddedServerAuthenticated.
func TestPgwireAuthenticatedNATS(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	natsAddr := freeAddr(t)
	natsURL := "nats://" + natsAddr
	startBinary(t, "scheduler", freeAddr(t), "--data", data, "--listen", natsAddr)
	startBinary(t, "windower", freeAddr(t), "--nats", natsURL, "--data", data, "--worker", "windower-1", "--memory", "512MiB")
	if err := os.Remove(natsutil.PasswordFile(data, natsutil.RolePgwire)); err != nil {
		t.Fatal(err)
	}
	pgAddr := freeAddr(t)
	pg := startBinary(t, "pgwire", freeAddr(t), "--nats", natsURL, "--data", data, "--pg-listen", pgAddr)
	if b, _ := os.ReadFile(pg.logPath); !strings.Contains(string(b), "connecting to NATS as cli-admin") {
		t.Fatalf("no word of the fallback to cli-admin in pgwire's log:\n%s", tail(string(b), 20))
	}
	if !haveBinary("strata") {
		t.Skip("strata CLI is not built")
	}
	if out, err := exec.Command(filepath.Join(binDir, "strata"), "load", "--table", "t", "--columns", "6", "--containers", "2", "--rows", "200", "--nats", natsURL, "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("strata load: %v\n%s", err, out)
	}
	pw, err := os.ReadFile(pgauth.PasswordFile(data, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", url.QueryEscape(strings.TrimSpace(string(pw))), pgAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int64
	if err := c.QueryRow(ctx, "SELECT k0, count(*) OVER () AS n FROM t LIMIT 1").Scan(new(int64), &n); err != nil || n != 400 {
		t.Fatal(n, err)
	}
	var tables int
	rows, err := c.Query(ctx, "SELECT table_name FROM information_schema.tables")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		tables++
	}
	if rows.Err() != nil || tables != 1 {
		t.Fatal(tables, rows.Err())
	}
}
