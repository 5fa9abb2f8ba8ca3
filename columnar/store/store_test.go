package store_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// stores returns a file store and two S3 stores (real S3 servers over
// HTTP), one at a bucket's root and one under a prefix, each empty: a
// server each, so one store's objects are never in the other's listing.
func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	root, prefixed := s3test.Start(t, "strata"), s3test.Start(t, "strata")
	out := map[string]store.Store{}
	for name, u := range map[string]string{
		"file":      "file://" + t.TempDir(),
		"s3":        root.URL,
		"s3-prefix": strings.Replace(prefixed.URL, "s3://strata?", "s3://strata/deploy/a?", 1),
	} {
		st, err := store.Open(t.Context(), u)
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		t.Cleanup(func() { st.Close() })
		out[name] = st
	}
	return out
}

func writeFile(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, st store.Store, key string, off, n int64) (string, error) {
	t.Helper()
	r, err := st.NewRangeReader(t.Context(), key, off, n)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

func TestStore(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			src := writeFile(t, "0123456789")
			for _, k := range []string{"t/p/c1/a", "t/p/c1/b", "t/p/c10/a", "t/q/c2/a", "u/x"} {
				if err := st.Put(ctx, k, src, store.PutOptions{}); err != nil {
					t.Fatalf("put %s: %v", k, err)
				}
			}
			// Ranged reads.
			for _, c := range []struct {
				off, n int64
				want   string
			}{{0, -1, "0123456789"}, {3, 4, "3456"}, {7, -1, "789"}, {0, 1, "0"}} {
				got, err := read(t, st, "t/p/c1/a", c.off, c.n)
				if err != nil || got != c.want {
					t.Errorf("read [%d,+%d) = %q, %v; want %q", c.off, c.n, got, err, c.want)
				}
			}
			// Missing keys.
			if _, err := st.NewRangeReader(ctx, "t/p/nope", 0, -1); !errors.Is(err, store.ErrNotExist) {
				t.Errorf("read missing: %v, want ErrNotExist", err)
			} else if !strings.Contains(err.Error(), "t/p/nope") {
				t.Errorf("error %q does not name the key", err)
			}
			if _, err := st.Stat(ctx, "t/p/nope"); !errors.Is(err, store.ErrNotExist) {
				t.Errorf("stat missing: %v, want ErrNotExist", err)
			}
			if ok, err := store.Exists(ctx, st, "t/p/c1/b"); !ok || err != nil {
				t.Errorf("exists = %v, %v", ok, err)
			}
			if o, err := st.Stat(ctx, "t/p/c1/b"); err != nil || o.Size != 10 || o.Modified.IsZero() {
				t.Errorf("stat = %+v, %v", o, err)
			}
			// Prefixes.
			objs, err := st.List(ctx, "t/p/")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := keys(objs), []string{"t/p/c1/a", "t/p/c1/b", "t/p/c10/a"}; !slices.Equal(got, want) {
				t.Errorf("list t/p/ = %v, want %v", got, want)
			}
			ents := store.Prefixes(objs, "t/p/")
			if len(ents) != 2 || ents[0].Name != "c1" || ents[0].Size != 20 || ents[1].Name != "c10" {
				t.Errorf("prefixes = %+v", ents)
			}
			if objs, err := st.List(ctx, "none/"); err != nil || len(objs) != 0 {
				t.Errorf("list none/ = %v, %v", objs, err)
			}
			// Put if absent.
			other := writeFile(t, "other")
			if err := st.Put(ctx, "t/p/c1/a", other, store.PutOptions{IfAbsent: true}); !errors.Is(err, store.ErrExists) {
				t.Errorf("put if absent over an object: %v, want ErrExists", err)
			}
			if got, _ := read(t, st, "t/p/c1/a", 0, -1); got != "0123456789" {
				t.Errorf("after a refused put: %q", got)
			}
			if err := st.Put(ctx, "t/p/c1/new", other, store.PutOptions{IfAbsent: true}); err != nil {
				t.Errorf("put if absent: %v", err)
			}
			// Delete by prefix: c1/ only, not c10/.
			if err := st.DeletePrefix(ctx, "t/p/c1/"); err != nil {
				t.Fatal(err)
			}
			objs, _ = st.List(ctx, "")
			if got, want := keys(objs), []string{"t/p/c10/a", "t/q/c2/a", "u/x"}; !slices.Equal(got, want) {
				t.Errorf("after delete: %v, want %v", got, want)
			}
			if err := st.DeletePrefix(ctx, "t/p/c1/"); err != nil {
				t.Errorf("delete again: %v", err)
			}
			// Invalid keys.
			for _, k := range []string{"", "/abs", "a/../b", "a//b", "a/./b"} {
				if _, err := st.Stat(ctx, k); !errors.Is(err, store.ErrInvalidKey) {
					t.Errorf("stat %q: %v, want ErrInvalidKey", k, err)
				}
			}
			if err := st.DeletePrefix(ctx, ""); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("delete everything: %v, want ErrInvalidKey", err)
			}
			if _, err := st.List(ctx, "t/p"); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("list without a slash: %v, want ErrInvalidKey", err)
			}
		})
	}
}

func keys(objs []store.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}

func TestFileStoreIsTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(t.Context(), "t/p/c0/manifest.json", writeFile(t, "{}"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "t", "p", "c0", "manifest.json")); err != nil || string(b) != "{}" {
		t.Errorf("file at DIR/key: %q, %v", b, err)
	}
	if st.String() != "file://"+dir {
		t.Errorf("String = %s", st)
	}
}

func TestOpenURLs(t *testing.T) {
	for _, u := range []string{"ftp://x/y", "file://host/dir", "s3://", "file://"} {
		if st, err := store.Open(context.Background(), u); err == nil {
			st.Close()
			t.Errorf("open %q: no error", u)
		}
	}
}

func TestContainerUploadFetchCheck(t *testing.T) {
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: 4, Containers: 2, RowsPerContainer: 3000, BlockRows: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			m := ms[0]
			src := columnar.ContainerDir(local, "t", "p", m.ID)
			if _, err := store.Check(ctx, st, "t", "p", m.ID); !errors.Is(err, columnar.ErrNotFound) {
				t.Errorf("check before upload: %v, want ErrNotFound", err)
			}
			up, err := store.Upload(ctx, st, src, "t", "p", m.ID)
			if err != nil || up.Rows != m.Rows {
				t.Fatalf("upload: %v", err)
			}
			if _, err := store.Upload(ctx, st, src, "t", "p", m.ID); !errors.Is(err, columnar.ErrExists) {
				t.Errorf("second upload: %v, want ErrExists", err)
			}
			if got, err := store.Check(ctx, st, "t", "p", m.ID); err != nil || got.Rows != m.Rows {
				t.Errorf("check: %v", err)
			}
			dst := filepath.Join(t.TempDir(), "t", "p", m.ID)
			got, n, err := store.Fetch(ctx, st, "t", "p", m.ID, dst)
			if err != nil {
				t.Fatal(err)
			}
			// The pack's head (commit, magic, manifest, index) and its files.
			if head := int64(24 + manifestSize(t, src) + 8*int64(len(m.Files))); n != m.CompressedBytes()+head {
				t.Errorf("fetched %d bytes, container has %d and the pack's head %d", n, m.CompressedBytes(), head)
			}
			if got.Rows != m.Rows {
				t.Errorf("fetched manifest rows %d", got.Rows)
			}
			if err := columnar.Verify(dst); err != nil {
				t.Errorf("verify fetched: %v", err)
			}
			if _, _, err := store.Fetch(ctx, st, "t", "p", m.ID, dst); !errors.Is(err, columnar.ErrExists) {
				t.Errorf("fetch over a container: %v, want ErrExists", err)
			}
			// A column file changed in the store: check and fetch say so.
			_, prefix, err := store.Committed(ctx, st, "t", "p", m.ID)
			if err != nil || !strings.HasPrefix(prefix, store.ContainerPrefix("t", "p", m.ID)) {
				t.Fatalf("committed: %q, %v", prefix, err)
			}
			rewritePack(t, st, "t", "p", m.ID, func(c *store.Container, data []byte) []byte {
				_, off := c.File(1)
				copy(data[off:off+m.Files[1].Size], strings.Repeat("x", int(m.Files[1].Size)))
				return data
			})
			if _, err := store.Check(ctx, st, "t", "p", m.ID); !errors.Is(err, columnar.ErrCorrupt) {
				t.Errorf("check corrupt: %v, want ErrCorrupt", err)
			}
			dst2 := filepath.Join(t.TempDir(), m.ID)
			if _, _, err := store.Fetch(ctx, st, "t", "p", m.ID, dst2); !errors.Is(err, columnar.ErrCorrupt) || !strings.Contains(err.Error(), m.Files[1].Name) {
				t.Errorf("fetch corrupt: %v, want ErrCorrupt naming the file", err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(dst2)); len(ents) != 0 {
				t.Errorf("a failed fetch left %v", ents)
			}
			// An upload without its manifest is not a container.
			if err := store.Remove(ctx, st, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.Fetch(ctx, st, "t", "p", m.ID, dst2); !errors.Is(err, columnar.ErrNotFound) {
				t.Errorf("fetch removed: %v, want ErrNotFound", err)
			}
		})
	}
}

func manifestSize(t *testing.T, dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, columnar.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestS3ContentType: every object the S3 store puts, in one PUT or in
// parts, says it is strata's (ObjectContentType), the parts of a
// multipart upload too, where the SDK would send
// application/octet-stream: SeaweedFS gzips the chunks of an object of
// that type whose first bytes look like text, and then decompresses a
// whole chunk for each ranged GET into it. Query parameters the store
// reads itself still work (use_path_style, disable_https) and a bad or
// unknown one is an error.
func TestS3ContentType(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("strata"); err != nil {
		t.Fatal(err)
	}
	type request struct{ method, query, contentType string }
	var mu sync.Mutex
	var requests []request
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			mu.Lock()
			requests = append(requests, request{r.Method, r.URL.RawQuery, r.Header.Get("Content-Type")})
			mu.Unlock()
		}
		faker.ServeHTTP(w, r)
	}))
	defer hs.Close()
	for _, kv := range []string{"AWS_ACCESS_KEY_ID=strata-test", "AWS_SECRET_ACCESS_KEY=strata-test-secret", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := t.Context()
	u := "s3://strata?endpoint=" + hs.URL + "&region=us-east-1&use_path_style=true&disable_https=true"
	st, err := store.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	small := strings.Repeat("text-like bytes ", 1<<10)
	if err := st.PutReader(ctx, "a/small", strings.NewReader(small), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Past the SDK's 16MiB threshold: a multipart upload of 8MiB parts.
	large := strings.Repeat("text-like bytes ", 17<<16)
	if err := st.PutReader(ctx, "a/large", strings.NewReader(large), store.PutOptions{Size: int64(len(large))}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a/small": small, "a/large": large} {
		if got, err := read(t, st, key, 0, -1); err != nil || got != want {
			t.Errorf("read %s: %d bytes, %v; want %d", key, len(got), err, len(want))
		}
	}
	parts := 0
	for _, r := range requests {
		switch {
		case strings.Contains(r.query, "partNumber="):
			parts++
		case r.method == http.MethodPost && strings.Contains(r.query, "uploadId="):
			continue // CompleteMultipartUpload: its body is XML
		}
		if r.contentType != store.ObjectContentType {
			t.Errorf("%s ?%s: Content-Type %q, want %q", r.method, r.query, r.contentType, store.ObjectContentType)
		}
	}
	if parts < 3 {
		t.Errorf("%d parts uploaded; want a multipart upload of 3 at least (%v)", parts, requests)
	}
	for _, bad := range []string{"&use_path_style=maybe", "&ssetype=rot13", "&no_such_parameter=1"} {
		if st, err := store.Open(ctx, "s3://strata?endpoint="+hs.URL+"&region=us-east-1"+bad); err == nil {
			st.Close()
			t.Errorf("open with %s: no error", bad)
		}
	}
}
