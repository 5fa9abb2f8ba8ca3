package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/scheduler"
)

// TestBucketStorage: the scheduler's Storage over an S3 bucket checks
// containers there, lists a projection's containers (committed or not) as
// directories with their newest modification time, and deletes them.
func TestBucketStorage(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st, err := store.Open(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 3, Containers: 2, RowsPerContainer: 100})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local, "t", "p", ms[0].ID), "t", "p", ms[0].ID); err != nil {
		t.Fatal(err)
	}
	// Uploads cut short: a column file of an attempt, no manifest, no
	// commit; one of a container of its own, one beside a committed one.
	m1 := ms[1]
	const attempt = "a00000000000000aa"
	for _, id := range []string{m1.ID, ms[0].ID} {
		if err := st.Put(t.Context(), store.ContainerPrefix("t", "p", id)+attempt+"/"+m1.Files[0].Name, columnar.ContainerDir(local, "t", "p", m1.ID)+"/"+m1.Files[0].Name, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var s scheduler.Storage = bucketStorage{st}
	if removed, err := s.RemoveUncommitted("t", "p", ms[0].ID, before); err != nil || len(removed) != 0 {
		t.Errorf("remove uncommitted within the grace period: %v, %v", removed, err)
	}
	if removed, err := s.RemoveUncommitted("t", "p", ms[0].ID, time.Now().Add(time.Second)); err != nil || len(removed) != 1 || removed[0] != attempt {
		t.Errorf("remove uncommitted past the grace period: %v, %v; want [%s]", removed, err, attempt)
	}
	if removed, err := (dataStorage{}).RemoveUncommitted("t", "p", ms[0].ID, time.Now()); err != nil || len(removed) != 0 {
		t.Errorf("a data directory removed %v, %v", removed, err)
	}
	info, err := s.CheckContainer("t", "p", ms[0].ID)
	if err != nil || info.Rows != ms[0].Rows || info.Bytes != ms[0].CompressedBytes() {
		t.Errorf("check = %d rows, %d bytes, %v", info.Rows, info.Bytes, err)
	}
	if _, err := s.CheckContainer("t", "p", m1.ID); !errors.Is(err, scheduler.ErrBadOutput) {
		t.Errorf("check of an unfinished upload: %v, want ErrBadOutput", err)
	}
	ents, err := s.ReadDir("t", "p")
	if err != nil || len(ents) != 2 {
		t.Fatalf("read dir = %v, %v", ents, err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !e.IsDir() || info.ModTime().Before(before) {
			t.Errorf("entry %s: dir %v, modified %v, %v", e.Name(), e.IsDir(), info.ModTime(), err)
		}
	}
	if err := s.RemoveAll("t", "p", m1.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveContainer("t", "p", ms[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveEmpty("t", "p"); err != nil {
		t.Fatal(err)
	}
	if ents, err := s.ReadDir("t", "p"); err != nil || len(ents) != 0 {
		t.Errorf("after removing both: %v, %v", ents, err)
	}
	if _, err := s.CheckContainer("t", "p", ms[0].ID); !errors.Is(err, scheduler.ErrBadOutput) {
		t.Errorf("check of a removed container: %v, want ErrBadOutput", err)
	}
}

// TestCheckContainerConcurrent: both Storages check containers from
// several goroutines at once, as Register does, each check getting its
// own container's rows and a corrupt one still failing.
func TestCheckContainerConcurrent(t *testing.T) {
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 20, Containers: 6, RowsPerContainer: 100, BlockRows: 50, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The last one with a column file cut short: on disk, and in the
	// bucket a pack that ends inside it (Upload checks what it streams, so
	// the pack is cut after the upload).
	bad := ms[len(ms)-1]
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	for _, m := range ms {
		if _, err := store.Upload(t.Context(), st, columnar.ContainerDir(local, "t", "p", m.ID), "t", "p", m.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(filepath.Join(columnar.ContainerDir(local, "t", "p", bad.ID), bad.Files[3].Name), bad.Files[3].Size-1); err != nil {
		t.Fatal(err)
	}
	c, err := store.Resolve(t.Context(), st, "t", "p", bad.ID)
	if err != nil {
		t.Fatal(err)
	}
	pack, err := store.ReadAll(t.Context(), st, c.Pack)
	if err != nil {
		t.Fatal(err)
	}
	_, off := c.File(3)
	cut := filepath.Join(t.TempDir(), "pack")
	if err := os.WriteFile(cut, pack[:off+bad.Files[3].Size-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), c.Pack, cut, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := columnar.OpenDataDir(local)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	for name, s := range map[string]scheduler.Storage{"data": dataStorage{data}, "bucket": bucketStorage{st}} {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 8*len(ms))
			for g := range 8 {
				wg.Go(func() {
					for i := range ms {
						m := ms[(g+i)%len(ms)]
						info, err := s.CheckContainer("t", "p", m.ID)
						rows, bytes := info.Rows, info.Bytes
						switch {
						case m.ID == bad.ID && !errors.Is(err, scheduler.ErrBadOutput):
							errs <- fmt.Errorf("check of %s, cut short: %v, want ErrBadOutput", m.ID, err)
						case m.ID == bad.ID && !strings.Contains(err.Error(), bad.Files[3].Name):
							errs <- fmt.Errorf("check of %s: %v does not name %s", m.ID, err, bad.Files[3].Name)
						case m.ID != bad.ID && (err != nil || rows != m.Rows || bytes != m.CompressedBytes()):
							errs <- fmt.Errorf("check of %s = %d rows, %d bytes, %v; want %d, %d", m.ID, rows, bytes, err, m.Rows, m.CompressedBytes())
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
