package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
)

// rewritePack replaces the committed pack of t/p/id in st with what change
// makes of its bytes.
func rewritePack(t *testing.T, st store.Store, table, projection, id string, change func(c *store.Container, data []byte) []byte) {
	t.Helper()
	c, err := store.Resolve(t.Context(), st, table, projection, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pack == "" {
		t.Fatalf("%s/%s/%s is not a pack", table, projection, id)
	}
	data, err := store.ReadAll(t.Context(), st, c.Pack)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, st, c.Pack, change(c, data))
}

// TestPackLayout: an upload writes the container as one object, its pack,
// beside the commit; each column file is its range of the pack, byte for
// byte the local file, back to back in manifest order; a Source reads it
// as the disk's container reads.
func TestPackLayout(t *testing.T) {
	dir, m := generateOne(t, 1, 300)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := store.Upload(ctx, st, dir, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			c, err := store.Resolve(ctx, st, "t", "p", m.ID)
			if err != nil {
				t.Fatal(err)
			}
			base := store.ContainerPrefix("t", "p", m.ID)
			objs, err := st.List(ctx, base)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range objs {
				keys = append(keys, o.Key)
			}
			if want := []string{c.Prefix + store.PackName, base + store.CommitName}; !slices.Equal(keys, want) || c.Pack != want[0] {
				t.Fatalf("objects %v (pack %q), want %v", keys, c.Pack, want)
			}
			if objs[0].Size != c.PackSize {
				t.Errorf("pack is %d bytes, its head says %d", objs[0].Size, c.PackSize)
			}
			data, err := store.ReadAll(ctx, st, c.Pack)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("STRATACP")) {
				t.Errorf("pack begins %q", data[:8])
			}
			end := int64(-1)
			for i, fm := range m.Files {
				key, off := c.File(i)
				if key != c.Pack || (end >= 0 && off != end) {
					t.Errorf("file %s at %s offset %d, want %s offset %d", fm.Name, key, off, c.Pack, end)
				}
				if !bytes.Equal(data[off:off+fm.Size], readLocal(t, dir, fm.Name)) {
					t.Errorf("file %s in the pack differs from the local file", fm.Name)
				}
				end = off + fm.Size
			}
			if end != int64(len(data)) {
				t.Errorf("the last file ends at %d, the pack at %d", end, len(data))
			}
			// Ranges coalesce adjacent files, bounded by max, and keep
			// files apart that are not adjacent.
			if rs := c.Ranges([]int{2, 0, 1}, 0); len(rs) != 1 || rs[0].First != 0 || rs[0].Last != 2 || rs[0].Len != c.PackSize-mustOff(c, 0) {
				t.Errorf("ranges of every file: %+v", rs)
			}
			if rs := c.Ranges([]int{2, 0}, 0); len(rs) != 2 || rs[0].First != 2 || rs[1].First != 0 {
				t.Errorf("ranges of files 2 and 0: %+v, want two reads, file 2's first", rs)
			}
			if rs := c.Ranges([]int{0, 1, 2}, m.Files[0].Size+m.Files[1].Size); len(rs) != 2 || rs[0].Last != 1 {
				t.Errorf("ranges bounded by two files' bytes: %+v", rs)
			}
		})
	}
}

func mustOff(c *store.Container, i int) int64 { _, off := c.File(i); return off }

// TestPackDamage: a pack cut short, or with a byte flipped, in its head or
// in a column file, is a corrupt container for every reader that reads
// those bytes (Resolve, for a head a commit does not hold; Check, Fetch,
// a Source's reads), each error naming the container and, for a column
// file's bytes, the file and the block.
func TestPackDamage(t *testing.T) {
	dir, m := generateOne(t, 1, 300)
	fm := m.Files[1]
	blk := fm.Blocks[3]
	type damage struct {
		name   string
		change func(c *store.Container, data []byte) []byte
		// resolve: Resolve fails (the head is damaged); else the file and
		// block the readers name.
		resolve bool
		block   int
		reason  string
	}
	cases := []damage{
		{"head cut", func(c *store.Container, data []byte) []byte { return data[:100] }, true, 0, "cut short"},
		{"head flipped", func(c *store.Container, data []byte) []byte { data[40] ^= 0x10; return data }, true, 0, "head checksum"},
		{"not a pack", func(c *store.Container, data []byte) []byte { data[0] = 'X'; return data }, true, 0, "not a pack"},
		{"block cut", func(c *store.Container, data []byte) []byte {
			_, off := c.File(1)
			return data[:off+blk.Offset+blk.Length/2]
		}, false, 3, "shorter"},
		{"block flipped", func(c *store.Container, data []byte) []byte {
			_, off := c.File(1)
			data[off+blk.Offset+blk.Length/2] ^= 0x01
			return data
		}, false, 3, "checksum"},
	}
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for i, d := range cases {
				id := columnar.ContainerID(i)
				uploadAs(t, st, dir, m.ID, id)
				rewritePack(t, st, "t", "p", id, d.change)
				where := "t/p/" + id
				var ce *columnar.CorruptError
				c, err := store.Resolve(ctx, st, "t", "p", id)
				if d.resolve {
					// Readers take the head the commit holds; Check finds
					// the pack's own damaged.
					if err != nil {
						t.Errorf("%s: resolve through the commit's head: %v", d.name, err)
					}
					if _, err := store.Check(ctx, st, "t", "p", id); !errors.Is(err, columnar.ErrCorrupt) {
						t.Errorf("%s: check: %v, want ErrCorrupt", d.name, err)
					}
					// Under a commit of the attempt's name alone (uploads
					// before heads were in commits), readers read the
					// pack's head.
					putBytes(t, st, store.ContainerPrefix("t", "p", id)+store.CommitName, []byte(strings.TrimPrefix(strings.TrimSuffix(c.Prefix, "/"), store.ContainerPrefix("t", "p", id))+"\n"))
					_, err := store.Resolve(ctx, st, "t", "p", id)
					if !errors.As(err, &ce) || !strings.Contains(ce.Container, where) || ce.File != store.PackName || !strings.Contains(ce.Reason, d.reason) {
						t.Errorf("%s: resolve: %v; want a CorruptError of %s %s (%s)", d.name, err, where, store.PackName, d.reason)
					}
					if _, err := store.Check(ctx, st, "t", "p", id); !errors.Is(err, columnar.ErrCorrupt) {
						t.Errorf("%s: check: %v, want ErrCorrupt", d.name, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: resolve: %v", d.name, err)
				}
				_, err = store.Check(ctx, st, "t", "p", id)
				if !errors.As(err, &ce) || !strings.Contains(ce.Container, where) || ce.File != fm.Name {
					t.Errorf("%s: check: %v; want a CorruptError of %s %s", d.name, err, where, fm.Name)
				}
				_, _, err = store.Fetch(ctx, st, "t", "p", id, filepath.Join(t.TempDir(), id))
				if !errors.As(err, &ce) || !strings.Contains(ce.Container, where) || ce.File != fm.Name || ce.Block != d.block {
					t.Errorf("%s: fetch: %v; want a CorruptError of %s %s block %d", d.name, err, where, fm.Name, d.block)
				}
				src, _, err := store.OpenSource(ctx, st, "t", "p", id)
				if err != nil {
					t.Fatal(err)
				}
				ct, err := columnar.OpenSource(src, columnar.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				r, err := ct.OpenColumn(1)
				if err != nil {
					t.Fatal(err)
				}
				_, err = r.ReadBlock(d.block)
				r.Close()
				if !errors.As(err, &ce) || !strings.Contains(ce.Container, where) || ce.File != fm.Name || ce.Block != d.block || !strings.Contains(err.Error(), d.reason) {
					t.Errorf("%s: read block %d: %v; want a CorruptError of %s %s block %d (%s)", d.name, d.block, err, where, fm.Name, d.block, d.reason)
				}
			}
		})
	}
}

// uploadAs uploads the container in dir (ID from) to st as t/p/id.
func uploadAs(t *testing.T, st store.Store, dir, from, id string) {
	t.Helper()
	cdir := filepath.Join(t.TempDir(), id)
	copyRenamed(t, dir, cdir, from, id)
	if _, err := store.Upload(t.Context(), st, cdir, "t", "p", id); err != nil {
		t.Fatal(err)
	}
}

// copyRenamed copies the container in src (ID from) to dst as ID to.
func copyRenamed(t *testing.T, src, dst, from, to string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data := readLocal(t, src, e.Name())
		if e.Name() == columnar.ManifestName {
			data = []byte(strings.Replace(string(data), `"`+from+`"`, `"`+to+`"`, 1))
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUploadRefusesDamagedLocalFile: a local column file that is not what
// its manifest says (a byte changed, cut short) fails the upload as it is
// streamed into the pack: nothing is committed, no attempt is left.
func TestUploadRefusesDamagedLocalFile(t *testing.T) {
	dir, m := generateOne(t, 1, 300)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for i, change := range []func([]byte) []byte{
				func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
				func(b []byte) []byte { return b[:len(b)-3] },
				func(b []byte) []byte { return append(b, 0) },
			} {
				id := columnar.ContainerID(i)
				cdir := filepath.Join(t.TempDir(), id)
				copyRenamed(t, dir, cdir, m.ID, id)
				path := filepath.Join(cdir, m.Files[2].Name)
				if err := os.WriteFile(path, change(readLocal(t, cdir, m.Files[2].Name)), 0o644); err != nil {
					t.Fatal(err)
				}
				_, err := store.Upload(ctx, st, cdir, "t", "p", id)
				var ce *columnar.CorruptError
				if !errors.As(err, &ce) || ce.File != m.Files[2].Name {
					t.Errorf("change %d: upload: %v; want a CorruptError naming %s", i, err, m.Files[2].Name)
				}
				if objs, _ := st.List(ctx, store.ContainerPrefix("t", "p", id)); len(objs) != 0 {
					t.Errorf("change %d: a failed upload left %v", i, objs)
				}
			}
		})
	}
}

// TestOldLayoutBucket: a bucket written before packs (each attempt an
// object per column file and a manifest; and the first layout, files
// directly under the container's prefix with no commit) is still read,
// checked, fetched, listed, swept and dropped, beside a pack.
func TestOldLayoutBucket(t *testing.T) {
	dir, m := generateOne(t, 1, 300)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			// c0000: an attempt of an object per file, committed, and a
			// stale attempt beside it. c0001: the first layout. c0002: a
			// pack.
			putAttempt(t, st, dir, m, "c0000", "a0123456789abcdef", true, nil)
			putAttempt(t, st, dir, m, "c0000", "a00000000000000ee", false, nil)
			first := store.ContainerPrefix("t", "p", "c0001")
			for _, name := range append(fileNames(m), columnar.ManifestName) {
				data := readLocal(t, dir, name)
				if name == columnar.ManifestName {
					data = []byte(strings.Replace(string(data), `"`+m.ID+`"`, `"c0001"`, 1))
				}
				putBytes(t, st, first+name, data)
			}
			pdir := filepath.Join(t.TempDir(), "c0002")
			copyRenamed(t, dir, pdir, m.ID, "c0002")
			if _, err := store.Upload(ctx, st, pdir, "t", "p", "c0002"); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"c0000", "c0001", "c0002"} {
				c, err := store.Resolve(ctx, st, "t", "p", id)
				if err != nil {
					t.Fatalf("%s: resolve: %v", id, err)
				}
				if wantPack := id == "c0002"; (c.Pack != "") != wantPack {
					t.Errorf("%s: pack %q", id, c.Pack)
				}
				if _, err := store.Check(ctx, st, "t", "p", id); err != nil {
					t.Errorf("%s: check: %v", id, err)
				}
				dst := filepath.Join(t.TempDir(), id)
				if _, _, err := store.Fetch(ctx, st, "t", "p", id, dst); err != nil {
					t.Fatalf("%s: fetch: %v", id, err)
				}
				if err := columnar.Verify(dst); err != nil {
					t.Errorf("%s: verify the fetched copy: %v", id, err)
				}
				for i, fm := range m.Files {
					if got := readLocal(t, dst, fm.Name); !bytes.Equal(got, readLocal(t, dir, fm.Name)) {
						t.Errorf("%s: file %d differs", id, i)
					}
				}
				src, _, err := store.OpenSource(ctx, st, "t", "p", id)
				if err != nil {
					t.Fatal(err)
				}
				f, err := src.OpenFile(m.Files[1].Name, m.Files[1].Size)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, m.Files[1].Size)
				if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, readLocal(t, dir, m.Files[1].Name)) {
					t.Errorf("%s: read file 1 through the source: %v", id, err)
				}
				again := filepath.Join(t.TempDir(), id)
				copyRenamed(t, dir, again, m.ID, id)
				if _, err := store.Upload(ctx, st, again, "t", "p", id); !errors.Is(err, columnar.ErrExists) {
					t.Errorf("%s: upload over it: %v, want ErrExists", id, err)
				}
			}
			// Listed: one entry a container, whatever its layout.
			objs, err := st.List(ctx, "t/p/")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range store.Prefixes(objs, "t/p/") {
				names = append(names, e.Name)
			}
			if !slices.Equal(names, []string{"c0000", "c0001", "c0002"}) {
				t.Errorf("containers listed: %v", names)
			}
			// Swept: the stale attempt goes, the committed one stays.
			removed, err := store.RemoveUncommitted(ctx, st, "t", "p", "c0000", time.Now().Add(time.Second))
			if err != nil || !slices.Equal(removed, []string{"a00000000000000ee"}) {
				t.Errorf("sweep: removed %v, %v", removed, err)
			}
			if _, err := store.Check(ctx, st, "t", "p", "c0000"); err != nil {
				t.Errorf("after the sweep: %v", err)
			}
			// Dropped.
			for _, id := range []string{"c0000", "c0001", "c0002"} {
				if err := store.Remove(ctx, st, "t", "p", id); err != nil {
					t.Fatal(err)
				}
				if _, err := store.Resolve(ctx, st, "t", "p", id); !errors.Is(err, columnar.ErrNotFound) {
					t.Errorf("%s after remove: %v, want ErrNotFound", id, err)
				}
			}
			if objs, _ := st.List(ctx, "t/"); len(objs) != 0 {
				t.Errorf("left after removing every container: %v", objs)
			}
		})
	}
}

// TestResolveIsOneRequest: a reader finds a committed pack with one
// request, the commit, which holds the pack's head, whatever the width
// of the container (a head past the 64KiB a pack's first read takes
// included); a commit written before heads were in it (the attempt's
// name alone) costs the reads of the pack's head too, and resolves to the
// same container.
func TestResolveIsOneRequest(t *testing.T) {
	for _, columns := range []int{3, 400} {
		dir, m := generateWide(t, columns)
		for name, st := range stores(t) {
			t.Run(fmt.Sprintf("%d columns/%s", columns, name), func(t *testing.T) {
				ctx := t.Context()
				if _, err := store.Upload(ctx, st, dir, "t", "p", m.ID); err != nil {
					t.Fatal(err)
				}
				cs := &countingStore{Store: st}
				c, err := store.Resolve(ctx, cs, "t", "p", m.ID)
				if err != nil {
					t.Fatal(err)
				}
				if n := cs.requests(); n != 1 {
					t.Errorf("resolve made %d requests, want 1 (the commit)", n)
				}
				if c.Pack == "" || len(c.Manifest.Files) != len(m.Files) {
					t.Fatalf("resolved %q with %d files", c.Pack, len(c.Manifest.Files))
				}
				// The same container under a commit of the attempt's name
				// alone, as uploads wrote it before.
				attempt := strings.TrimSuffix(strings.TrimPrefix(c.Prefix, store.ContainerPrefix("t", "p", m.ID)), "/")
				putBytes(t, st, store.ContainerPrefix("t", "p", m.ID)+store.CommitName, []byte(attempt+"\n"))
				cs = &countingStore{Store: st}
				old, err := store.Resolve(ctx, cs, "t", "p", m.ID)
				if err != nil {
					t.Fatal(err)
				}
				if old.Pack != c.Pack || old.PackSize != c.PackSize || !bytes.Equal(old.ManifestBytes(), c.ManifestBytes()) {
					t.Errorf("an attempt-only commit resolves to pack %q of %d bytes, want %q of %d with the same manifest", old.Pack, old.PackSize, c.Pack, c.PackSize)
				}
				for i := range m.Files {
					if mustOff(old, i) != mustOff(c, i) {
						t.Fatalf("file %d at %d under an attempt-only commit, %d under one with the head", i, mustOff(old, i), mustOff(c, i))
					}
				}
				if n := cs.requests(); n < 2 {
					t.Errorf("an attempt-only commit resolved with %d requests: the pack's head was not read", n)
				}
				if _, err := store.Check(ctx, st, "t", "p", m.ID); err != nil {
					t.Errorf("check under an attempt-only commit: %v", err)
				}
			})
		}
	}
}

// TestCommitHeadDamage: a commit whose pack head is cut short, has a byte
// flipped or has bytes after it is a corrupt container, the error naming
// the container and the commit.
func TestCommitHeadDamage(t *testing.T) {
	dir, m := generateOne(t, 1, 300)
	cases := []struct {
		name   string
		change func(head []byte) []byte
		reason string
	}{
		{"cut", func(h []byte) []byte { return h[:len(h)-3] }, "cut short"},
		{"flipped", func(h []byte) []byte { h[len(h)/2] ^= 0x04; return h }, "head checksum"},
		{"trailing bytes", func(h []byte) []byte { return append(h, 0) }, "after the pack's head"},
		{"not a head", func(h []byte) []byte { return []byte("garbage") }, "not even a head"},
	}
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for i, d := range cases {
				id := columnar.ContainerID(i)
				uploadAs(t, st, dir, m.ID, id)
				key := store.ContainerPrefix("t", "p", id) + store.CommitName
				data, err := store.ReadAll(ctx, st, key)
				if err != nil {
					t.Fatal(err)
				}
				nl := bytes.IndexByte(data, '\n')
				if nl < 0 || nl == len(data)-1 {
					t.Fatalf("commit %q holds no head", data)
				}
				head := append([]byte(nil), data[nl+1:]...)
				putBytes(t, st, key, append(data[:nl+1:nl+1], d.change(head)...))
				var ce *columnar.CorruptError
				_, err = store.Resolve(ctx, st, "t", "p", id)
				if !errors.As(err, &ce) || !strings.Contains(ce.Container, "t/p/"+id) || ce.File != store.CommitName || !strings.Contains(ce.Reason, d.reason) {
					t.Errorf("%s: resolve: %v; want a CorruptError of t/p/%s %s (%s)", d.name, err, id, store.CommitName, d.reason)
				}
			}
		})
	}
}
