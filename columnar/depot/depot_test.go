package depot_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// bucket returns an S3 store holding n generated containers of t.p and
// their manifests.
func bucket(t *testing.T, n int) (store.Store, []*columnar.Manifest) {
	t.Helper()
	srv := s3test.Start(t, "strata")
	st, err := store.Open(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 3, Containers: n, RowsPerContainer: 2000, BlockRows: 500, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local, "t", "p", m.ID), "t", "p", m.ID); err != nil {
			t.Fatal(err)
		}
	}
	return st, ms
}

func TestAcquireFetchesOnceThenHits(t *testing.T) {
	st, ms := bucket(t, 1)
	d, err := depot.Open(t.TempDir(), st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id := ms[0].ID
	const n = 8
	var wg sync.WaitGroup
	dirs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			dir, release, err := d.Acquire(t.Context(), "t", "p", id)
			dirs[i], errs[i] = dir, err
			if err == nil {
				defer release()
				if _, err := columnar.ReadManifest(dir); err != nil {
					errs[i] = err
				}
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("acquire %d: %v", i, errs[i])
		}
	}
	s := d.Stats()
	if s.Misses != 1 || s.Hits != n-1 {
		t.Errorf("stats %+v: want 1 miss, %d hits", s, n-1)
	}
	if s.BytesFetched < ms[0].CompressedBytes() || s.BytesFetched > ms[0].CompressedBytes()+8192 {
		t.Errorf("fetched %d bytes for a container of %d", s.BytesFetched, ms[0].CompressedBytes())
	}
	if err := columnar.Verify(dirs[0]); err != nil {
		t.Errorf("verify: %v", err)
	}
	// Again: a hit, nothing fetched.
	_, release, err := d.Acquire(t.Context(), "t", "p", id)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if s2 := d.Stats(); s2.Misses != 1 || s2.BytesFetched != s.BytesFetched {
		t.Errorf("second acquire fetched: %+v", s2)
	}
}

func TestLRUAndSizeBound(t *testing.T) {
	st, ms := bucket(t, 4)
	size := ms[0].CompressedBytes() + 4096
	for _, m := range ms {
		size = max(size, m.CompressedBytes()+4096)
	}
	dir := t.TempDir()
	d, err := depot.Open(dir, st, depot.Options{Limit: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	use := func(id string) {
		t.Helper()
		_, release, err := d.Acquire(t.Context(), "t", "p", id)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	held := func(id string) bool {
		_, err := os.Stat(filepath.Join(dir, "t", "p", id, columnar.ManifestName))
		return err == nil
	}
	a, b, c, e := ms[0].ID, ms[1].ID, ms[2].ID, ms[3].ID
	use(a)
	use(b)
	use(a) // b is now the least recently used
	use(c)
	if !held(a) || held(b) || !held(c) {
		t.Errorf("after a b a c with room for two: a %v b %v c %v; want a and c", held(a), held(b), held(c))
	}
	s := d.Stats()
	if s.Evictions != 1 || s.Bytes > 2*size || s.Containers != 2 {
		t.Errorf("stats %+v", s)
	}
	// A container being read is not evicted, even over the limit.
	dirA, relA, err := d.Acquire(t.Context(), "t", "p", a)
	if err != nil {
		t.Fatal(err)
	}
	_, relB, err := d.Acquire(t.Context(), "t", "p", b)
	if err != nil {
		t.Fatal(err)
	}
	_, relE, err := d.Acquire(t.Context(), "t", "p", e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := columnar.ReadManifest(dirA); err != nil {
		t.Errorf("a pinned container was evicted: %v", err)
	}
	relA()
	relB()
	relE()
	if s := d.Stats(); s.Bytes > 2*size {
		t.Errorf("after release the depot holds %d bytes, limit %d", s.Bytes, 2*size)
	}
	d.Close()

	// Reopened, the depot takes in what it holds.
	d2, err := depot.Open(dir, st, depot.Options{Limit: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if s := d2.Stats(); s.Containers != 2 {
		t.Errorf("reopened depot holds %d containers, want 2", s.Containers)
	}
	_, rel, err := d2.Acquire(t.Context(), "t", "p", e)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if s := d2.Stats(); s.Misses != 0 || s.Hits != 1 {
		t.Errorf("reopened depot: %+v, want a hit", s)
	}
}

func TestAcquireMissing(t *testing.T) {
	st, _ := bucket(t, 1)
	d, err := depot.Open(t.TempDir(), st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, _, err := d.Acquire(t.Context(), "t", "p", "nope"); !errors.Is(err, columnar.ErrNotFound) {
		t.Errorf("missing: %v, want ErrNotFound", err)
	}
	if _, _, err := d.Acquire(t.Context(), "t", "..", "x"); !errors.Is(err, columnar.ErrOutsideRoot) {
		t.Errorf("outside: %v, want ErrOutsideRoot", err)
	}
}

func TestPublishWriteThrough(t *testing.T) {
	st, _ := bucket(t, 0)
	d, err := depot.Open(t.TempDir(), st, depot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.OutputDir("t", "p", "out")
	if err != nil {
		t.Fatal(err)
	}
	gen := t.TempDir()
	ms, err := columnar.Generate(gen, columnar.GenOptions{Table: "t", Projection: "p", Containers: 1, RowsPerContainer: 100, FirstID: 9})
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite under the ID "out": copy the generated container and fix the manifest's ID.
	copyContainer(t, columnar.ContainerDir(gen, "t", "p", ms[0].ID), out, "out")
	if _, err := d.Publish(t.Context(), "t", "p", "out"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Check(t.Context(), st, "t", "p", "out"); err != nil {
		t.Errorf("published container: %v", err)
	}
	_, rel, err := d.Acquire(t.Context(), "t", "p", "out")
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if s := d.Stats(); s.Misses != 0 || s.Hits != 1 || s.BytesFetched != 0 {
		t.Errorf("a published output read back fetched: %+v", s)
	}
	if _, err := d.Publish(t.Context(), "t", "p", "out"); !errors.Is(err, columnar.ErrExists) {
		t.Errorf("publish twice: %v, want ErrExists", err)
	}
}

func copyContainer(t *testing.T, src, dst, id string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == columnar.ManifestName {
			m, err := columnar.DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			m.ID = id
			if b, err = m.Encode(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
