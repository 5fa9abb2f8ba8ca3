package windower

import (
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/bufpool"
	"github.com/strata-db/strata/windower/sqlparse"
)

// TestVectorPoolBatchOutlivesResult: a query that runs in memory borrows
// its columns from Options.VectorPool and gives them back when its Result
// is closed, except those a batch still read holds: the next queries
// borrow other buffers, write them, and the held batch keeps its values;
// once it is released, its buffers are lent again.
func TestVectorPoolBatchOutlivesResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	_, rec := randomTable(rng, 50000)
	defer rec.Release()
	dir := writeContainer(t, filepath.Join(t.TempDir(), "c0"), rec, nil)
	q, err := sqlparse.Parse("SELECT id, x, f, sum(x) OVER (PARTITION BY g) AS sx, " +
		"row_number() OVER (PARTITION BY g ORDER BY id) AS rn, lag(f) OVER (ORDER BY id) AS pf FROM t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(o Options) *Result {
		t.Helper()
		o.TempDir = t.TempDir()
		res, err := Run(ctx, q, []string{dir}, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := drain(t, run(Options{}))

	pool := bufpool.New(256 << 20)
	res := run(Options{VectorPool: pool})
	held, err := res.Next()
	if err != nil {
		t.Fatal(err)
	}
	var heldRows []string
	for r := range int(held.NumRows()) {
		row := ""
		for c := range int(held.NumCols()) {
			row += held.Column(c).ValueStr(r) + "|"
		}
		heldRows = append(heldRows, row)
	}
	if !slices.Equal(heldRows, want[:len(heldRows)]) {
		t.Fatal("the first batch through the pool differs from the run without it")
	}
	rest := drain(t, res)
	res.Close()
	if got := append(slices.Clone(heldRows), rest...); !slices.Equal(got, want) {
		t.Fatal("the run through the pool differs from the run without it")
	}
	held1 := pool.Stats()
	if held1.Made == 0 {
		t.Fatalf("the run borrowed nothing: %+v", held1)
	}

	for i := range 3 {
		res := run(Options{VectorPool: pool})
		if got := drain(t, res); !slices.Equal(got, want) {
			t.Fatalf("run %d through the pool differs from the run without it", i+2)
		}
		res.Close()
		for r, row := range heldRows {
			got := ""
			for c := range int(held.NumCols()) {
				got += held.Column(c).ValueStr(r) + "|"
			}
			if got != row {
				t.Fatalf("after run %d, row %d of the batch held from the first reads %q, want %q", i+2, r, got, row)
			}
		}
	}
	before := pool.Stats()
	held.Release()
	after := pool.Stats()
	if after.Returned <= before.Returned {
		t.Errorf("releasing the held batch returned nothing to the pool: before %+v, after %+v", before, after)
	}
	res = run(Options{VectorPool: pool})
	if got := drain(t, res); !slices.Equal(got, want) {
		t.Fatal("the run after the batch's release differs from the run without it")
	}
	res.Close()
	if s := pool.Stats(); s.Lent <= after.Lent || s.Bytes > s.Capacity {
		t.Errorf("the last run lent nothing again: %+v", s)
	}

	// A Result closed before its batches are read gives everything back.
	res = run(Options{VectorPool: pool})
	lentBefore := pool.Stats().Lent
	res.Close()
	if _, err := res.Next(); err != io.EOF {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}
	if s := pool.Stats(); s.Lent == lentBefore && s.Returned == after.Returned {
		t.Errorf("closing an unread Result returned nothing: %+v", s)
	}
}
