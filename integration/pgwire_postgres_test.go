package integration

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-db/strata/internal/pgauth"
)

// pgCompareSchema is the table both systems load, in each one's words.
const (
	pgCompareStrataSchema = "id int64, g int32, v double, f real, b bool, s text, d date, ts timestamp, tz timestamptz"
	pgCompareDDL          = "CREATE TABLE t (id bigint, g integer, v double precision, f real, b boolean, s text, d date, ts timestamp, tz timestamptz)"
)

// pgCompareQueries are window queries over every type the table has,
// asked of strata through pgwire and of PostgreSQL 15, each with its
// parameters.
var pgCompareQueries = []struct {
	sql  string
	args []any
}{
	{`SELECT id, g, v, f, b, s, d, ts, tz, rank() OVER (PARTITION BY g ORDER BY v, id) AS r,
		sum(v) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS sv,
		count(*) OVER (PARTITION BY b) AS nb FROM t`, nil},
	{`SELECT id, lag(s) OVER (PARTITION BY g ORDER BY id) AS ls, lead(d, 2) OVER (PARTITION BY g ORDER BY id) AS ld,
		first_value(ts) OVER (PARTITION BY d ORDER BY id) AS fts, min(tz) OVER (PARTITION BY g) AS mtz,
		max(s) OVER (PARTITION BY g) AS ms FROM t`, nil},
	{`SELECT id, row_number() OVER (PARTITION BY g ORDER BY id) AS rn, dense_rank() OVER (ORDER BY g) AS dr,
		max(f) OVER (PARTITION BY g) AS mf, count(s) OVER (PARTITION BY g, b) AS ns FROM t WHERE g = $1`, []any{int32(3)}},
	// sum(real) is real, added in real; avg(real) double precision.
	{`SELECT id, sum(f) OVER (PARTITION BY g ORDER BY id) AS sf, avg(f) OVER (PARTITION BY b ORDER BY id) AS af,
		sum(f) OVER (PARTITION BY d ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS wf FROM t`, nil},
	{`SELECT id, ntile(4) OVER (PARTITION BY g ORDER BY id) AS q, percent_rank() OVER (PARTITION BY g ORDER BY id) AS pr,
		avg(v) OVER (PARTITION BY g ORDER BY id RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS av FROM t WHERE v > $1`, []any{10.5}},
	// Quoted literals take the column's type, as BI tools' time filters
	// send them.
	{`SELECT id, ts, count(*) OVER (PARTITION BY d) AS nd FROM t
		WHERE ts >= '2020-06-01 00:00:00' AND tz < '2022-01-01 00:00:00+00' AND d <> '2021-03-03' AND g = '2'`, nil},
	{`SELECT id, sum(v) OVER (PARTITION BY b ORDER BY ts) AS sv FROM t WHERE b = 't' AND d >= $1`, []any{"2021-01-01"}},
	{`SELECT id, rank() OVER (PARTITION BY g ORDER BY tz) AS r FROM t WHERE ts < $1 AND tz >= $2`,
		[]any{time.Date(2022, 6, 1, 12, 0, 0, 0, time.UTC), time.Date(2020, 2, 29, 23, 30, 0, 0, time.FixedZone("", -3*3600))}},
}

// TestPgwireAgainstPostgres loads one table of every type pgwire sends
// (strings of every length with NULLs, floats, bools, dates, timestamps
// with and without a zone) into strata and into PostgreSQL 15, and asks
// both the same window queries through pgx, in the extended protocol
// (binary results, $1 parameters) and the simple one (text): every row
// must be the same. It runs with `make test-postgres` (deploy/postgres.sh
// gives the PG* variables and STRATA_TEST_POSTGRES=1).
func TestPgwireAgainstPostgres(t *testing.T) {
	if os.Getenv("STRATA_TEST_POSTGRES") != "1" {
		t.Skip("set STRATA_TEST_POSTGRES=1 and the PG* variables to compare with a PostgreSQL server (make test-postgres)")
	}
	for _, b := range []string{"scheduler", "windower", "pgwire", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql is not on PATH")
	}
	csvPath := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(csvPath, []byte(pgCompareCSV(3000)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// PostgreSQL: a database of its own, the table copied from the CSV.
	db := fmt.Sprintf("strata_pgwire_%d", time.Now().UnixNano())
	runPsql := func(dbname string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, psql, append([]string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dbname}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psql %v: %v\n%s", args, err, out)
		}
	}
	runPsql("postgres", "-c", "CREATE DATABASE "+db)
	t.Cleanup(func() {
		_ = exec.Command(psql, "-X", "-q", "-d", "postgres", "-c", "DROP DATABASE IF EXISTS "+db).Run()
	})
	runPsql(db, "-c", pgCompareDDL, "-c", fmt.Sprintf(`\copy t FROM '%s' WITH (FORMAT csv, HEADER)`, csvPath))
	pgConf, err := pgx.ParseConfig("dbname=" + db) // the PG* variables
	if err != nil {
		t.Fatal(err)
	}
	pgConn, err := pgx.ConnectConfig(ctx, pgConf)
	if err != nil {
		t.Fatal(err)
	}
	defer pgConn.Close(context.Background())
	if _, err := pgConn.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}

	// strata: the same CSV loaded with the CLI, queried through pgwire.
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	pgAddr := freeAddr(t)
	d.start("pgwire", "pgwire-1", "--pg-listen", pgAddr)
	d.cli("load", "--table", "t", "--csv", csvPath, "--schema", pgCompareStrataSchema, "--sort-key", "id", "--block-rows", "256")
	pw, err := os.ReadFile(pgauth.PasswordFile(d.dataDir, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	strata, err := pgx.Connect(ctx, fmt.Sprintf("postgres://strata:%s@%s/strata?sslmode=disable", url.QueryEscape(strings.TrimSpace(string(pw))), pgAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer strata.Close(context.Background())

	// The transaction statements and a failed block, message by message.
	t.Run("transactions", func(t *testing.T) {
		script := pgTxnScript()
		want := pgTranscript(t, ctx, pgConn.PgConn(), script)
		got := pgTranscript(t, ctx, strata.PgConn(), script)
		if !slices.Equal(got, want) {
			t.Fatalf("pgwire's messages differ from PostgreSQL's:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	// Cursors: a SCROLL one moved at random in every direction, and
	// forward-only ones refusing to go back.
	t.Run("cursors", func(t *testing.T) {
		script := pgCursorScript(rand.New(rand.NewPCG(5, 23)), 3000)
		want := pgTranscript(t, ctx, pgConn.PgConn(), script)
		got := pgTranscript(t, ctx, strata.PgConn(), script)
		if !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("pgwire's messages differ from PostgreSQL's at %d: %.200q, want %.200q (%d and %d messages)", i, got[i], want[i], len(got), len(want))
				}
			}
			t.Fatalf("pgwire sent %d messages, PostgreSQL %d", len(got), len(want))
		}
	})

	// Binary COPY TO: PostgreSQL's bytes, header to trailer.
	t.Run("binary COPY", func(t *testing.T) {
		const sql = "COPY (SELECT id, g, v, f, b, s, d, ts, tz FROM t ORDER BY id) TO STDOUT (FORMAT binary)"
		var want, got bytes.Buffer
		if _, err := pgConn.PgConn().CopyTo(ctx, &want, sql); err != nil {
			t.Fatal(err)
		}
		if _, err := strata.PgConn().CopyTo(ctx, &got, sql); err != nil {
			t.Fatal(err)
		}
		if want.Len() < 100000 || !bytes.Equal(got.Bytes(), want.Bytes()) {
			at := 0
			for at < min(got.Len(), want.Len()) && got.Bytes()[at] == want.Bytes()[at] {
				at++
			}
			t.Fatalf("pgwire's binary COPY (%d bytes) differs from PostgreSQL's (%d bytes) at byte %d: %x, want %x", got.Len(), want.Len(), at,
				got.Bytes()[at:min(at+32, got.Len())], want.Bytes()[at:min(at+32, want.Len())])
		}
	})

	for i, q := range pgCompareQueries {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
			t.Run(fmt.Sprintf("q%d/%v", i, mode), func(t *testing.T) {
				args := append([]any{mode}, q.args...)
				want := pgCompareRows(t, pgConn, ctx, q.sql, args)
				got := pgCompareRows(t, strata, ctx, q.sql, args)
				if len(want) == 0 {
					t.Fatal("PostgreSQL returned no rows: the query compares nothing")
				}
				compareRows(t, "pgwire against PostgreSQL", got, want)
			})
		}
	}
}

// pgTxnScript is a session's messages through transaction blocks: one
// failed by an error (in the simple and the extended protocol), the
// statements refused in it, COMMIT and ROLLBACK ending it, and the
// warnings of BEGIN in a block and COMMIT outside one. Each inner slice
// is sent as one batch, the extended ones ending with Sync.
func pgTxnScript() [][]pgproto3.FrontendMessage {
	q := func(sql string) []pgproto3.FrontendMessage {
		return []pgproto3.FrontendMessage{&pgproto3.Query{String: sql}}
	}
	ext := func(sqls ...string) []pgproto3.FrontendMessage {
		var out []pgproto3.FrontendMessage
		for _, sql := range sqls {
			out = append(out, &pgproto3.Parse{Query: sql}, &pgproto3.Bind{}, &pgproto3.Execute{})
		}
		return append(out, &pgproto3.Sync{})
	}
	return [][]pgproto3.FrontendMessage{
		q("BEGIN"),
		q("SELECT nope FROM t"),
		q("SELECT id FROM t WHERE id = 1"),
		q("SHOW application_name"),
		q("SET application_name = 'x'"),
		q("BEGIN"),
		q("SELECT 1; SELECT 2"),
		q("ROLLBACK TO SAVEPOINT s"),
		q("COMMIT"),
		q("COMMIT"),
		q("ROLLBACK TO SAVEPOINT s"),
		q("BEGIN; BEGIN; SELECT nope FROM t; SELECT 1"),
		q("ROLLBACK; SELECT 1"),
		q("ROLLBACK"),
		ext("BEGIN"),
		ext("SELECT 1/(id-id) FROM t", "SELECT 1"),
		ext("SELECT 1"),
		{&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Sync{}},
		ext("COMMIT"),
		ext("SELECT 1/(id-id) FROM t"),
		ext("BEGIN", "SELECT 1", "COMMIT"),
	}
}

// pgCursorScript declares a SCROLL cursor over the compare table's
// rows (rows of them) and moves it at random with every FETCH and MOVE
// direction, then forward-only cursors, each in a block of its own,
// fetched ahead and then moved at random (back is 55000).
func pgCursorScript(rng *rand.Rand, rows int) [][]pgproto3.FrontendMessage {
	q := func(sql string) []pgproto3.FrontendMessage {
		return []pgproto3.FrontendMessage{&pgproto3.Query{String: sql}}
	}
	const query = "SELECT id, g, rank() OVER (PARTITION BY g ORDER BY id) AS r FROM t ORDER BY id"
	step := func(name string) string {
		n := func() int { return rng.IntN(40) }
		far := func() int { return rng.IntN(rows+20) - 10 }
		var what string
		switch rng.IntN(14) {
		case 0:
			what = "NEXT"
		case 1:
			what = "PRIOR"
		case 2:
			what = "FIRST"
		case 3:
			what = "LAST"
		case 4:
			what = fmt.Sprintf("ABSOLUTE %d", far())
		case 5:
			what = fmt.Sprintf("ABSOLUTE -%d", far()+10)
		case 6:
			what = fmt.Sprintf("RELATIVE %d", n()-20)
		case 7:
			what = fmt.Sprintf("FORWARD %d", n())
		case 8:
			what = fmt.Sprintf("BACKWARD %d", n())
		case 9:
			what = []string{"FORWARD ALL", "BACKWARD ALL", "ALL"}[rng.IntN(3)]
		case 10:
			what = fmt.Sprintf("%d", n())
		case 11:
			what = []string{"0", "RELATIVE 0", "FORWARD 0", "BACKWARD 0"}[rng.IntN(4)]
		case 12:
			what = fmt.Sprintf("RELATIVE %d", far())
		default:
			what = fmt.Sprintf("FORWARD -%d", n())
		}
		verb := "FETCH"
		if rng.IntN(4) == 0 {
			verb = "MOVE"
		}
		return fmt.Sprintf("%s %s FROM %s", verb, what, name)
	}
	script := [][]pgproto3.FrontendMessage{q("BEGIN"), q("DECLARE c SCROLL CURSOR FOR " + query)}
	for range 200 {
		script = append(script, q(step("c")))
	}
	script = append(script, q("COMMIT"))
	for range 40 {
		script = append(script, q("BEGIN"), q("DECLARE d NO SCROLL CURSOR FOR "+query),
			q(fmt.Sprintf("MOVE %d FROM d", rng.IntN(rows+10))), q(step("d")), q(step("d")), q("ROLLBACK"))
	}
	return script
}

// pgTranscript sends the script's batches on c and returns what came
// back, a line a message: its type, a command tag, an error's or a
// warning's SQLSTATE, the transaction status of ReadyForQuery.
func pgTranscript(t *testing.T, ctx context.Context, c *pgconn.PgConn, script [][]pgproto3.FrontendMessage) []string {
	t.Helper()
	var out []string
	fe := c.Frontend()
	for _, batch := range script {
		for _, m := range batch {
			fe.Send(m)
		}
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := c.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var line string
			switch m := msg.(type) {
			case *pgproto3.CommandComplete:
				line = "complete " + string(m.CommandTag)
			case *pgproto3.ErrorResponse:
				line = "error " + m.Code
			case *pgproto3.NoticeResponse:
				line = "notice " + m.Code
			case *pgproto3.ReadyForQuery:
				line = "ready " + string(m.TxStatus)
			case *pgproto3.ParameterStatus:
				continue // which settings are reported differs
			case *pgproto3.DataRow:
				var f []string
				for _, v := range m.Values {
					f = append(f, string(v))
				}
				line = "row " + strings.Join(f, "|")
			default:
				line = strings.TrimPrefix(fmt.Sprintf("%T", msg), "*pgproto3.")
			}
			out = append(out, line)
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
	}
	return out
}

// pgCompareRows runs sql on c and returns its rows as sorted strings,
// each value in a form both systems' values share: floats to 10
// significant digits, times in UTC.
func pgCompareRows(t *testing.T, c *pgx.Conn, ctx context.Context, sql string, args []any) []string {
	t.Helper()
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", c.Config().Host, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		f := make([]string, len(vals))
		for i, v := range vals {
			f[i] = pgCompareValue(v)
		}
		out = append(out, strings.Join(f, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", c.Config().Host, err)
	}
	slices.Sort(out)
	return out
}

func pgCompareValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return strconv.FormatFloat(x, 'g', 10, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', 6, 32)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999")
	case string:
		return strconv.Quote(x)
	default:
		return fmt.Sprintf("%T(%v)", v, v)
	}
}

// pgCompareCSV is n rows of the compare table: ids 1..n; g in 0..6;
// floats with NULLs; strings of 1 to 300 bytes (commas, quotes, line
// breaks, non-ASCII) and NULLs; dates across years; timestamps with
// microseconds, the zoned ones written with offsets.
func pgCompareCSV(n int) string {
	rng := rand.New(rand.NewPCG(23, 5))
	var b strings.Builder
	b.WriteString("id,g,v,f,b,s,d,ts,tz\n")
	pieces := []string{"a", "é", "x,y", `say "hi"`, "line\nbreak", "z", "数据"}
	for id := 1; id <= n; id++ {
		field := func(null bool, s string) string {
			if null {
				return ""
			}
			return s
		}
		v := math.Round(rng.NormFloat64()*1000*1e4) / 1e4
		f := float32(rng.IntN(20000)-10000) / 8
		var s strings.Builder
		for s.Len() < 1+rng.IntN(300) {
			s.WriteString(pieces[rng.IntN(len(pieces))])
		}
		sv := `"` + strings.ReplaceAll(s.String(), `"`, `""`) + `"`
		day := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(2500))
		ts := day.Add(time.Duration(rng.Int64N(86400e6)) * time.Microsecond)
		tz := ts.Add(time.Duration(rng.IntN(7)-3) * time.Hour).In(time.FixedZone("", (rng.IntN(5)-2)*3600))
		fmt.Fprintf(&b, "%d,%d,%s,%s,%s,%s,%s,%s,%s\n", id, rng.IntN(7),
			field(rng.IntN(15) == 0, strconv.FormatFloat(v, 'f', -1, 64)),
			field(rng.IntN(15) == 0, strconv.FormatFloat(float64(f), 'f', -1, 32)),
			field(rng.IntN(20) == 0, strconv.FormatBool(rng.IntN(2) == 0)),
			field(rng.IntN(12) == 0, sv),
			field(rng.IntN(25) == 0, day.Format("2006-01-02")),
			field(rng.IntN(25) == 0, ts.Format("2006-01-02 15:04:05.999999")),
			field(rng.IntN(25) == 0, tz.Format("2006-01-02 15:04:05.999999-07:00")))
	}
	return b.String()
}
