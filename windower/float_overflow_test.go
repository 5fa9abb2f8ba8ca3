package windower

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/windower/sqlparse"
)

// A sum or average of double precision values whose value is out of
// range is an error, as PostgreSQL's float8pl and float8_accum make it
// ("value out of range: overflow", 22003), unless an input was infinite;
// a frame of huge values that does not overflow sums exactly. Each query
// runs in memory on 1 and 4 threads and over a container under MinGrant,
// where the one partition (80,000 rows of padded strings, larger than
// the grant) is evaluated in slices with cursors.
func TestFloatSumOverflow(t *testing.T) {
	parallelSmall(t)
	const n = 80000
	huge := math.MaxFloat64 / 1.5 // two of them overflow
	table := func(set map[int]float64) (arrow.RecordBatch, string) {
		schema := arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			{Name: "pad", Type: arrow.BinaryTypes.String},
		}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		pad := strings.Repeat("p", 150)
		for i := range n {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			f := float64(i%7) - 3
			if v, ok := set[i]; ok {
				f = v
			}
			b.Field(1).(*array.Float64Builder).Append(f)
			b.Field(2).(*array.StringBuilder).Append(pad)
		}
		rec := b.NewRecordBatch()
		t.Cleanup(rec.Release)
		return rec, writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	}
	// runs returns the results of q in memory (1 and 4 threads) and
	// spilled, or the first error of each.
	runs := func(sql string, rec arrow.RecordBatch, dir string) map[string]floatResult {
		q, err := sqlparse.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]floatResult{}
		for _, threads := range []int{1, 4} {
			res, err := RunRecords(context.Background(), q, rec.Schema(), []arrow.RecordBatch{rec}, Options{Grant: 1 << 30, Threads: threads})
			out[fmt.Sprintf("in memory, %d threads", threads)] = drainValues(res, err)
			res, err = Run(context.Background(), q, []string{dir}, Options{Grant: MinGrant, TempDir: t.TempDir(), Threads: threads})
			r := drainValues(res, err)
			if r.err == nil && r.stats.SpilledBytes == 0 {
				t.Fatalf("%s: did not spill", sql)
			}
			out[fmt.Sprintf("spilled, %d threads", threads)] = r
		}
		return out
	}
	wantOverflow := func(sql string, rec arrow.RecordBatch, dir string) {
		t.Helper()
		for how, r := range runs(sql, rec, dir) {
			if !errors.Is(r.err, ErrOverflow) || !strings.Contains(r.err.Error(), "value out of range: overflow") {
				t.Errorf("%s, %s: error %v, want an overflow", sql, how, r.err)
			}
		}
	}
	wantValues := func(sql string, rec arrow.RecordBatch, dir string, want func(i int) float64) {
		t.Helper()
		for how, r := range runs(sql, rec, dir) {
			if r.err != nil {
				t.Errorf("%s, %s: %v", sql, how, r.err)
				continue
			}
			if len(r.values) != n {
				t.Fatalf("%s, %s: %d rows, want %d", sql, how, len(r.values), n)
			}
			for i, got := range r.values {
				if w := want(i); got != w && !(math.IsNaN(got) && math.IsNaN(w)) {
					t.Errorf("%s, %s: row %d is %g, want %g", sql, how, i, got, w)
					break
				}
			}
		}
	}

	// Two huge values side by side: every frame that holds both overflows.
	rec, dir := table(map[int]float64{70000: huge, 70001: huge})
	for _, frame := range []string{
		"",
		"PARTITION BY id / 100000", // numbered by a table, not sorted
		"ORDER BY id",
		"ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
		"ORDER BY id ROWS BETWEEN 3 PRECEDING AND 2 FOLLOWING",
		"ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE CURRENT ROW",
		"ORDER BY id ROWS BETWEEN 30000 FOLLOWING AND 30001 FOLLOWING", // past a halo: cursors
	} {
		wantOverflow("SELECT id, sum(f) OVER ("+frame+") AS v, pad FROM t", rec, dir)
		wantOverflow("SELECT id, avg(f) OVER ("+frame+") AS v, pad FROM t", rec, dir)
	}
	// No frame holds both: the values, exactly.
	f := func(i int) float64 {
		if i == 70000 || i == 70001 {
			return huge
		}
		return float64(i%7) - 3
	}
	wantValues("SELECT id, sum(f) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND CURRENT ROW) AS v, pad FROM t", rec, dir, f)
	wantValues("SELECT id, sum(f) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 1 FOLLOWING) AS v, pad FROM t", rec, dir,
		func(i int) float64 {
			if i+1 == n {
				return math.NaN() // NULL
			}
			return f(i + 1)
		})

	wantValues("SELECT id, sum(f) OVER (ORDER BY id ROWS BETWEEN 30000 FOLLOWING AND 30000 FOLLOWING) AS v, pad FROM t", rec, dir,
		func(i int) float64 {
			if i+30000 >= n {
				return math.NaN()
			}
			return f(i + 30000)
		})

	// An infinite input: the sum is infinite, not an overflow.
	rec, dir = table(map[int]float64{70000: math.Inf(1), 70001: huge, 70002: huge})
	wantValues("SELECT id, sum(f) OVER () AS v, pad FROM t", rec, dir, func(int) float64 { return math.Inf(1) })
}

// floatResult is what drainValues read: column v of every row (NULL as
// NaN), or the first error.
type floatResult struct {
	values []float64
	stats  Stats
	err    error
}

// drainValues reads every batch of res (err is Run's), closing it.
func drainValues(res *Result, err error) floatResult {
	if err != nil {
		return floatResult{err: err}
	}
	defer res.Close()
	var out floatResult
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			out.stats = res.Stats()
			return out
		}
		if err != nil {
			return floatResult{err: err}
		}
		v := rec.Column(1).(*array.Float64)
		for i := range v.Len() {
			x := v.Value(i)
			if v.IsNull(i) {
				x = math.NaN()
			}
			out.values = append(out.values, x)
		}
		rec.Release()
	}
}

// TestAgainstPostgresFloat8Overflow runs float8 sums and averages whose
// frames hold huge values, infinities and NaN (small tables, so each
// query's frames are few) on PostgreSQL and on strata, in memory and
// under MinGrant with one big partition: both fail with "value out of
// range: overflow", or both give the same values (in row order exactly,
// over sliding frames within float8's rounding of the frame's values).
func TestAgainstPostgresFloat8Overflow(t *testing.T) {
	if os.Getenv("STRATA_TEST_POSTGRES") != "1" {
		t.Skip("set STRATA_TEST_POSTGRES=1 and the PG* variables to compare with a PostgreSQL server")
	}
	parallelSmall(t)
	huge := math.MaxFloat64 / 1.5
	tables := []map[int]float64{
		{3: huge, 4: huge},           // any frame with both overflows
		{3: huge, 9: huge},           // far apart
		{3: huge, 4: -huge, 5: huge}, // a frame's sum in range
		{3: math.Inf(1), 4: huge, 5: huge},
		{3: math.NaN(), 6: huge, 7: huge},
		{2: -huge, 3: -huge, 20: huge},
	}
	calls := []string{
		"sum(f) OVER ()",
		"avg(f) OVER ()",
		"sum(f) OVER (PARTITION BY id / 1000)",
		"sum(f) OVER (ORDER BY id)",
		"avg(f) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING)",
		"sum(f) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
		"sum(f) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND CURRENT ROW)",
		"sum(f) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE CURRENT ROW)",
		"sum(f) OVER (ORDER BY id ROWS BETWEEN 4 FOLLOWING AND 5 FOLLOWING)",
	}
	const n = 60000 // rows of 200 bytes: a partition past MinGrant
	for k, set := range tables {
		schema := arrow.NewSchema([]arrow.Field{
			{Name: "id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "f", Type: arrow.PrimitiveTypes.Float64},
			{Name: "pad", Type: arrow.BinaryTypes.String},
		}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		var csv strings.Builder
		pad := strings.Repeat("p", 180)
		for i := range n {
			f := 0.0
			if i < 30 {
				f = float64(i%5) - 2
			}
			if v, ok := set[i]; ok {
				f = v
			}
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			b.Field(1).(*array.Float64Builder).Append(f)
			b.Field(2).(*array.StringBuilder).Append(pad)
			fmt.Fprintf(&csv, "%d,%s\n", i, pgFloat(f, false))
		}
		rec := b.NewRecordBatch()
		b.Release()
		defer rec.Release()
		dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
		psql(t, "DROP TABLE IF EXISTS strata_float8_test; CREATE TABLE strata_float8_test (id bigint, f float8)", "")
		psql(t, "\\copy strata_float8_test FROM STDIN WITH (FORMAT csv)", csv.String())
		// Over the same values two orders of addition differ by at most
		// a rounding of the sum of their magnitudes per value (all but 30
		// are zeros).
		var mag float64
		for i := range 30 {
			if f := rec.Column(1).(*array.Float64).Value(i); f-f == 0 {
				mag += math.Abs(f)
			}
		}
		tolerance := 30 * mag * 0x1p-52
		for _, call := range calls {
			want, pgErr := psqlResult("SELECT id, " + call + " AS v FROM strata_float8_test ORDER BY id")
			if pgErr != nil && strings.HasPrefix(call, "avg") {
				// PostgreSQL's avg also keeps the sum of squares that
				// variance needs, and fails when that overflows (values
				// past about 1e154). strata's avg fails as its sum does.
				if _, sumErr := psqlResult("SELECT id, sum" + strings.TrimPrefix(call, "avg") + " AS v FROM strata_float8_test ORDER BY id"); sumErr == nil {
					pgErr, want = nil, nil
				}
			}
			q, err := sqlparse.Parse("SELECT id, " + call + " AS v, pad FROM t ORDER BY id")
			if err != nil {
				t.Fatal(err)
			}
			for _, threads := range []int{1, 3} {
				what := fmt.Sprintf("table %d, %s, %d threads", k, call, threads)
				res, err := RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{Threads: threads})
				checkAgainstPostgres(t, what+", in memory", drainValues(res, err), want, pgErr, tolerance)
				res, err = Run(context.Background(), q, []string{dir}, Options{Grant: MinGrant, TempDir: t.TempDir(), Threads: threads})
				checkAgainstPostgres(t, what+", spilled", drainValues(res, err), want, pgErr, tolerance)
			}
		}
	}
	psql(t, "DROP TABLE IF EXISTS strata_float8_test", "")
}

// psqlResult runs sql (id, then a float) and returns the floats in id
// order (NULL as NaN), or PostgreSQL's error.
func psqlResult(sql string) ([]float64, error) {
	out, err := exec.Command("psql", "-X", "-q", "-A", "-t", "-F", "|", "-P", "null=NULL", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(out)))
	}
	var vals []float64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		_, v, _ := strings.Cut(line, "|")
		switch v {
		case "NULL", "NaN":
			vals = append(vals, math.NaN())
		case "Infinity":
			vals = append(vals, math.Inf(1))
		case "-Infinity":
			vals = append(vals, math.Inf(-1))
		default:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("psql row %q: %v", line, err)
			}
			vals = append(vals, f)
		}
	}
	return vals, nil
}

// checkAgainstPostgres compares strata's result with PostgreSQL's: the
// same error, or values within tolerance of PostgreSQL's (want nil:
// values, unchecked).
func checkAgainstPostgres(t *testing.T, what string, got floatResult, want []float64, pgErr error, tolerance float64) {
	t.Helper()
	if pgErr != nil {
		if !strings.Contains(pgErr.Error(), "value out of range: overflow") {
			t.Fatalf("%s: PostgreSQL: %v", what, pgErr)
		}
		if !errors.Is(got.err, ErrOverflow) {
			t.Errorf("%s: %v; PostgreSQL: %v", what, got.err, pgErr)
		}
		return
	}
	if got.err != nil {
		t.Errorf("%s: %v; PostgreSQL gives values", what, got.err)
		return
	}
	if want == nil {
		return
	}
	if len(got.values) != len(want) {
		t.Errorf("%s: %d rows, PostgreSQL %d", what, len(got.values), len(want))
		return
	}
	for i, w := range want {
		g := got.values[i]
		if !floatsClose(g, w) && !(math.Abs(g-w) <= tolerance) {
			t.Errorf("%s: id %d: %v, PostgreSQL %v", what, i, g, w)
			return
		}
	}
}
