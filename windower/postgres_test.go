package windower

// TestAgainstPostgres runs random window queries on random data both here
// and in a real PostgreSQL, and compares the results. It runs only when
// STRATA_TEST_POSTGRES=1; psql must be on PATH and the server given by the
// usual libpq variables (PGHOST, PGPORT, PGUSER, PGDATABASE). It creates
// and drops a table named strata_window_test. `make test-postgres` runs it
// against a throwaway cluster (deploy/postgres.sh). Its 300 random cases
// come from seed 11; STRATA_TEST_POSTGRES_SEED=N and
// STRATA_TEST_POSTGRES_ITERATIONS=K run K cases of seed N instead, to soak
// the comparison over other cases.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

func psql(t *testing.T, sql string, stdin string) string {
	t.Helper()
	cmd := exec.Command("psql", "-X", "-q", "-A", "-t", "-F", "|", "-P", "null=NULL", "-v", "ON_ERROR_STOP=1", "-c", sql)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", sql, err, out)
	}
	return string(out)
}

func sqlValue(v *messages.Value) string {
	switch {
	case v.Int != nil:
		return strconv.FormatInt(*v.Int, 10)
	case v.Float != nil:
		return pgFloat(*v.Float, true)
	}
	if iv, ok := v.Interval(); ok {
		return fmt.Sprintf("INTERVAL '%d months %d days %d microseconds'", iv.Months, iv.Days, iv.Micros)
	}
	return "NULL"
}

func exprSQL(e *messages.Expr) string {
	switch {
	case e.Column != "":
		return e.Column
	case e.Const != nil:
		return sqlValue(e.Const)
	}
	return "(" + exprSQL(e.Args[0]) + " " + e.Op + " " + exprSQL(e.Args[1]) + ")"
}

var boundSQL = map[string]string{
	messages.BoundUnboundedPreceding: "UNBOUNDED PRECEDING", messages.BoundPreceding: "PRECEDING",
	messages.BoundCurrentRow: "CURRENT ROW", messages.BoundFollowing: "FOLLOWING", messages.BoundUnboundedFollowing: "UNBOUNDED FOLLOWING",
}

func callSQL(w *messages.WindowCall) string {
	var b strings.Builder
	b.WriteString(w.Func + "(")
	if w.Star {
		b.WriteString("*")
	}
	for i, a := range w.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(exprSQL(a))
	}
	b.WriteString(")")
	if len(w.Filter) > 0 {
		f := w.Filter[0]
		fmt.Fprintf(&b, " FILTER (WHERE %s %s %s)", exprSQL(&f.Left), f.Op, sqlValue(f.Right))
	}
	b.WriteString(" OVER (")
	if len(w.PartitionBy) > 0 {
		b.WriteString("PARTITION BY ")
		for i := range w.PartitionBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(exprSQL(&w.PartitionBy[i]))
		}
		b.WriteString(" ")
	}
	if len(w.OrderBy) > 0 {
		b.WriteString("ORDER BY ")
		for i, o := range w.OrderBy {
			if i > 0 {
				b.WriteString(", ")
			}
			dir, nulls := "ASC", "NULLS LAST"
			if o.Desc {
				dir = "DESC"
			}
			if o.NullsFirst {
				nulls = "NULLS FIRST"
			}
			fmt.Fprintf(&b, "%s %s %s", exprSQL(&o.Expr), dir, nulls)
		}
		b.WriteString(" ")
	}
	if f := w.Frame; f != nil {
		bound := func(fb messages.FrameBound) string {
			if fb.Offset != nil {
				return sqlValue(fb.Offset) + " " + boundSQL[fb.Kind]
			}
			return boundSQL[fb.Kind]
		}
		fmt.Fprintf(&b, "%s BETWEEN %s AND %s", strings.ToUpper(f.Mode), bound(f.Start), bound(f.End))
		switch f.Exclude {
		case messages.ExcludeCurrentRow:
			b.WriteString(" EXCLUDE CURRENT ROW")
		case messages.ExcludeGroup:
			b.WriteString(" EXCLUDE GROUP")
		case messages.ExcludeTies:
			b.WriteString(" EXCLUDE TIES")
		}
	}
	b.WriteString(")")
	return b.String()
}

// deterministic makes a random call's result independent of how peers are
// ordered (PostgreSQL's sort is not stable): calls that see row order get
// id as a last ORDER BY key.
func deterministic(w *messages.WindowCall) {
	// Float sums depend on the order of addition too.
	if !seesPeerOrder(w) && w.Func != "sum" && w.Func != "avg" {
		return
	}
	rangeOffset := w.Frame != nil && w.Frame.Mode == messages.FrameRange &&
		(w.Frame.Start.Offset != nil || w.Frame.End.Offset != nil)
	if rangeOffset {
		// RANGE offsets need exactly one ORDER BY key: use a function
		// that does not see row order instead.
		w.Func, w.Args, w.Star = "count", nil, true
		return
	}
	w.OrderBy = append(w.OrderBy, messages.SortItem{Expr: messages.Expr{Column: "id"}})
}

// seesPeerOrder reports whether w's value depends on the order of the
// rows among their peers, which SQL leaves open: its function reads rows
// by position, or its frame is ROWS.
func seesPeerOrder(w *messages.WindowCall) bool {
	switch w.Func {
	case "row_number", "ntile", "lag", "lead", "first_value", "last_value", "nth_value":
		return true
	}
	return w.Frame != nil && w.Frame.Mode == messages.FrameRows
}

// calendarFrame makes w's frame a RANGE frame with interval offsets
// (months, days, time) over the month-end timestamps c or dates d.
func calendarFrame(rng *rand.Rand, w *messages.WindowCall) {
	w.OrderBy = []messages.SortItem{{Expr: messages.Expr{Column: []string{"c", "d"}[rng.IntN(2)]}, Desc: rng.IntN(2) == 0, NullsFirst: rng.IntN(2) == 0}}
	for {
		f := randomFrame(rng, w.OrderBy)
		if f.Mode == messages.FrameRange && (f.Start.Offset != nil || f.End.Offset != nil) {
			w.Frame = f
			return
		}
	}
}

func TestAgainstPostgres(t *testing.T) {
	if os.Getenv("STRATA_TEST_POSTGRES") != "1" {
		t.Skip("set STRATA_TEST_POSTGRES=1 and the PG* variables to compare with a PostgreSQL server")
	}
	seed := uint64(11)
	if s := os.Getenv("STRATA_TEST_POSTGRES_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRATA_TEST_POSTGRES_SEED=%q: %v", s, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	cache := columnar.NewBlockCache(64 << 20)
	pool := bufpool.New(64 << 20).WithMinBytes(1)
	iterations := 300
	if s := os.Getenv("STRATA_TEST_POSTGRES_ITERATIONS"); s != "" {
		iterations, _ = strconv.Atoi(s)
	}
	for it := 0; it < iterations; it++ {
		n := []int{1, 5, 30, 80, 300}[rng.IntN(5)]
		ref := shapeTable(rng, n)
		var csv strings.Builder
		for i := 0; i < n; i++ {
			for c, f := range shapeSchema.Fields() {
				if c > 0 {
					csv.WriteByte(',')
				}
				csv.WriteString(pgCSVCell(f.Name, ref.cols[f.Name][i]))
			}
			csv.WriteByte('\n')
		}
		psql(t, `DROP TABLE IF EXISTS strata_window_test; CREATE TABLE strata_window_test (id bigint, g int, x bigint, f float8, t timestamp, s text COLLATE "C", c timestamp, d date, u text COLLATE "C")`, "")
		psql(t, "\\copy strata_window_test FROM STDIN WITH (FORMAT csv)", csv.String())
		w := randomCall(rng)
		for _, a := range w.Args {
			if a.Column == "s" && rng.IntN(2) == 0 {
				a.Column = "u"
			}
		}
		if it%3 == 0 {
			calendarFrame(rng, w)
		}
		deterministic(w)
		where := shapeWheres[rng.IntN(len(shapeWheres))]
		sql := "SELECT id, " + callSQL(w) + " AS w FROM strata_window_test" + whereSQL(where) + " ORDER BY id"
		pgOut := psql(t, sql, "")
		q, err := sqlparse.Parse(strings.Replace(sql, "strata_window_test", "t", 1))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		// Over containers of small blocks, as a table is stored.
		s := shape{n: n, containers: 1 + rng.IntN(4), blockRows: []int{7, 64}[rng.IntN(2)]}
		dirs := writeShape(t, t.TempDir(), ref, s)
		kept := ref.filtered(where).n
		// Only the newlines at the end go: a string value may end in spaces.
		lines := strings.Split(strings.TrimRight(pgOut, "\n"), "\n")
		if kept == 0 {
			lines = nil
		}
		// Read as stored, then twice through a block cache and a vector
		// pool: the second run takes every block the first kept, and
		// evaluates in buffers earlier runs wrote.
		for run, o := range []Options{{}, {BlockCache: cache, VectorPool: pool}, {BlockCache: cache, VectorPool: pool}} {
			o.TempDir = t.TempDir()
			res, err := Run(context.Background(), q, dirs, o)
			if err != nil {
				t.Fatalf("%s (%s), run %d: %v", sql, s, run, err)
			}
			got := resultValues(t, res, 0, 1)
			if st := res.Stats(); run == 2 && kept > 0 && st.BlocksCached == 0 {
				t.Errorf("%s (%s): the second run through the cache took no block from it", sql, s)
			}
			res.Close()
			if len(lines) != kept || len(got) != kept {
				t.Fatalf("%s, run %d: postgres returned %d rows, windower %d, want %d", sql, run, len(lines), len(got), kept)
			}
			for _, line := range lines {
				id, val, _ := strings.Cut(line, "|")
				i, _ := strconv.ParseInt(id, 10, 64)
				g := got[i]
				if !pgEqual(val, g) {
					t.Fatalf("%s (%s), run %d\nrow id %d: postgres %q, windower %+v", sql, s, run, i, val, short(g))
				}
			}
		}
	}
	psql(t, "DROP TABLE IF EXISTS strata_window_test", "")
}

// pgCSVCell is v as a field of PostgreSQL's CSV format: NULL unquoted and
// empty, strings always quoted (so that an empty string is not NULL).
func pgCSVCell(name string, v refVal) string {
	switch {
	case v.null:
		return ""
	case name == "t" || name == "c":
		return time.UnixMicro(v.i).UTC().Format("2006-01-02 15:04:05.999999")
	case name == "d":
		return time.Unix(v.i*86400, 0).UTC().Format("2006-01-02")
	case v.kind == kindFloat:
		return pgFloat(v.f, false)
	case v.kind == kindString:
		return `"` + strings.ReplaceAll(v.s, `"`, `""`) + `"`
	}
	return strconv.FormatInt(v.i, 10)
}

// pgFloat spells f as PostgreSQL reads a float8: infinities and NaN by
// name, quoted and cast in SQL.
func pgFloat(f float64, inSQL bool) string {
	var name string
	switch {
	case math.IsInf(f, 1):
		name = "Infinity"
	case math.IsInf(f, -1):
		name = "-Infinity"
	case math.IsNaN(f):
		name = "NaN"
	default:
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if inSQL {
		return "'" + name + "'::float8"
	}
	return name
}

// whereSQL is the WHERE clause of the predicates ps ("" for none).
func whereSQL(ps []messages.Predicate) string {
	var conds []string
	for _, p := range ps {
		switch p.Op {
		case messages.OpIsNull:
			conds = append(conds, p.Left.Column+" IS NULL")
		case messages.OpIsNotNull:
			conds = append(conds, p.Left.Column+" IS NOT NULL")
		default:
			conds = append(conds, p.Left.Column+" "+p.Op+" "+sqlValue(p.Right))
		}
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

func pgEqual(pg string, v refVal) bool {
	if pg == "NULL" || v.null {
		return pg == "NULL" && v.null
	}
	switch v.kind {
	case kindFloat:
		f, err := strconv.ParseFloat(pg, 64)
		return err == nil && floatsClose(f, v.f)
	case kindString:
		return pg == v.s
	}
	if ts, err := time.Parse("2006-01-02 15:04:05.999999", pg); err == nil {
		return ts.UnixMicro() == v.i
	}
	if i, err := strconv.ParseInt(pg, 10, 64); err == nil {
		return i == v.i
	}
	// numeric results (sum of bigint) print like 12 or 12.000.
	f, err := strconv.ParseFloat(pg, 64)
	return err == nil && f == float64(v.i)
}
