package store_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
)

// hookStore calls beforePut before each Put.
type hookStore struct {
	store.Store
	beforePut func(key string)
}

func (h hookStore) Put(ctx context.Context, key, path string, opts store.PutOptions) error {
	h.beforePut(key)
	return h.Store.Put(ctx, key, path, opts)
}

func (h hookStore) PutReader(ctx context.Context, key string, r io.Reader, opts store.PutOptions) error {
	h.beforePut(key)
	return h.Store.PutReader(ctx, key, r, opts)
}

// generateOne writes container t/p/c0000 under a directory of its own.
func generateOne(t *testing.T, seed int64, blockRows int) (string, *columnar.Manifest) {
	t.Helper()
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 3, Containers: 1, RowsPerContainer: 2000, BlockRows: blockRows, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return columnar.ContainerDir(local, "t", "p", ms[0].ID), ms[0]
}

// TestRacingUploads: two uploads of one container ID with different bytes
// (different data and block layouts), the loser passing its first check
// before the winner commits and writing all its files after: the winner's
// container stays whole and readable, and the loser gets the winner's
// manifest with ErrExists and leaves nothing behind.
func TestRacingUploads(t *testing.T) {
	winDir, win := generateOne(t, 1, 1000)
	loseDir, lose := generateOne(t, 2, 300)
	if win.ID != lose.ID || win.Files[0].CRC == lose.Files[0].CRC {
		t.Fatalf("want one ID with different bytes: %s %08x, %s %08x", win.ID, win.Files[0].CRC, lose.ID, lose.Files[0].CRC)
	}
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			waiting, winnerDone := make(chan struct{}), make(chan struct{})
			first := true
			loser := hookStore{st, func(string) {
				if first {
					first = false
					close(waiting)
					<-winnerDone
				}
			}}
			type result struct {
				m   *columnar.Manifest
				err error
			}
			lost := make(chan result, 1)
			go func() {
				m, err := store.Upload(ctx, loser, loseDir, "t", "p", lose.ID)
				lost <- result{m, err}
			}()
			<-waiting // the loser has found no container and is about to put its files
			if _, err := store.Upload(ctx, st, winDir, "t", "p", win.ID); err != nil {
				t.Fatalf("winner: %v", err)
			}
			close(winnerDone)
			r := <-lost
			if !errors.Is(r.err, columnar.ErrExists) || r.m == nil || r.m.Files[0].CRC != win.Files[0].CRC {
				t.Fatalf("loser: %v (manifest %v), want ErrExists with the winner's manifest", r.err, r.m != nil)
			}
			m, prefix, err := store.Committed(ctx, st, "t", "p", win.ID)
			if err != nil || m.Files[0].CRC != win.Files[0].CRC {
				t.Fatalf("committed: %v", err)
			}
			if _, err := store.Check(ctx, st, "t", "p", win.ID); err != nil {
				t.Errorf("check: %v", err)
			}
			dst := filepath.Join(t.TempDir(), win.ID)
			got, _, err := store.Fetch(ctx, st, "t", "p", win.ID, dst)
			if err != nil {
				t.Fatal(err)
			}
			if err := columnar.Verify(dst); err != nil {
				t.Errorf("verify the fetched winner: %v", err)
			}
			for i := range got.Files {
				if got.Files[i].CRC != win.Files[i].CRC {
					t.Errorf("file %s is not the winner's", got.Files[i].Name)
				}
			}
			// Only the winner's attempt and the commit remain.
			objs, err := st.List(ctx, store.ContainerPrefix("t", "p", win.ID))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if !strings.HasPrefix(o.Key, prefix) && o.Key != store.ContainerPrefix("t", "p", win.ID)+store.CommitName {
					t.Errorf("left behind: %s", o.Key)
				}
			}
		})
	}
}

// TestRemoveUncommitted: an attempt no commit names is deleted once its
// newest object is older than the cutoff and not before; the committed
// attempt never is; a container with no commit loses all its old attempts.
func TestRemoveUncommitted(t *testing.T) {
	dir, m := generateOne(t, 1, 1000)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := store.Upload(ctx, st, dir, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			_, prefix, err := store.Committed(ctx, st, "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			// What a worker killed mid-upload leaves: column files of an
			// attempt, no manifest, no commit of its own.
			const stale = "a0123456789abcdef"
			for _, fm := range m.Files[:2] {
				if err := st.Put(ctx, store.ContainerPrefix("t", "p", m.ID)+stale+"/"+fm.Name, filepath.Join(dir, fm.Name), store.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := store.RemoveUncommitted(ctx, st, "t", "p", m.ID, time.Now().Add(-time.Hour))
			if err != nil || len(removed) != 0 {
				t.Errorf("within the grace period: removed %v, %v", removed, err)
			}
			if objs, _ := st.List(ctx, store.ContainerPrefix("t", "p", m.ID)+stale+"/"); len(objs) != 2 {
				t.Errorf("the young attempt holds %d objects, want 2", len(objs))
			}
			removed, err = store.RemoveUncommitted(ctx, st, "t", "p", m.ID, time.Now().Add(time.Second))
			if err != nil || !slices.Equal(removed, []string{stale}) {
				t.Errorf("past the grace period: removed %v, %v; want [%s]", removed, err, stale)
			}
			if objs, _ := st.List(ctx, store.ContainerPrefix("t", "p", m.ID)+stale+"/"); len(objs) != 0 {
				t.Errorf("the stale attempt still holds %d objects", len(objs))
			}
			if _, err := store.Check(ctx, st, "t", "p", m.ID); err != nil {
				t.Errorf("the committed container after the sweep: %v", err)
			}
			if objs, _ := st.List(ctx, prefix); len(objs) != 1 || objs[0].Key != prefix+store.PackName {
				t.Errorf("the committed attempt holds %v, want its pack alone", objs)
			}
			// A container with no commit: every old attempt goes.
			if err := st.Put(ctx, store.ContainerPrefix("t", "p", "c0001")+stale+"/"+m.Files[0].Name, filepath.Join(dir, m.Files[0].Name), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			removed, err = store.RemoveUncommitted(ctx, st, "t", "p", "c0001", time.Now().Add(time.Second))
			if err != nil || !slices.Equal(removed, []string{stale}) {
				t.Errorf("uncommitted container: removed %v, %v", removed, err)
			}
		})
	}
}

// TestCommitNamesMissingAttempt: a commit whose attempt is gone, or that
// holds no attempt name, is a corrupt container, named in the error.
func TestCommitNamesMissingAttempt(t *testing.T) {
	dir, m := generateOne(t, 1, 1000)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := store.Upload(ctx, st, dir, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			_, prefix, err := store.Committed(ctx, st, "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			attempt := strings.TrimSuffix(strings.TrimPrefix(prefix, store.ContainerPrefix("t", "p", m.ID)), "/")
			if err := st.DeletePrefix(ctx, prefix); err != nil {
				t.Fatal(err)
			}
			var ce *columnar.CorruptError
			// The commit holds the pack's head, so readers find the
			// container; its reads, and Check, find the pack gone.
			if _, _, err := store.Committed(ctx, st, "t", "p", m.ID); err != nil {
				t.Errorf("committed through the commit's head: %v", err)
			}
			if _, err := store.Check(ctx, st, "t", "p", m.ID); !errors.As(err, &ce) || ce.File != store.PackName || ce.Reason != "missing" {
				t.Errorf("check: %v, want a CorruptError of %s: missing", err, store.PackName)
			}
			// A commit of the attempt's name alone (uploads before heads
			// were in commits) resolves through the pack, which is gone.
			putBytes(t, st, store.ContainerPrefix("t", "p", m.ID)+store.CommitName, []byte(attempt+"\n"))
			_, _, err = store.Committed(ctx, st, "t", "p", m.ID)
			if !errors.As(err, &ce) || ce.File != store.CommitName || !strings.Contains(err.Error(), attempt) {
				t.Errorf("committed: %v, want a CorruptError of %s naming %s", err, store.CommitName, attempt)
			}
			if _, err := store.Check(ctx, st, "t", "p", m.ID); !errors.Is(err, columnar.ErrCorrupt) {
				t.Errorf("check: %v, want ErrCorrupt", err)
			}
			if _, _, err := store.Fetch(ctx, st, "t", "p", m.ID, filepath.Join(t.TempDir(), m.ID)); !errors.Is(err, columnar.ErrCorrupt) {
				t.Errorf("fetch: %v, want ErrCorrupt", err)
			}
			// A commit that names no attempt.
			if err := st.Put(ctx, store.ContainerPrefix("t", "p", "c0001")+store.CommitName, writeFile(t, "../c0000\n"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.Committed(ctx, st, "t", "p", "c0001"); !errors.As(err, &ce) || ce.File != store.CommitName {
				t.Errorf("a commit naming no attempt: %v, want a CorruptError", err)
			}
			// Removing the container removes its commit too.
			if err := store.Remove(ctx, st, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.Committed(ctx, st, "t", "p", m.ID); !errors.Is(err, columnar.ErrNotFound) {
				t.Errorf("after remove: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestFirstLayout: a container whose files and manifest are directly under
// <table>/<projection>/<id>/ (a data directory used as a file:// store,
// or an upload from before attempts) is read from there, and a new upload
// of its ID finds it committed.
func TestFirstLayout(t *testing.T) {
	dir, m := generateOne(t, 1, 1000)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			base := store.ContainerPrefix("t", "p", m.ID)
			for _, fm := range m.Files {
				if err := st.Put(ctx, base+fm.Name, filepath.Join(dir, fm.Name), store.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Put(ctx, base+columnar.ManifestName, filepath.Join(dir, columnar.ManifestName), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, prefix, err := store.Committed(ctx, st, "t", "p", m.ID); err != nil || prefix != base {
				t.Errorf("committed: prefix %q, %v; want %q", prefix, err, base)
			}
			if _, err := store.Check(ctx, st, "t", "p", m.ID); err != nil {
				t.Errorf("check: %v", err)
			}
			dst := filepath.Join(t.TempDir(), m.ID)
			if _, _, err := store.Fetch(ctx, st, "t", "p", m.ID, dst); err != nil {
				t.Fatal(err)
			}
			if err := columnar.Verify(dst); err != nil {
				t.Errorf("verify: %v", err)
			}
			if _, err := store.Upload(ctx, st, dir, "t", "p", m.ID); !errors.Is(err, columnar.ErrExists) {
				t.Errorf("upload over it: %v, want ErrExists", err)
			}
			if removed, err := store.RemoveUncommitted(ctx, st, "t", "p", m.ID, time.Now().Add(time.Second)); err != nil || len(removed) != 0 {
				t.Errorf("remove uncommitted: %v, %v; want nothing", removed, err)
			}
		})
	}
}
