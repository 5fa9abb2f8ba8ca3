package merger

import (
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
)

func openAll(t testing.TB, dirs []string, opts columnar.OpenOptions) []*columnar.Container {
	t.Helper()
	cs := make([]*columnar.Container, len(dirs))
	for i, d := range dirs {
		c, err := columnar.Open(d, opts)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	return cs
}

func TestMergeReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	dirs := makeInputs(t, t.TempDir(), rng, 9, 700, 30, 50)
	want := referenceMerge(t, dirs)
	budget := columnar.NewBudget(64<<20, nil)
	cs := openAll(t, dirs, columnar.OpenOptions{Allocator: budget})
	ncols := testSchema().NumFields()

	t.Run("all columns", func(t *testing.T) {
		cols := make([]int, ncols)
		for i := range cols {
			cols[i] = i
		}
		r, err := NewMergeReader(cs, cols, MergeReaderOptions{Allocator: budget, BatchRows: 333})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got []string
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec.NumRows() > 333 {
				t.Errorf("batch of %d rows, want at most 333", rec.NumRows())
			}
			got = append(got, formatRows(rec)...)
			rec.Release()
		}
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("row %d:\n got %s\nwant %s", i, got[i], want[i])
			}
		}
	})

	t.Run("subset reordered", func(t *testing.T) {
		seq := ncols - 1
		r, err := NewMergeReader(cs, []int{seq, 12}, MergeReaderOptions{Allocator: budget})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Schema().Field(0).Name != "seq" || r.Schema().Field(1).Name != "s" {
			t.Fatalf("schema %v", r.Schema())
		}
		i := 0
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range formatRows(rec) {
				cells := strings.Split(want[i], "|")
				if w := cells[seq] + "|" + cells[12] + "|"; row != w {
					t.Fatalf("row %d = %s, want %s", i, row, w)
				}
				i++
			}
			rec.Release()
		}
		if i != len(want) {
			t.Fatalf("%d rows, want %d", i, len(want))
		}
	})
	if budget.InUse() != 0 {
		t.Errorf("budget holds %d bytes after the readers closed", budget.InUse())
	}
}

func TestMergeReaderMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	dirs := makeInputs(t, t.TempDir(), rng, 2, 20, 5, 8)
	other := t.TempDir() + "/other"
	schema := arrow.NewSchema([]arrow.Field{{Name: "k1", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := randomRecord(rng, schema, 5, 3, 0)
	writeContainer(t, other, sortRecord(t, rec, columnar.SortKey{{Name: "k1"}}), columnar.SortKey{{Name: "k1"}}, 8)
	cs := openAll(t, append(dirs, other), columnar.OpenOptions{})
	if _, err := NewMergeReader(cs, []int{0}, MergeReaderOptions{}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("err = %v, want ErrMismatch", err)
	}
}
