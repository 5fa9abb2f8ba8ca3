package merger

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
)

// mergeMustFail merges dirs expecting an error, and checks that nothing was
// left behind and the inputs still verify.
func mergeMustFail(t *testing.T, dirs []string, grant int64) error {
	t.Helper()
	outParent := t.TempDir()
	tmp := t.TempDir()
	_, err := Merge(context.Background(), dirs, filepath.Join(outParent, "out"), Options{Grant: grant, TempDir: tmp})
	if err == nil {
		t.Fatal("merge succeeded")
	}
	for _, d := range []string{outParent, tmp} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("left behind in %s: %v", d, ents)
		}
	}
	return err
}

func TestMergeBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const grant = 64 << 20

	t.Run("no inputs", func(t *testing.T) {
		if _, err := Merge(context.Background(), nil, filepath.Join(t.TempDir(), "out"), Options{Grant: grant}); !errors.Is(err, ErrNoInputs) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no grant", func(t *testing.T) {
		dirs := makeInputs(t, t.TempDir(), rng, 2, 50, 5, 16)
		if err := mergeMustFail(t, dirs, 0); !strings.Contains(err.Error(), "grant") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("output exists", func(t *testing.T) {
		dirs := makeInputs(t, t.TempDir(), rng, 2, 50, 5, 16)
		if _, err := Merge(context.Background(), dirs, dirs[0], Options{Grant: grant}); !errors.Is(err, ErrOutputExists) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing container", func(t *testing.T) {
		dirs := makeInputs(t, t.TempDir(), rng, 2, 50, 5, 16)
		missing := filepath.Join(t.TempDir(), "gone")
		err := mergeMustFail(t, append(dirs, missing), grant)
		if !errors.Is(err, columnar.ErrNotFound) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("different schema", func(t *testing.T) {
		dirs := makeInputs(t, t.TempDir(), rng, 2, 50, 5, 16)
		odd := filepath.Join(t.TempDir(), "odd")
		schema := arrow.NewSchema([]arrow.Field{{Name: "k1", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			{Name: "k2", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		rec := randomRecord(rng, schema, 10, 5, 0)
		writeContainer(t, odd, sortRecord(t, rec, testKey), testKey, 16)
		err := mergeMustFail(t, append(dirs, odd), grant)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), odd) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("different sort key", func(t *testing.T) {
		dirs := makeInputs(t, t.TempDir(), rng, 2, 50, 5, 16)
		odd := filepath.Join(t.TempDir(), "odd")
		key := columnar.SortKey{{Name: "k1", Desc: true}}
		rec := randomRecord(rng, testSchema(), 10, 5, 0)
		writeContainer(t, odd, sortRecord(t, rec, key), key, 16)
		err := mergeMustFail(t, append(dirs, odd), grant)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), odd) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing column file", func(t *testing.T) {
		dirs := makeInputs(t, t.TempDir(), rng, 3, 200, 5, 16)
		man, err := columnar.ReadManifest(dirs[1])
		if err != nil {
			t.Fatal(err)
		}
		file := man.Files[5].Name
		if err := os.Remove(filepath.Join(dirs[1], file)); err != nil {
			t.Fatal(err)
		}
		err = mergeMustFail(t, dirs, grant)
		var ce *columnar.CorruptError
		if !errors.As(err, &ce) || ce.Container != dirs[1] || ce.File != file {
			t.Fatalf("err = %v, want a corrupt error naming %s and %s", err, dirs[1], file)
		}
		for _, d := range []string{dirs[0], dirs[2]} {
			if err := columnar.Verify(d); err != nil {
				t.Errorf("input %s changed: %v", d, err)
			}
		}
	})
	for _, col := range []int{0, 12} { // a key column (key merge) and a gathered one
		t.Run("corrupt block of column "+testSchema().Field(col).Name, func(t *testing.T) {
			dirs := makeInputs(t, t.TempDir(), rng, 3, 200, 5, 16)
			for dirs[2] == "" || mustRows(t, dirs[2]) < 64 {
				dirs = makeInputs(t, t.TempDir(), rng, 3, 200, 5, 16)
			}
			man, err := columnar.ReadManifest(dirs[2])
			if err != nil {
				t.Fatal(err)
			}
			fm := man.Files[col]
			blk := fm.Blocks[2]
			path := filepath.Join(dirs[2], fm.Name)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[blk.Offset+blk.Length/2] ^= 0xFF
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			err = mergeMustFail(t, dirs, grant)
			var ce *columnar.CorruptError
			if !errors.As(err, &ce) || ce.Container != dirs[2] || ce.File != fm.Name || ce.Block != 2 {
				t.Fatalf("err = %v, want a corrupt error naming %s, %s, block 2", err, dirs[2], fm.Name)
			}
			t.Log(err)
		})
	}
}

func mustRows(t *testing.T, dir string) int64 {
	man, err := columnar.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return man.Rows
}

func TestMergeCancelled(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	dirs := makeInputs(t, t.TempDir(), rng, 4, 500, 20, 32)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Merge(ctx, dirs, out, Options{Grant: 64 << 20, TempDir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestMergeProgress(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	dirs := makeInputs(t, t.TempDir(), rng, 4, 500, 20, 32)
	var last, total int64
	st, err := Merge(context.Background(), dirs, filepath.Join(t.TempDir(), "out"), Options{
		Grant: 64 << 20, TempDir: t.TempDir(),
		Progress: func(done, tot int64) {
			if done < last {
				t.Errorf("progress went back from %d to %d", last, done)
			}
			last, total = done, tot
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := st.Rows * int64(st.Columns); last != want || total != want {
		t.Errorf("progress ended at %d of %d, want %d of %d", last, total, want, want)
	}
}
