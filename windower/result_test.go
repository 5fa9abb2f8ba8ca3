package windower

import (
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// TestResultHeldAgainstBudget checks that an in-memory result's columns
// stay counted against the budget until Close.
func TestResultHeldAgainstBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	_, rec := randomTable(rng, 10000)
	defer rec.Release()
	budget := columnar.NewBudget(1<<30, nil)
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
	}}
	res, err := RunRecords(context.Background(), q, diffSchema, nil, Options{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	res.Close()
	res, err = RunRecords(context.Background(), q, diffSchema, []arrow.RecordBatch{rec}, Options{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	if held, min := budget.InUse(), int64(2*8*10000); held < min {
		t.Errorf("result of two 10000-row int64 columns holds %d budget bytes, want at least %d", held, min)
	}
	res.Close()
	if held := budget.InUse(); held != 0 {
		t.Errorf("%d budget bytes still held after Close", held)
	}
}

// TestResultNextAfterClose: Next on a closed Result, in memory or spilled,
// says io.EOF; it panicked on an in-memory one whose rows were not all
// read.
func TestResultNextAfterClose(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	_, rec := randomTable(rng, 20000)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	q := &messages.WindowQuery{Table: "t", Select: []messages.SelectItem{
		{Alias: "id", Expr: col("id")},
		{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}}},
	}}
	for _, grant := range []int64{1 << 30, MinGrant} {
		res, err := Run(context.Background(), q, []string{dir}, Options{Grant: grant, TempDir: t.TempDir(), BatchRows: 1000})
		if err != nil {
			t.Fatal(err)
		}
		first, err := res.Next()
		if err != nil {
			t.Fatal(err)
		}
		first.Release()
		res.Close()
		if b, err := res.Next(); err != io.EOF {
			t.Errorf("grant %d (spilled %d bytes): Next after Close returned %v, %v; want io.EOF", grant, res.Stats().SpilledBytes, b, err)
		}
	}
}
