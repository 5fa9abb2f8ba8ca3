package columnar

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/messages"
)

// escapeFixture is a data directory beside a directory it must never
// reach: base/outside/victim/keep and base/sentinel, with a symbolic link
// base/data/link pointing at base/outside.
type escapeFixture struct {
	base, data string
	dd         *DataDir
}

func newEscapeFixture(t testing.TB) *escapeFixture {
	base := t.TempDir()
	f := &escapeFixture{base: base, data: filepath.Join(base, "data")}
	f.reset(t)
	dd, err := OpenDataDir(f.data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dd.Close() })
	f.dd = dd
	return f
}

func (f *escapeFixture) reset(t testing.TB) {
	for _, d := range []string{filepath.Join(f.base, "outside", "victim"), filepath.Join(f.data, "t", "p", "c")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(f.base, "outside", "victim", "keep"), filepath.Join(f.base, "sentinel")} {
		if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(f.data, "link")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(filepath.Join("..", "outside"), link); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *escapeFixture) checkOutside(t testing.TB, what string) {
	t.Helper()
	for _, p := range []string{filepath.Join(f.base, "outside", "victim", "keep"), filepath.Join(f.base, "sentinel")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "keep" {
			t.Fatalf("%s: %s outside the data directory was touched: %v", what, p, err)
		}
	}
}

// everyOp runs each DataDir operation with the names in every position.
func everyOp(dd *DataDir, a, b, c string) {
	for _, n := range [][3]string{{a, b, c}, {"t", a, b}, {"t", "p", a}, {a, "p", "c"}, {"link", a, b}} {
		dd.ContainerDir(n[0], n[1], n[2])
		dd.ReadManifest(n[0], n[1], n[2])
		dd.Check(n[0], n[1], n[2])
		if f, err := dd.Open(n[0], n[1], n[2]); err == nil {
			f.Close()
		}
		dd.ReadDir(n[0], n[1])
		dd.RemoveContainer(n[0], n[1], n[2])
		dd.RemoveEmpty(n[0], n[1])
		dd.RemoveAll(n[0], n[1], n[2])
		dd.RemoveAll(n[0])
	}
}

func TestDataDirConfines(t *testing.T) {
	f := newEscapeFixture(t)
	for _, n := range [][3]string{
		{"..", "outside", "victim"}, {"t", "..", ".."}, {"../../outside", "victim", "keep"}, {"t", "p", "../../../outside/victim"},
		{"link", "victim", "keep"}, {"link", "victim", ""}, {"/", "etc", "passwd"}, {"t", "p", "/abs"}, {"a\x00b", "p", "c"},
		{filepath.Join(f.base, "outside"), "victim", "keep"}, {".", ".", "."},
	} {
		if _, err := f.dd.ContainerDir(n[0], n[1], n[2]); err == nil {
			t.Errorf("ContainerDir%q resolved", n)
		} else if !errors.Is(err, ErrOutsideRoot) {
			t.Errorf("ContainerDir%q: %v, not ErrOutsideRoot", n, err)
		}
		if err := f.dd.RemoveContainer(n[0], n[1], n[2]); err == nil && n[0] != "." {
			// A symbolic link out of the root is refused by the root itself.
			if n[0] == "link" {
				t.Errorf("RemoveContainer%q through a link succeeded", n)
			}
		}
		everyOp(f.dd, n[0], n[1], n[2])
		f.checkOutside(t, strings.Join(n[:], "|"))
		f.reset(t)
	}
	dir, err := f.dd.ContainerDir("t", "p", "c")
	if err != nil || dir != filepath.Join(f.data, "t", "p", "c") {
		t.Fatalf("ContainerDir(t, p, c) = %q, %v", dir, err)
	}
	if err := f.dd.RemoveContainer("t", "p", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("container still there: %v", err)
	}
	if err := f.dd.RemoveContainer("t", "p", "c"); err != nil {
		t.Fatalf("removing a missing container: %v", err)
	}
}

// FuzzNameConfinement fuzzes the wire's name validator and the data
// directory's root together: a name messages.ValidName accepts resolves
// to a path inside the data directory, and no operation through the root
// with any names touches what lies outside it.
func FuzzNameConfinement(f *testing.F) {
	for _, s := range [][3]string{
		{"t", "p", "c"}, {"..", "..", ".."}, {"../../outside", "victim", "keep"}, {"t", "p", "../../../../outside/victim"},
		{"-rf", "p", "c"}, {"link", "victim", "keep"}, {".", "", "x"}, {"t/../..", "outside", "victim"}, {"a\x00", "b", "c"},
		{"..\\..", "x", "y"}, {"/tmp", "x", "y"}, {"t", "p", ".c.tmp-1"}, {"ok.name", "x-y", "z_1"}, {"link/..", "..", "outside"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fx := newEscapeFixture(f)
	f.Fuzz(func(t *testing.T, a, b, c string) {
		for _, n := range []string{a, b, c} {
			if messages.ValidName(n) != nil {
				continue
			}
			p, err := fx.dd.ContainerDir("t", "p", n)
			if err != nil {
				t.Fatalf("valid name %q does not resolve: %v", n, err)
			}
			if r, err := filepath.Rel(fx.data, p); err != nil || !filepath.IsLocal(r) || r != filepath.Join("t", "p", n) {
				t.Fatalf("valid name %q resolves to %s, outside %s", n, p, fx.data)
			}
		}
		everyOp(fx.dd, a, b, c)
		fx.checkOutside(t, strings.Join([]string{a, b, c}, "|"))
		fx.reset(t)
	})
}

func TestDataDirCheck(t *testing.T) {
	data := t.TempDir()
	write := func(id string) {
		w, err := Create(filepath.Join(data, "t", "p", id), WriterOptions{Table: "t", Projection: "p", ID: id, Schema: allTypesSchema()})
		if err != nil {
			t.Fatal(err)
		}
		rec := randomRecord(memory.NewGoAllocator(), allTypesSchema(), newTestRand(), 1000)
		defer rec.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write("c1")
	write("c2")
	write("c3")
	dd, err := OpenDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	m, err := dd.Check("t", "p", "c1")
	if err != nil || m.Rows != 1000 || m.CompressedBytes() <= 0 {
		t.Fatalf("Check(c1) = %+v, %v", m, err)
	}
	if _, err := dd.Check("t", "p", "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing container: %v", err)
	}
	// A container copied under another name names its own ID.
	if err := os.Rename(filepath.Join(data, "t", "p", "c2"), filepath.Join(data, "t", "p", "x2")); err != nil {
		t.Fatal(err)
	}
	if _, err := dd.Check("t", "p", "x2"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("renamed container: %v", err)
	}
	col := filepath.Join(data, "t", "p", "c3", ColumnFileName(0))
	b, err := os.ReadFile(col)
	if err != nil {
		t.Fatal(err)
	}
	b[8] ^= 0xff // inside the header
	os.WriteFile(col, b, 0o644)
	if _, err := dd.Check("t", "p", "c3"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged header: %v", err)
	}
	os.WriteFile(col, b[:len(b)-1], 0o644)
	if _, err := dd.Check("t", "p", "c3"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated file: %v", err)
	}
}

// TestRemoveContainerFinishesAnInterruptedRemoval: a process killed
// between RemoveContainer's rename and the removal that follows leaves
// the container under its ".<id>.rm-" name. Removing the container again
// (as the scheduler does for a dead container still in its catalog after
// a restart) finishes that removal, and leaves other containers' alone.
func TestRemoveContainerFinishesAnInterruptedRemoval(t *testing.T) {
	data := t.TempDir()
	dd, err := OpenDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	proj := filepath.Join(data, "t", "p")
	for _, d := range []string{".c0005.rm-dndg6msppj2u-n/sub", ".c00050.rm-x", ".c0006.rm-y", "c0007"} {
		if err := os.MkdirAll(filepath.Join(proj, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proj, d, "col-0000.arrow"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := dd.RemoveContainer("t", "p", "c0005"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(proj)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{".c00050.rm-x", ".c0006.rm-y", "c0007"}; !slices.Equal(left, want) {
		t.Fatalf("after removing c0005 the projection holds %q, want %q", left, want)
	}
}
