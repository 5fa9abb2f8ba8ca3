package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/pgauth"
)

// pgwireDeployment runs the scheduler, a windower, a walwriter applying
// changes and pgwire as processes, with a table t (1200 rows) and a keyed
// table acc (30 rows, the model returned) loaded by the CLI.
func pgwireDeployment(t *testing.T) (d *deployment, pgAddr, password string, m keyedModel) {
	t.Helper()
	for _, b := range []string{"scheduler", "windower", "walwriter", "pgwire", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d = newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	d.start("walwriter", "walwriter-1", "--flush-interval", "200ms")
	pgAddr = freeAddr(t)
	d.start("pgwire", "pgwire-1", "--pg-listen", pgAddr)
	d.cli("load", "--table", "t", "--columns", "6", "--containers", "3", "--rows", "400", "--seed", "7", "--block-rows", "128")
	m = loadKeyed(t, d, "acc", 30)
	pw, err := os.ReadFile(pgauth.PasswordFile(d.dataDir, pgauth.DefaultUser))
	if err != nil {
		t.Fatal(err)
	}
	return d, pgAddr, strings.TrimSpace(string(pw)), m
}

// cliCSV runs a window query with the CLI and returns its CSV file's bytes
// (NULL as null).
func cliCSV(t *testing.T, d *deployment, sql, null string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cli.csv")
	args := []string{"--out", out}
	if null != "" {
		args = append(args, "--null-string", null)
	}
	d.cli("window", append(args, sql)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// csvRecords reads CSV bytes: the header and the records.
func csvRecords(t *testing.T, b []byte) ([]string, [][]string) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("csv: %v\n%.300s", err, b)
	}
	return recs[0], recs[1:]
}

// sameField compares a value as two clients print it: the same text, the
// same number, the same truth value (t and true) or the same UTC time
// (PostgreSQL's +00, the CLI's Z).
func sameField(a, b string) bool {
	if a == b {
		return true
	}
	if utc, ok := strings.CutSuffix(a, "+00"); ok && utc+"Z" == b {
		return true
	}
	if utc, ok := strings.CutSuffix(b, "+00"); ok && utc+"Z" == a {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa == fb
	}
	truth := map[string]string{"t": "true", "f": "false"}
	return truth[a] == b || truth[b] == a
}

// compareRecords compares rows field by field with sameField, in order.
func compareRecords(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: row %d has %d fields, want %d: %q, want %q", what, i, len(got[i]), len(want[i]), got[i], want[i])
		}
		for j := range got[i] {
			if !sameField(got[i][j], want[i][j]) {
				t.Fatalf("%s: row %d field %d: %q, want %q (rows %q, want %q)", what, i, j, got[i][j], want[i][j], got[i], want[i])
			}
		}
	}
}

func sortRecords(recs [][]string) [][]string {
	out := slices.Clone(recs)
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, "\x00"), strings.Join(b, "\x00")) })
	return out
}

// TestPgwireCopy: psql's \copy both ways against the processes. \copy
// FROM a CSV and a text file loads a keyed table's rows (the CLI then
// reads the model), a bad line loads nothing and names the line and
// column; \copy (SELECT ...) TO a CSV file writes the bytes strata window
// --out writes for the query, \copy acc TO the rows strata export writes;
// and a cursor read in pieces by FETCH is the query's rows.
func TestPgwireCopy(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("psql is not on PATH (apt-get install postgresql-client)")
		}
		t.Skip("psql is not on PATH")
	}
	d, pgAddr, password, m := pgwireDeployment(t)
	host, port, _ := strings.Cut(pgAddr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	psqlRun := func(args ...string) (string, string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, psql, append([]string{fmt.Sprintf("host=%s port=%s user=strata dbname=strata", host, port), "-X", "-v", "ON_ERROR_STOP=1"}, args...)...)
		cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=10")
		cmd.Dir = dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	mustPsql := func(args ...string) string {
		t.Helper()
		out, errOut, err := psqlRun(args...)
		if err != nil {
			t.Fatalf("psql %v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// \copy FROM: CSV with a header, quotes, NULL as an empty field.
	var b strings.Builder
	b.WriteString("id,g,v,s\n")
	for id := int64(1001); id <= 1050; id++ {
		var s any = fmt.Sprintf("csv %d, \"quoted\"", id)
		field := `"` + strings.ReplaceAll(s.(string), `"`, `""`) + `"`
		if id%7 == 0 {
			s, field = nil, ""
		}
		m[id] = []any{id, id % 3, float64(id) / 4, s}
		fmt.Fprintf(&b, "%d,%d,%g,%s\n", id, id%3, float64(id)/4, field)
	}
	write("in.csv", b.String())
	if out := mustPsql("-c", `\copy acc (id, g, v, s) FROM 'in.csv' WITH (FORMAT csv, HEADER)`); strings.TrimSpace(out) != "COPY 50" {
		t.Fatalf(`\copy FROM csv: %q`, out)
	}
	// The text format: tab-separated, \N, escapes.
	b.Reset()
	for id := int64(1101); id <= 1120; id++ {
		var s any = fmt.Sprintf("text %d\twith a tab", id)
		field := fmt.Sprintf(`text %d\twith a tab`, id)
		if id%5 == 0 {
			s, field = nil, `\N`
		}
		m[id] = []any{id, int64(4), 0.5, s}
		fmt.Fprintf(&b, "%d\t4\t0.5\t%s\n", id, field)
	}
	write("in.txt", b.String())
	if out := mustPsql("-c", `\copy acc FROM 'in.txt'`); strings.TrimSpace(out) != "COPY 20" {
		t.Fatalf(`\copy FROM text: %q`, out)
	}
	compareRows(t, `after \copy FROM`, queryChanged(t, d, "acc"), changedRows(m))

	// A bad line: an error naming it, nothing loaded.
	seq := updatesLastSeq(t, d)
	write("bad.csv", "id,g,v,s\n1201,1,0.5,fine\n1202,x,0.5,bad\n")
	out, errOut, err := psqlRun("-c", `\copy acc FROM 'bad.csv' CSV HEADER`)
	if err == nil || !strings.Contains(errOut, `invalid input syntax for type bigint: "x"`) || !strings.Contains(errOut, "line 3, column g") {
		t.Fatalf("bad line: %v\n%s%s", err, out, errOut)
	}
	write("dup.txt", "1001\t1\t1\tagain\n")
	if _, errOut, err := psqlRun("-c", `\copy acc FROM 'dup.txt'`); err == nil || !strings.Contains(errOut, "Key (id)=(1001) already exists") {
		t.Fatalf("duplicate key: %v\n%s", err, errOut)
	}
	write("plain.txt", "1\n")
	if _, errOut, err := psqlRun("-c", `\copy t (k0) FROM 'plain.txt'`); err == nil || !strings.Contains(errOut, "append-only") {
		t.Fatalf("append-only table: %v\n%s", err, errOut)
	}
	if got := updatesLastSeq(t, d); got != seq {
		t.Fatalf("the refused COPYs sent %d changes", got-seq)
	}

	// \copy (SELECT ...) TO: the bytes of strata window --out.
	query := pgwireSQL + " ORDER BY k0"
	mustPsql("-c", `\copy (`+query+`) TO 'out.csv' WITH (FORMAT csv, HEADER)`)
	got, err := os.ReadFile(filepath.Join(dir, "out.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := cliCSV(t, d, query, ""); !bytes.Equal(got, want) {
		t.Fatalf("\\copy TO csv differs from strata window --out:\n%.300s\nwant\n%.300s", got, want)
	}
	// \copy acc TO: strata export's rows (in another order: a query's
	// result is not the containers one after the other).
	mustPsql("-c", `\copy acc TO 'acc.csv' WITH (FORMAT csv, HEADER)`)
	got, err = os.ReadFile(filepath.Join(dir, "acc.csv"))
	if err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(t.TempDir(), "export.csv")
	d.cli("export", "acc", "--out", exported)
	want, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	gh, gr := csvRecords(t, got)
	wh, wr := csvRecords(t, want)
	if !slices.Equal(gh, wh) || len(gr) != len(m) {
		t.Fatalf("\\copy acc TO: header %q (export %q), %d rows (model %d)", gh, wh, len(gr), len(m))
	}
	compareRecords(t, `\copy acc TO against strata export`, sortRecords(gr), sortRecords(wr))
	// The text format, against the CLI's rows.
	mustPsql("-c", `\copy (`+query+`) TO 'out.txt'`)
	got, err = os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, cliRecs := csvRecords(t, cliCSV(t, d, query, `\N`))
	compareRecords(t, `\copy TO text`, textRecords(string(got)), cliRecs)

	// A cursor read in pieces.
	write("cursor.sql", "BEGIN;\nDECLARE c NO SCROLL CURSOR FOR "+query+";\nFETCH FORWARD 7 FROM c;\nMOVE 3 FROM c;\nFETCH 500 FROM c;\nFETCH ALL FROM c;\nCLOSE c;\nCOMMIT;\n")
	out = mustPsql("-A", "-t", "-F", ",", "-P", "null=", "-f", "cursor.sql")
	var fetched [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, ","); len(f) == 5 {
			fetched = append(fetched, f)
		}
	}
	_, all := csvRecords(t, cliCSV(t, d, query, ""))
	compareRecords(t, "FETCH through psql", fetched, append(slices.Clone(all[:7]), all[10:]...))
	// psql's FETCH_COUNT: its own cursor (BEGIN, DECLARE _psql_cursor,
	// FETCH FORWARD 100 until the rows run out, CLOSE, COMMIT).
	out = mustPsql("-v", "FETCH_COUNT=100", "-A", "-t", "-F", ",", "-P", "null=", "-c", query)
	fetched = nil
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fetched = append(fetched, strings.Split(line, ","))
	}
	compareRecords(t, "psql with FETCH_COUNT", fetched, all)
}

// textRecords reads COPY's text format (tab-separated, \N as the CLI's
// \N, backslash escapes).
func textRecords(s string) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var rec []string
		for _, f := range strings.Split(line, "\t") {
			if f != `\N` {
				f = strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n", `\r`, "\r").Replace(f)
			}
			rec = append(rec, f)
		}
		out = append(out, rec)
	}
	return out
}

// psycopgPython is /usr/bin/python3 when it imports psycopg (3). Without
// it the test fails when CI=true (.ci/run installs python3-psycopg with
// make bench-deps) and is skipped elsewhere.
func psycopgPython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	out, err := exec.Command(python, "-c", "import psycopg; print(psycopg.__version__)").CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("%s cannot import psycopg (apt-get install python3-psycopg; make bench-deps does): %v: %s", python, err, bytes.TrimSpace(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Logf("psycopg %s", bytes.TrimSpace(out))
	return python
}

// TestPgwirePsycopg runs testdata/pgwire_psycopg.py, psycopg 3 against
// the processes: the extended protocol with server-side binding, prepared
// statements, binary results, a ClientCursor (the simple protocol with
// client-side binding), a named server-side cursor over a 200,000-row
// result read with fetchmany, WITH HOLD and binary named cursors, COPY TO
// in CSV, text and binary (read back with rows()) and COPY FROM with
// write_row (text and binary) and with CSV, and a COPY with a bad row. Each result is compared here with the CLI's for the
// same query; the table the COPYs loaded, read by the CLI, is the model.
func TestPgwirePsycopg(t *testing.T) {
	python := psycopgPython(t)
	d, pgAddr, password, m := pgwireDeployment(t)
	d.cli("load", "--table", "big", "--columns", "6", "--containers", "4", "--rows", "50000", "--seed", "11")
	host, port, _ := strings.Cut(pgAddr, ":")
	outDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dsn := fmt.Sprintf("host=%s port=%s user=strata dbname=strata sslmode=disable connect_timeout=10", host, port)
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "pgwire_psycopg.py"), dsn, outDir)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgwire_psycopg.py: %v\n%s", err, out)
	}
	t.Logf("the psycopg script ran in %v", time.Since(start).Round(time.Millisecond))
	var summary struct {
		ExtendedStatus    string            `json:"extended_status"`
		BinaryFormats     []int             `json:"binary_formats"`
		CopyInStatus      string            `json:"copy_in_status"`
		CopyInCSVStatus   string            `json:"copy_in_csv_status"`
		CopyInBinary      string            `json:"copy_in_binary_status"`
		CopyOutBinary     [][]any           `json:"copy_out_binary"`
		CopyBad           map[string]string `json:"copy_bad"`
		CopyBadRows       int               `json:"copy_bad_rows"`
		NamedDescription  []string          `json:"named_description"`
		NamedPieces       int               `json:"named_pieces"`
		NamedLargestPiece int               `json:"named_largest_piece"`
	}
	raw, err := os.ReadFile(filepath.Join(outDir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var loose map[string]any
	if err := json.Unmarshal(raw, &loose); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		// copy_bad is a string when no error came.
		t.Fatalf("summary %s: %v", raw, err)
	}
	for k, v := range map[string]string{"extended": summary.ExtendedStatus, "copy in": summary.CopyInStatus, "copy in csv": summary.CopyInCSVStatus, "copy in binary": summary.CopyInBinary} {
		want := map[string]string{"extended": "SELECT", "copy in": "COPY 200", "copy in csv": "COPY 10", "copy in binary": "COPY 20"}[k]
		if !strings.HasPrefix(v, want) {
			t.Errorf("%s: status %q, want %q", k, v, want)
		}
	}
	if fmt.Sprint(loose["extended_types"]) != "[20 25 701 1184 23 16 20]" {
		t.Errorf("types %v", loose["extended_types"])
	}
	if len(summary.BinaryFormats) != 7 || slices.ContainsFunc(summary.BinaryFormats, func(f int) bool { return f != 1 }) {
		t.Errorf("binary cursor formats %v", summary.BinaryFormats)
	}
	if summary.CopyBad["sqlstate"] != "22P02" || !strings.Contains(summary.CopyBad["message"], "line 2, column g") || !strings.Contains(summary.CopyBad["context"], `COPY acc, line 2, column g: "not a number"`) || summary.CopyBadRows != 0 {
		t.Errorf("the bad COPY: %v, %d rows loaded", loose["copy_bad"], summary.CopyBadRows)
	}
	if !slices.Equal(summary.NamedDescription, []string{"k0", "c004_int32", "r"}) || summary.NamedPieces != (200000+7918)/7919 || summary.NamedLargestPiece != 7919 {
		t.Errorf("named cursor: %v, %d pieces, largest %d", summary.NamedDescription, summary.NamedPieces, summary.NamedLargestPiece)
	}

	const typed = "SELECT k0, c001_utf8, c002_float64, c003_timestamp_us, c004_int32, c005_bool, " +
		"row_number() OVER (PARTITION BY c005_bool ORDER BY k0) AS rn FROM t"
	const big = "SELECT k0, c004_int32, rank() OVER (PARTITION BY c005_bool ORDER BY k0) AS r FROM big"
	cliRecs := func(sql string) [][]string {
		_, recs := csvRecords(t, cliCSV(t, d, sql, "NULL"))
		for _, r := range recs {
			for i := range r {
				r[i] = strings.ReplaceAll(r[i], "\n", `\n`)
			}
		}
		return sortRecords(recs)
	}
	rowsFile := func(name string) [][]string {
		b, err := os.ReadFile(filepath.Join(outDir, name+".rows"))
		if err != nil {
			t.Fatal(err)
		}
		var recs [][]string
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if line != "" {
				recs = append(recs, strings.Split(line, "|"))
			}
		}
		return sortRecords(recs)
	}
	positive := cliRecs(typed + " WHERE c004_int32 > 0")
	if len(positive) == 0 || len(positive) == 1200 {
		t.Fatalf("the filter keeps %d rows", len(positive))
	}
	for _, name := range []string{"extended", "prepared", "binary", "held", "named_binary"} {
		compareRecords(t, "psycopg "+name, rowsFile(name), positive)
	}
	compareRecords(t, "psycopg client-side binding", rowsFile("client"), cliRecs(typed+" WHERE c004_int32 > 0 AND c001_utf8 <> 'it''s not there'"))
	compareRecords(t, "psycopg without parameters", rowsFile("all"), cliRecs(typed))
	named := rowsFile("named")
	if len(named) != 200000 {
		t.Fatalf("the named cursor gave %d rows", len(named))
	}
	compareRecords(t, "psycopg named cursor", named, cliRecs(big))

	// COPY TO: the CLI's CSV bytes; the text format, its rows.
	got, err := os.ReadFile(filepath.Join(outDir, "copy_out.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := cliCSV(t, d, typed+" ORDER BY k0", ""); !bytes.Equal(got, want) {
		t.Fatalf("psycopg COPY TO csv differs from strata window --out:\n%.300s\nwant\n%.300s", got, want)
	}
	got, err = os.ReadFile(filepath.Join(outDir, "copy_out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, ordered := csvRecords(t, cliCSV(t, d, typed+" ORDER BY k0", `\N`))
	compareRecords(t, "psycopg COPY TO text", textRecords(string(got)), ordered)

	// COPY FROM: the table the CLI reads is the model.
	for i := int64(2001); i <= 2200; i++ {
		var s any = fmt.Sprintf("row %d, tab\there", i)
		if i%10 == 0 {
			s = nil
		}
		m[i] = []any{i, i % 4, float64(i) / 8, s}
	}
	for i := int64(2201); i <= 2210; i++ {
		m[i] = []any{i, i % 4, float64(i) / 8, fmt.Sprintf("csv, %d", i)}
	}
	var binaryRows [][]any
	for i := int64(2301); i <= 2320; i++ {
		var s any = fmt.Sprintf("binary \\x00-free, %d", i)
		if i%7 == 0 {
			s = nil
		}
		m[i] = []any{i, i % 4, float64(i) / 16, s}
		binaryRows = append(binaryRows, []any{float64(i), float64(i % 4), float64(i) / 16, s})
	}
	if fmt.Sprint(summary.CopyOutBinary) != fmt.Sprint(binaryRows) {
		t.Errorf("binary COPY TO read by psycopg: %v\nwant %v", summary.CopyOutBinary, binaryRows)
	}
	compareRows(t, "after psycopg's COPY FROM", queryChanged(t, d, "acc"), changedRows(m))
}
