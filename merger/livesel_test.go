package merger

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-db/strata/columnar"
)

// overlapAlways makes the planner's cost model let the key merge overlap
// the gathers however short it is, for the rest of t.
func overlapAlways(t *testing.T) {
	saved := minOverlapSeconds
	minOverlapSeconds = 0
	t.Cleanup(func() { minOverlapSeconds = saved })
}

// TestMergeOverlapped: with the key merge beside the gathers the output is
// the reference merge and byte for byte what the key merge before the
// gathers writes, under grants down to the smallest the planner takes, and
// the peak never passes the estimate nor the grant.
func TestMergeOverlapped(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, tc := range []struct{ k, rows, blockRows int }{
		{12, 3000, 256},
		{5, 4000, 64},
	} {
		dirs := makeInputs(t, t.TempDir(), rng, tc.k, tc.rows, 200, tc.blockRows)
		overlapped := 0
		for grant := int64(4 << 20); ; grant = grant * 3 / 4 {
			saved := minOverlapSeconds
			minOverlapSeconds = 0
			st := checkMergeOrGrantError(t, dirs, Options{Grant: grant, Parallelism: 2})
			minOverlapSeconds = saved
			if st == nil {
				break
			}
			if !st.Overlapped {
				continue
			}
			overlapped++
			if st.PeakBytes > st.EstimatedBytes {
				t.Errorf("k=%d, grant %d: peak %d above the estimate %d", tc.k, grant, st.PeakBytes, st.EstimatedBytes)
			}
			if overlapped > 3 {
				continue
			}
			// The same merge with the key merge first writes the same bytes.
			a := mergeTo(t, dirs, Options{Grant: grant, Parallelism: 2}, 0)
			b := mergeTo(t, dirs, Options{Grant: grant, Parallelism: 2}, math.Inf(1))
			sameContainer(t, a, b)
		}
		if overlapped == 0 {
			t.Errorf("k=%d: no grant ran the key merge beside the gathers", tc.k)
		}
		t.Logf("k=%d: %d grants overlapped", tc.k, overlapped)
	}
}

// checkMergeOrGrantError is checkMerge, or nil when the grant is too small.
func checkMergeOrGrantError(t *testing.T, dirs []string, opts Options) *Stats {
	t.Helper()
	_, err := Merge(context.Background(), dirs, filepath.Join(t.TempDir(), "probe"), Options{Grant: opts.Grant, Parallelism: opts.Parallelism, TempDir: t.TempDir()})
	var ge *GrantError
	if errors.As(err, &ge) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return checkMerge(t, dirs, opts)
}

// mergeTo merges dirs with minOverlapSeconds set to minOverlap and returns
// the output's directory.
func mergeTo(t *testing.T, dirs []string, opts Options, minOverlap float64) string {
	t.Helper()
	saved := minOverlapSeconds
	minOverlapSeconds = minOverlap
	defer func() { minOverlapSeconds = saved }()
	out := filepath.Join(t.TempDir(), "out")
	opts.TempDir = t.TempDir()
	st, err := Merge(context.Background(), dirs, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Overlapped != (minOverlap == 0) {
		t.Fatalf("minOverlapSeconds %v: overlapped %v", minOverlap, st.Overlapped)
	}
	return out
}

// sameContainer checks that a and b hold the same column files and blocks.
func sameContainer(t *testing.T, a, b string) {
	t.Helper()
	ma, err := columnar.ReadManifest(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := columnar.ReadManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ma.Files, mb.Files) || !reflect.DeepEqual(ma.Blocks, mb.Blocks) {
		t.Fatalf("manifests differ:\n%+v\n%+v", ma, mb)
	}
	for _, f := range ma.Files {
		fa, err := os.ReadFile(filepath.Join(a, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.ReadFile(filepath.Join(b, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fa, fb) {
			t.Fatalf("column file %s differs", f.Name)
		}
	}
}

// TestMergeBadInputOverlapped runs the bad-input cases with the key merge
// beside the gathers: a corrupt gathered column stops the key merge, a
// corrupt key column stops the gathers, and nothing is left behind.
func TestMergeBadInputOverlapped(t *testing.T) {
	overlapAlways(t)
	TestMergeBadInput(t)
	TestMergeCancelled(t)
}

// TestLiveSel: readers wait for rows published, and get the rows published
// so far once the writer closes.
func TestLiveSel(t *testing.T) {
	ls := newLiveSel(10)
	got := make(chan []uint16)
	go func() { got <- ls.wait(6) }()
	if err := ls.append(1, 4); err != nil {
		t.Fatal(err)
	}
	ls.publish()
	if err := ls.append(2, 4); err != nil {
		t.Fatal(err)
	}
	ls.publish()
	if s := <-got; !reflect.DeepEqual(s, []uint16{1, 1, 1, 1, 2, 2}) {
		t.Fatalf("wait(6) = %v", s)
	}
	if err := ls.append(3, 3); !errors.Is(err, ErrMismatch) {
		t.Fatalf("append past the rows: %v", err)
	}
	ls.close()
	if s := ls.wait(10); len(s) != 8 {
		t.Fatalf("wait(10) after close = %v, want the 8 rows appended", s)
	}
}
