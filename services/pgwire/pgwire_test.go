package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower"
)

// localBackend runs window queries in the test's process over generated
// containers: the sessions' whole road but the scheduler.
type localBackend struct {
	dataDir string
	dirs    []string
	// keyed, when set, is a keyed table k (keyed on k0) whose changes the
	// backend applies in process, as the walwriter would (changes_test.go).
	keyed  *keyedLocal
	n      atomic.Int64
	block  chan struct{}         // if set, runWindow waits on it (or ctx)
	panics atomic.Bool           // runWindow panics
	onEnd  func(context.Context) // if set, told when ctx ends a blocked runWindow
	// tableReads counts the schema reads (catalog requests, in the service).
	tableReads atomic.Int64
}

func (b *localBackend) tables(ctx context.Context, only string) ([]tableInfo, error) {
	b.tableReads.Add(1)
	m, err := columnar.ReadManifest(b.dirs[0])
	if err != nil {
		return nil, err
	}
	var out []tableInfo
	if only == "" || only == "t" {
		out = append(out, tableInfo{name: "t", columns: m.Schema})
	}
	if b.keyed != nil && (only == "" || only == "k") {
		out = append(out, tableInfo{name: "k", columns: b.keyed.columns()})
	}
	return out, nil
}

func (b *localBackend) runWindow(ctx context.Context, q *messages.WindowQuery) (string, func(), error) {
	if b.panics.Load() {
		panic("injected")
	}
	dir, err := b.run(ctx, q)
	return dir, func() {}, err
}

func (b *localBackend) run(ctx context.Context, q *messages.WindowQuery) (string, error) {
	if b.block != nil {
		select {
		case <-b.block:
		case <-ctx.Done():
			if b.onEnd != nil {
				b.onEnd(ctx)
			}
			return "", ctx.Err()
		}
	}
	dirs := b.dirs
	switch {
	case q.Table == "k" && b.keyed != nil:
		dirs = b.keyed.liveDirs()
	case q.Table != "t":
		return "", &messages.APIError{Code: "not_found", Message: "scheduler: unknown table: " + q.Table}
	}
	res, err := windower.Run(ctx, q, dirs, windower.Options{Threads: 2})
	if err != nil {
		return "", &jobFailedError{reason: err.Error()}
	}
	defer res.Close()
	id := fmt.Sprintf("r%d", b.n.Add(1))
	dir := columnar.ContainerDir(b.dataDir, "t_result", messages.ResultProjection, id)
	if _, err := windower.WriteContainer(res, dir, columnar.WriterOptions{Table: "t_result", Projection: messages.ResultProjection, ID: id, NoSync: true, BlockRows: 100}); err != nil {
		return "", err
	}
	return dir, nil
}

type testServer struct {
	srv            *server
	addr, password string
	be             *localBackend
	data           string
}

func startServer(t testing.TB, tlsConf *tls.Config) *testServer {
	t.Helper()
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 6, Containers: 2, RowsPerContainer: 300, BlockRows: 64, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	be := &localBackend{dataDir: data}
	for _, m := range ms {
		be.dirs = append(be.dirs, columnar.ContainerDir(data, m.Table, m.Projection, m.ID))
	}
	if _, err := pgauth.EnsureDefault(data); err != nil {
		t.Fatal(err)
	}
	pw, err := os.ReadFile(pgauth.PasswordFile(data, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(slog.New(slog.NewTextHandler(io.Discard, nil)), be, data, tlsConf, nil)
	done := make(chan struct{})
	go func() { _ = srv.serve(ln); close(done) }()
	t.Cleanup(func() { ln.Close(); srv.closeAll(); <-done })
	return &testServer{srv: srv, addr: ln.Addr().String(), password: strings.TrimSpace(string(pw)), be: be, data: data}
}

func (s *testServer) url(user, password, sslmode string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/strata?sslmode=%s", user, url.QueryEscape(password), s.addr, sslmode)
}

func (s *testServer) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), s.url("strata", s.password, "disable"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error %v, want SQLSTATE %s", err, code)
	}
}

const testSQL = `SELECT k0, c004_int32, c001_utf8, c002_float64, c003_timestamp_us, c005_bool,
	rank() OVER (PARTITION BY c004_int32 % 4 ORDER BY k0) AS r FROM t`

func rowsOf(t *testing.T, rows pgx.Rows) []string {
	t.Helper()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var f []string
		for _, v := range vals {
			if tm, ok := v.(time.Time); ok {
				v = tm.UTC().Format(time.RFC3339Nano)
			}
			f = append(f, fmt.Sprint(v))
		}
		out = append(out, strings.Join(f, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every protocol and format gives the same rows, and they are those of
// the result container.
func TestQueryProtocolsAgree(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	var first []string
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec} {
		rows, err := c.Query(ctx, testSQL+" ORDER BY k0", mode)
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		got := rowsOf(t, rows)
		if len(got) != 600 {
			t.Fatalf("%v: %d rows", mode, len(got))
		}
		want := []uint32{oidInt8, oidInt4, oidText, oidFloat8, oidTimestamptz, oidBool, oidInt8}
		for i, fd := range rows.FieldDescriptions() {
			if fd.DataTypeOID != want[i] {
				t.Fatalf("%v: column %s type %d, want %d", mode, fd.Name, fd.DataTypeOID, want[i])
			}
		}
		if first == nil {
			first = got
		} else if !slices.Equal(first, got) {
			t.Fatalf("%v differs from the simple protocol", mode)
		}
	}
	// LIMIT/OFFSET and a parameter.
	rows, err := c.Query(ctx, testSQL+" WHERE c004_int32 > $1 ORDER BY k0 LIMIT $2 OFFSET 3", int64(0), 5)
	if err != nil {
		t.Fatal(err)
	}
	got := rowsOf(t, rows)
	var want []string
	for _, r := range first {
		if f := strings.Split(r, "|"); !strings.HasPrefix(f[1], "-") && f[1] != "0" && f[1] != "<nil>" {
			want = append(want, r)
		}
	}
	// rank differs under the filter: compare the other columns.
	cut := func(rs []string) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r[:strings.LastIndex(r, "|")])
		}
		return out
	}
	if !slices.Equal(cut(got), cut(want[3:8])) {
		t.Fatalf("LIMIT $2 OFFSET 3:\n%v\nwant\n%v", got, want[3:8])
	}
	// A string parameter with a quote in it.
	var n int
	rows, err = c.Query(ctx, "SELECT k0, row_number() OVER () AS n FROM t WHERE c001_utf8 = $1", "it's")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		n++
	}
	if rows.Err() != nil || n != 0 {
		t.Fatal(n, rows.Err())
	}
}

func TestSessionStatements(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	var str string
	var i int
	for _, tc := range []struct {
		sql  string
		want string
	}{
		{"SHOW server_version", serverVersion},
		{"SHOW client_encoding", "UTF8"},
		{"SELECT current_setting('DateStyle')", "ISO, MDY"},
		{"SELECT version()", "PostgreSQL " + serverVersion + " on strata, compiled by Go"},
		{"SELECT current_database()", "strata"},
	} {
		if err := c.QueryRow(ctx, tc.sql).Scan(&str); err != nil || str != tc.want {
			t.Errorf("%s: %q %v", tc.sql, str, err)
		}
	}
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&i); err != nil || i != 1 {
		t.Fatal(i, err)
	}
	for _, sql := range []string{"SET search_path = public", "SET extra_float_digits TO 3", "BEGIN", "COMMIT", "ROLLBACK", "RESET ALL", ";"} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := c.Exec(ctx, "SET application_name = 'reporting'"); err != nil {
		t.Fatal(err)
	}
	if got := c.PgConn().ParameterStatus("application_name"); got != "reporting" {
		t.Fatalf("application_name reported as %q", got)
	}
	if _, err := c.Exec(ctx, "SET foo.bar = 'x y'"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SHOW foo.bar").Scan(&str); err != nil || str != "x y" {
		t.Fatal(str, err)
	}
	for _, tc := range []struct{ sql, code string }{
		{"INSERT INTO t VALUES (1)", "0A000"},
		{"CREATE TABLE x (a int)", "0A000"},
		{"SELECT k0 FROM t GROUP BY k0", "0A000"},
		{"SELECT FROM WHERE", "42601"},
		{"SELECT k0, rank() OVER (ORDER BY k0) FROM nope", "42P01"},
		{"SELECT nope, rank() OVER (ORDER BY k0) FROM t", "42703"},
		{"SELECT k0, c004_int32 / 0 AS d FROM t", "22012"},
		{"SHOW nothing_here", "42704"},
		{"SET statement_timeout = 'soon'", "22023"},
	} {
		_, err := c.Exec(ctx, tc.sql)
		wantCode(t, err, tc.code)
		_, err = c.Exec(ctx, tc.sql, pgx.QueryExecModeSimpleProtocol)
		wantCode(t, err, tc.code)
	}
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&i); err != nil || i != 1 {
		t.Fatal("session broken after errors", err)
	}
}

func TestCancelAndTimeout(t *testing.T) {
	s := startServer(t, nil)
	s.be.block = make(chan struct{})
	c := s.connect(t)
	ctx := context.Background()
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = c.PgConn().CancelRequest(ctx)
	}()
	_, err := c.Exec(ctx, testSQL, pgx.QueryExecModeSimpleProtocol)
	wantCode(t, err, "57014")
	if _, err := c.Exec(ctx, "SET statement_timeout = 100"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Exec(ctx, testSQL)
	wantCode(t, err, "57014")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout after %v", d)
	}
	// A cancel request with a wrong key does nothing.
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := (&pgproto3.CancelRequest{ProcessID: c.PgConn().PID(), SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
	nc.Write(buf)
	nc.Close()
}

func TestAuthentication(t *testing.T) {
	s := startServer(t, nil)
	ctx := context.Background()
	for _, u := range []string{"strata", "nobody"} {
		_, err := pgx.Connect(ctx, s.url(u, "wrong", "disable"))
		wantCode(t, err, "28P01")
	}
	// Without TLS configured, sslmode=prefer falls back (SSLRequest answered N).
	c, err := pgx.Connect(ctx, s.url("strata", s.password, "prefer"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if err := pgauth.SetUser(s.data, "reader", pgauth.RoleRead, "pw-of-reader"); err != nil {
		t.Fatal(err)
	}
	c, err = pgx.Connect(ctx, s.url("reader", "pw-of-reader", "disable"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
}

func TestMaxConnections(t *testing.T) {
	s := startServer(t, nil)
	s.srv.mu.Lock()
	s.srv.maxSessions = 1
	s.srv.mu.Unlock()
	c := s.connect(t)
	_, err := pgx.Connect(context.Background(), s.url("strata", s.password, "disable"))
	wantCode(t, err, "53300")
	c.Close(context.Background())
	time.Sleep(50 * time.Millisecond) // the session's end is seen by the server
	c2 := s.connect(t)
	c2.Close(context.Background())
}

func TestTLS(t *testing.T) {
	s := startServer(t, selfSigned(t))
	ctx := context.Background()
	_, err := pgx.Connect(ctx, s.url("strata", s.password, "disable"))
	wantCode(t, err, "28000")
	c, err := pgx.Connect(ctx, s.url("strata", s.password, "require"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var i int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&i); err != nil || i != 1 {
		t.Fatal(i, err)
	}
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// psql's \dt and \d TABLE queries (psql 15), answered from the catalog.
func TestPsqlCatalogQueries(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	rows, err := c.Query(ctx, `SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, rows); !slices.Equal(got, []string{"public|t|table|strata"}) {
		t.Fatalf(`\dt: %v`, got)
	}
	rows, err = c.Query(ctx, `SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	got := rowsOf(t, rows)
	if want := fmt.Sprintf("%d|public|t", tableOID("t")); !slices.Equal(got, []string{want}) {
		t.Fatalf(`\d t lookup: %v`, got)
	}
	rows, err = c.Query(ctx, fmt.Sprintf(`SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '%d' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;`, tableOID("t")), pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	got = rowsOf(t, rows)
	if len(got) != 6 || !strings.HasPrefix(got[0], "k0|bigint|") || !strings.HasPrefix(got[1], "c001_utf8|text|") {
		t.Fatalf(`\d t columns: %v`, got)
	}
	// A footer query over what strata has none of: no rows, no error.
	rows, err = c.Query(ctx, `SELECT pol.polname FROM pg_catalog.pg_policy pol WHERE pol.polrelid = '1'`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, rows); len(got) != 0 {
		t.Fatal(got)
	}
	rows, err = c.Query(ctx, `SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_name = 't' ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, rows); len(got) != 6 || got[4] != "t|c004_int32|integer" {
		t.Fatal(got)
	}
}

// The binary encodings read back with pgx's own decoders.
func TestTypeEncodings(t *testing.T) {
	m := pgtype.NewMap()
	ts := time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.UTC)
	for _, tc := range []struct {
		oid  uint32
		v    any
		text string
	}{
		{oidBool, true, "t"},
		{oidInt2, int64(-7), "-7"},
		{oidInt4, int64(1 << 30), "1073741824"},
		{oidInt8, int64(math.MinInt64), "-9223372036854775808"},
		{oidFloat8, 1.5, "1.5"},
		{oidFloat8, 1e20, "1e+20"},
		{oidFloat8, 123456789.0, "123456789"},
		{oidFloat8, 0.0001, "0.0001"},
		{oidFloat8, 0.00001, "1e-05"},
		{oidFloat4, float64(float32(0.1)), "0.1"},
		{oidText, "héllo", "héllo"},
		{oidBytea, []byte{0, 0xff}, `\x00ff`},
		{oidDate, time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), "1999-12-31"},
		{oidTimestamp, ts, "2024-02-29 13:14:15.123456"},
		{oidTimestamptz, ts, "2024-02-29 13:14:15.123456+00"},
		{oidNumeric, uint64(math.MaxUint64), "18446744073709551615"},
		{oidNumeric, uint64(10000), "10000"},
		{oidNumeric, uint64(0), "0"},
	} {
		text, err := appendValue(nil, tc.oid, 0, tc.v)
		if err != nil || string(text) != tc.text {
			t.Errorf("%d %v: text %q %v, want %q", tc.oid, tc.v, text, err, tc.text)
		}
		bin, err := appendValue(nil, tc.oid, 1, tc.v)
		if err != nil {
			t.Fatal(err)
		}
		var fromText, fromBin any
		if fromText, err = decode(m, tc.oid, 0, text); err != nil {
			t.Fatalf("%d %v: decode text: %v", tc.oid, tc.v, err)
		}
		if fromBin, err = decode(m, tc.oid, 1, bin); err != nil {
			t.Fatalf("%d %v: decode binary: %v", tc.oid, tc.v, err)
		}
		if fmt.Sprint(fromText) != fmt.Sprint(fromBin) {
			t.Errorf("%d %v: text reads %v, binary %v", tc.oid, tc.v, fromText, fromBin)
		}
	}
	for _, tc := range []struct {
		t   arrow.DataType
		oid uint32
	}{
		{arrow.PrimitiveTypes.Int8, oidInt2}, {arrow.PrimitiveTypes.Int16, oidInt2}, {arrow.PrimitiveTypes.Int32, oidInt4},
		{arrow.PrimitiveTypes.Int64, oidInt8}, {arrow.PrimitiveTypes.Uint8, oidInt2}, {arrow.PrimitiveTypes.Uint16, oidInt4},
		{arrow.PrimitiveTypes.Uint32, oidInt8}, {arrow.PrimitiveTypes.Uint64, oidNumeric}, {arrow.PrimitiveTypes.Float32, oidFloat4},
		{arrow.PrimitiveTypes.Float64, oidFloat8}, {arrow.FixedWidthTypes.Boolean, oidBool}, {arrow.BinaryTypes.String, oidText},
		{arrow.BinaryTypes.Binary, oidBytea}, {arrow.FixedWidthTypes.Date32, oidDate},
		{&arrow.TimestampType{Unit: arrow.Microsecond}, oidTimestamp}, {&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, oidTimestamptz},
	} {
		if got, err := oidOf(tc.t); err != nil || got != tc.oid {
			t.Errorf("%s: %d %v, want %d", tc.t, got, err, tc.oid)
		}
	}
}

func decode(m *pgtype.Map, oid uint32, format int16, b []byte) (any, error) {
	typ, ok := m.TypeForOID(oid)
	if !ok {
		return nil, fmt.Errorf("no type %d", oid)
	}
	return typ.Codec.DecodeValue(m, oid, format, b)
}

func TestBindParams(t *testing.T) {
	for _, tc := range []struct {
		sql    string
		oids   []uint32
		values []string
		want   string
	}{
		{"SELECT a FROM t WHERE b = $1", nil, []string{"5"}, "SELECT a FROM t WHERE b =  5 "},
		{"SELECT a FROM t WHERE b = $1", nil, []string{"it's"}, "SELECT a FROM t WHERE b =  'it''s' "},
		{"SELECT a FROM t WHERE b = $1", []uint32{oidText}, []string{"5"}, "SELECT a FROM t WHERE b =  '5' "},
		{"SELECT '$1', a FROM t WHERE b = -$1 -- $1", nil, []string{"-5"}, "SELECT '$1', a FROM t WHERE b = - -5  -- $1"},
		{`SELECT a FROM t WHERE b = $1`, nil, []string{`x\'); DROP`}, `SELECT a FROM t WHERE b =  'x\''); DROP' `},
	} {
		vals := make([][]byte, len(tc.values))
		for i, v := range tc.values {
			vals[i] = []byte(v)
		}
		got, err := bindParams(tc.sql, tc.oids, nil, vals)
		if err != nil || got != tc.want {
			t.Errorf("%s %v: %q %v, want %q", tc.sql, tc.values, got, err, tc.want)
		}
	}
	if _, err := bindParams("SELECT $2", nil, nil, [][]byte{[]byte("1")}); err == nil {
		t.Error("$2 of one parameter bound")
	}
	if _, err := bindParams("SELECT $1", []uint32{oidInt8}, nil, [][]byte{[]byte("1; DROP")}); err == nil {
		t.Error("a bigint parameter that is no number bound")
	}
	if got := inferParams("SELECT a FROM t WHERE b > $1 AND $2 = c LIMIT $3", 3, map[string]uint32{"b": oidInt4, "c": oidText}); !slices.Equal(got, []uint32{oidInt4, oidText, oidInt8}) {
		t.Errorf("inferred %v", got)
	}
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		tls  bool
		ok   bool
	}{
		{"127.0.0.1:5433", false, true}, {"[::1]:5433", false, true}, {"localhost:5433", false, true},
		{"0.0.0.0:5433", false, false}, {":5433", false, false}, {"10.1.2.3:5433", false, false}, {"0.0.0.0:5433", true, true},
	} {
		if err := checkListen(tc.addr, tc.tls); (err == nil) != tc.ok {
			t.Errorf("%s tls=%v: %v", tc.addr, tc.tls, err)
		}
	}
}

// FuzzStartup: malformed startup packets and messages give an error,
// never a panic or a hang.
func FuzzStartup(f *testing.F) {
	startup, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "strata", "database": "x"}}).Encode(nil)
	ssl, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	cancel, _ := (&pgproto3.CancelRequest{ProcessID: 7, SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
	query, _ := (&pgproto3.Query{String: "SELECT 1"}).Encode(nil)
	f.Add(startup)
	f.Add(append(ssl, startup...))
	f.Add(cancel)
	f.Add(append(startup, query...))
	f.Add([]byte{0, 0, 0, 8, 4, 210, 22, 47})
	f.Add([]byte{0, 0, 0, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 3, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		rw := &fuzzConn{r: bytes.NewReader(data)}
		st, rw2, err := readStartup(rw, nil)
		if err != nil {
			return
		}
		if st.params == nil && st.cancel == nil {
			t.Fatal("startup without parameters or cancel")
		}
		be := pgproto3.NewBackend(rw2, io.Discard)
		be.SetMaxBodyLen(maxMessage)
		for range 16 {
			if _, err := be.Receive(); err != nil {
				return
			}
		}
	})
}

type fuzzConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (c *fuzzConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *fuzzConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// The front door's metrics follow the Prometheus conventions and count
// connections and statements by outcome.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := newServer(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, t.TempDir(), nil, reg)
	srv.queries.WithLabelValues("42").Inc()
	fams := metricstest.Check(t, reg, "pgwire", map[string]dto.MetricType{
		"strata_pgwire_connections":   dto.MetricType_GAUGE,
		"strata_pgwire_queries_total": dto.MetricType_COUNTER,
	})
	if v := metricstest.Value(fams, "strata_pgwire_queries_total", "outcome", "42"); v != 1 {
		t.Fatalf("queries with outcome 42: %v", v)
	}
}

// An Execute with a row limit sends that many rows and PortalSuspended;
// the next Execute goes on where it stopped.
func TestExecuteRowLimit(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	pc := c.PgConn()
	fe := pc.Frontend()
	fe.Send(&pgproto3.Parse{Query: testSQL + " ORDER BY k0 LIMIT 250"})
	fe.Send(&pgproto3.Bind{})
	for range 3 {
		fe.Send(&pgproto3.Execute{MaxRows: 100})
	}
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var rows []int
	n, suspended := 0, 0
	var tag string
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			n++
		case *pgproto3.PortalSuspended:
			rows = append(rows, n)
			suspended++
		case *pgproto3.CommandComplete:
			rows = append(rows, n)
			tag = string(m.CommandTag)
		case *pgproto3.ErrorResponse:
			t.Fatalf("%s: %s", m.Code, m.Message)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if !slices.Equal(rows, []int{100, 200, 250}) || suspended != 2 || tag != "SELECT 250" {
		t.Fatalf("rows after each Execute %v, %d suspended, tag %q", rows, suspended, tag)
	}
}

// A panic while answering a statement is that statement's error; the
// session goes on.
func TestPanicIsAnError(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	s.be.panics.Store(true)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		_, err := c.Exec(ctx, testSQL, mode)
		wantCode(t, err, "XX000")
	}
	s.be.panics.Store(false)
	var n int
	if err := c.QueryRow(ctx, "SELECT k0, row_number() OVER () AS n FROM t LIMIT 1").Scan(&n, new(int64)); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := c.QueryRow(ctx, "SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&name); err != nil || name != "t" {
		t.Fatal(name, err)
	}
}

// FuzzPlan: any query text is planned or refused with an error, never a
// panic: the parser's trees of odd SQL reach the catalog evaluator and
// the constant SELECTs.
func FuzzPlan(f *testing.F) {
	for _, q := range []string{
		"SELECT 1", "SELECT version()", "SHOW ALL", "SET x TO 'y'", "BEGIN; COMMIT",
		"SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind IN ('r') AND NOT c.relispartition ORDER BY 1",
		"SELECT CASE WHEN a.attnum > 0 THEN a.attname END FROM pg_attribute a WHERE a.attrelid = '1' OR a.attname ~ 'x('",
		"SELECT a FROM pg_class UNION SELECT b FROM pg_namespace",
		testSQL + " LIMIT 3 OFFSET 2", "SELECT k0 FROM t OFFSET $1",
		"COPY t (k0) FROM STDIN WITH (FORMAT csv, HEADER match, NULL 'x')", "COPY (" + testSQL + ") TO STDOUT CSV HEADER", "COPY t TO STDOUT",
		"DECLARE c NO SCROLL CURSOR WITH HOLD FOR " + testSQL, "FETCH FORWARD 5 FROM c", "MOVE ALL IN c", "CLOSE ALL",
	} {
		f.Add(q)
	}
	data := f.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 4, Containers: 1, RowsPerContainer: 10, Seed: 1})
	if err != nil {
		f.Fatal(err)
	}
	be := &localBackend{dataDir: data, dirs: []string{columnar.ContainerDir(data, "t", "p", ms[0].ID)}}
	srv := newServer(slog.New(slog.NewTextHandler(io.Discard, nil)), be, data, nil, nil)
	f.Fuzz(func(t *testing.T, sql string) {
		s := &session{srv: srv, user: &pgauth.User{Name: "strata"}, database: "strata", settings: defaultSettings(), txn: 'I'}
		stmts, err := s.plan(context.Background(), sql)
		if err != nil {
			var pe *pgError
			if !errors.As(err, &pe) || len(pe.code) != 5 {
				t.Fatalf("%q: error without SQLSTATE: %v", sql, err)
			}
			return
		}
		for _, st := range stmts {
			if st.window == nil && st.cols != nil {
				for _, r := range st.rows {
					if len(r) != len(st.cols) {
						t.Fatalf("%q: row of %d values, %d columns", sql, len(r), len(st.cols))
					}
				}
			}
		}
	})
}
