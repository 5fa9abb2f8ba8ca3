package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// countingStore counts the requests made through it by kind and the most
// reads it had open at once, and can make each request wait a round trip
// (latency) first, as a server across a network does.
type countingStore struct {
	store.Store
	latency time.Duration
	// failRead, if set, fails the read of the keys it names.
	failRead func(key string) error

	lists, stats, reads atomic.Int64
	open, maxOpen       atomic.Int64
}

func (c *countingStore) wait(ctx context.Context) error {
	if c.latency <= 0 {
		return nil
	}
	t := time.NewTimer(c.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]store.Object, error) {
	c.lists.Add(1)
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Store.List(ctx, prefix)
}

func (c *countingStore) Stat(ctx context.Context, key string) (store.Object, error) {
	c.stats.Add(1)
	if err := c.wait(ctx); err != nil {
		return store.Object{}, err
	}
	return c.Store.Stat(ctx, key)
}

func (c *countingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.reads.Add(1)
	open := c.open.Add(1)
	for {
		max := c.maxOpen.Load()
		if open <= max || c.maxOpen.CompareAndSwap(max, open) {
			break
		}
	}
	err := c.wait(ctx)
	if err == nil && c.failRead != nil {
		err = c.failRead(key)
	}
	var r io.ReadCloser
	if err == nil {
		r, err = c.Store.NewRangeReader(ctx, key, off, n)
	}
	if err != nil {
		c.open.Add(-1)
		return nil, err
	}
	return &countedReader{ReadCloser: r, open: &c.open}, nil
}

func (c *countingStore) requests() int64 { return c.lists.Load() + c.stats.Load() + c.reads.Load() }

type countedReader struct {
	io.ReadCloser
	open *atomic.Int64
	once sync.Once
}

func (r *countedReader) Close() error {
	r.once.Do(func() { r.open.Add(-1) })
	return r.ReadCloser.Close()
}

// generateWide writes container t/p/c0000 of columns columns under a
// directory of its own.
func generateWide(t testing.TB, columns int) (string, *columnar.Manifest) {
	t.Helper()
	local := t.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: columns, Containers: 1, RowsPerContainer: 300, BlockRows: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return columnar.ContainerDir(local, "t", "p", ms[0].ID), ms[0]
}

// TestCheckRequests: Check of a committed pack makes one read of the
// commit (which holds the pack's head), one of the pack's head (to check
// it is the commit's), one Stat of the pack and one ranged read
// of the headers close together (here, every file: the container is
// small), and no listing. Check of an attempt of an object per file (the
// layout before packs) reads the commit, finds no pack, reads the
// manifest, lists the attempt once and reads each file's header; so does
// Check of a container in the first layout, without the pack's read.
func TestCheckRequests(t *testing.T) {
	dir, m := generateWide(t, 40)
	n := int64(len(m.Files))
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := store.Upload(ctx, st, dir, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			// Another container beside it, and an attempt of this one that
			// no commit names: neither is listed or read.
			putAttempt(t, st, dir, m, "c0001", "a00000000000000ff", true, nil)
			putAttempt(t, st, dir, m, m.ID, "a00000000000000ee", false, nil)
			cs := &countingStore{Store: st}
			if _, err := store.Check(ctx, cs, "t", "p", m.ID); err != nil {
				t.Fatal(err)
			}
			if l, s, r := cs.lists.Load(), cs.stats.Load(), cs.reads.Load(); l != 0 || s != 1 || r != 3 {
				t.Errorf("check of a pack of %d files: %d listings, %d stats, %d reads; want 0, 1, 3", n, l, s, r)
			}
			// An attempt of an object per file.
			cs = &countingStore{Store: st}
			if _, err := store.Check(ctx, cs, "t", "p", "c0001"); err != nil {
				t.Fatal(err)
			}
			if l, s, r := cs.lists.Load(), cs.stats.Load(), cs.reads.Load(); l != 1 || s != 0 || r != n+3 {
				t.Errorf("check of %d files, an object each: %d listings, %d stats, %d reads; want 1, 0, %d", n, l, s, r, n+3)
			}
			// The first layout.
			base := store.ContainerPrefix("t", "p", "c0002")
			for _, name := range append(fileNames(m), columnar.ManifestName) {
				data := readLocal(t, dir, name)
				if name == columnar.ManifestName {
					data = []byte(strings.Replace(string(data), `"`+m.ID+`"`, `"c0002"`, 1))
				}
				putBytes(t, st, base+name, data)
			}
			cs = &countingStore{Store: st}
			if _, err := store.Check(ctx, cs, "t", "p", "c0002"); err != nil {
				t.Fatal(err)
			}
			if l, s, r := cs.lists.Load(), cs.stats.Load(), cs.reads.Load(); l != 1 || s != 0 || r != n+2 {
				t.Errorf("check of %d files in the first layout: %d listings, %d stats, %d reads; want 1, 0, %d", n, l, s, r, n+2)
			}
		})
	}
}

// TestCheckParallel: Check reads headers in parallel, never more than
// MaxCheckReads at once, and many Checks may run at once.
func TestCheckParallel(t *testing.T) {
	dir, m := generateWide(t, 3*store.MaxCheckReads)
	st := stores(t)["s3"]
	ctx := t.Context()
	// An object per file: a read a header.
	putAttempt(t, st, dir, m, m.ID, "a0123456789abcdef", true, nil)
	cs := &countingStore{Store: st, latency: 5 * time.Millisecond}
	if _, err := store.Check(ctx, cs, "t", "p", m.ID); err != nil {
		t.Fatal(err)
	}
	if got := cs.maxOpen.Load(); got < 2 || got > store.MaxCheckReads {
		t.Errorf("at most %d reads open at once; want 2 to %d", got, store.MaxCheckReads)
	}
	// Several checks of one container at once (the scheduler's Register).
	cs = &countingStore{Store: st, latency: time.Millisecond}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = store.Check(ctx, cs, "t", "p", m.ID) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got, want := cs.reads.Load(), int64(len(errs)*(len(m.Files)+3)); got != want {
		t.Errorf("%d checks at once made %d reads, want %d", len(errs), got, want)
	}
}

// TestCheckErrors: a column file missing, cut short or with a changed
// header is a corrupt container, and the error names the container and
// the file; a read that fails is that error, not a corrupt container.
func TestCheckErrors(t *testing.T) {
	dir, m := generateWide(t, 24)
	bad := m.Files[len(m.Files)/2]
	cases := []struct {
		name   string
		change func(name string, data []byte) []byte // nil leaves the file out
		reason string
	}{
		{"missing", nil, "missing"},
		{"short", func(name string, data []byte) []byte { return data[:len(data)-1] }, "manifest says"},
		{"header", func(name string, data []byte) []byte {
			data = append([]byte(nil), data...)
			data[bad.HeaderLen/2] ^= 0x40
			return data
		}, "header checksum"},
	}
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for i, c := range cases {
				id := columnar.ContainerID(i)
				putAttempt(t, st, dir, m, id, "a0123456789abcdef", true, func(name string, data []byte) ([]byte, bool) {
					if name != bad.Name {
						return data, true
					}
					if c.change == nil {
						return nil, false
					}
					return c.change(name, data), true
				})
				cs := &countingStore{Store: st}
				_, err := store.Check(ctx, cs, "t", "p", id)
				var ce *columnar.CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, columnar.ErrCorrupt) || ce.File != bad.Name || !strings.Contains(ce.Container, "t/p/"+id) || !strings.Contains(ce.Reason, c.reason) {
					t.Errorf("%s: %v; want a CorruptError of t/p/%s file %s (%s)", c.name, err, id, bad.Name, c.reason)
				}
				if cs.stats.Load() > 1 || cs.lists.Load() != 1 {
					t.Errorf("%s: %d listings, %d stats", c.name, cs.lists.Load(), cs.stats.Load())
				}
			}
			// A read that fails: its error, not a corrupt container.
			id := columnar.ContainerID(len(cases))
			putAttempt(t, st, dir, m, id, "a0123456789abcdef", true, nil)
			boom := errors.New("connection reset")
			cs := &countingStore{Store: st, failRead: func(key string) error {
				if strings.HasSuffix(key, "/"+bad.Name) {
					return boom
				}
				return nil
			}}
			if _, err := store.Check(ctx, cs, "t", "p", id); !errors.Is(err, boom) || errors.Is(err, columnar.ErrCorrupt) {
				t.Errorf("a failed read: %v, want %v", err, boom)
			}
			if _, err := store.Check(ctx, st, "t", "p", id); err != nil {
				t.Errorf("the same container read well: %v", err)
			}
			// A missing container.
			if _, err := store.Check(ctx, st, "t", "p", "c9999"); !errors.Is(err, columnar.ErrNotFound) {
				t.Errorf("a missing container: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestCheckListingLags: a file a listing leaves out (a server whose
// listings lag its writes) is looked up by itself before it is called
// missing.
func TestCheckListingLags(t *testing.T) {
	dir, m := generateWide(t, 8)
	st := stores(t)["s3"]
	ctx := t.Context()
	// An attempt of an object per file: a pack is never listed.
	putAttempt(t, st, dir, m, m.ID, "a0123456789abcdef", true, nil)
	lagging := &laggingStore{Store: st, hide: m.Files[2].Name}
	cs := &countingStore{Store: lagging}
	if _, err := store.Check(ctx, cs, "t", "p", m.ID); err != nil {
		t.Errorf("check: %v", err)
	}
	if cs.stats.Load() != 1 {
		t.Errorf("%d stats, want 1 (of the file the listing left out)", cs.stats.Load())
	}
}

// laggingStore leaves keys ending in /hide out of its listings.
type laggingStore struct {
	store.Store
	hide string
}

func (l *laggingStore) List(ctx context.Context, prefix string) ([]store.Object, error) {
	objs, err := l.Store.List(ctx, prefix)
	out := objs[:0]
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, "/"+l.hide) {
			out = append(out, o)
		}
	}
	return out, err
}

func fileNames(m *columnar.Manifest) []string {
	var names []string
	for _, fm := range m.Files {
		names = append(names, fm.Name)
	}
	return names
}

func readLocal(t testing.TB, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func putBytes(t testing.TB, st store.Store, key string, data []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), key, p, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// putAttempt puts the container in dir (manifest m) into st as t/p/id
// under attempt, each file as change makes it (false leaves it out; nil
// changes nothing), the manifest naming id, and the commit if commit.
func putAttempt(t testing.TB, st store.Store, dir string, m *columnar.Manifest, id, attempt string, commit bool, change func(name string, data []byte) ([]byte, bool)) {
	t.Helper()
	base := store.ContainerPrefix("t", "p", id)
	for _, name := range fileNames(m) {
		data, ok := readLocal(t, dir, name), true
		if change != nil {
			data, ok = change(name, data)
		}
		if ok {
			putBytes(t, st, base+attempt+"/"+name, data)
		}
	}
	manifest := strings.Replace(string(readLocal(t, dir, columnar.ManifestName)), `"`+m.ID+`"`, `"`+id+`"`, 1)
	putBytes(t, st, base+attempt+"/"+columnar.ManifestName, []byte(manifest))
	if commit {
		putBytes(t, st, base+store.CommitName, []byte(attempt+"\n"))
	}
}

// BenchmarkCheck32x400 checks what a load of 32 containers of 400 columns
// registers, in an S3 bucket (the in-process server, or the one of
// STRATA_TEST_S3_URL): the containers one at a time and 8 at once, with
// the server's own latency and with 2ms more per request, as across a
// network.
func BenchmarkCheck32x400(b *testing.B) {
	const containers, columns = 32, 400
	srv := s3test.Start(b, "strata")
	st := srv.Store(b)
	local := b.TempDir()
	ms, err := columnar.Generate(local, columnar.GenOptions{Table: "t", Projection: "p", Columns: columns, Containers: containers, RowsPerContainer: 100, BlockRows: 100, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := eachAtOnce(len(ms), 8, func(i int) error {
		_, err := store.Upload(context.Background(), st, columnar.ContainerDir(local, "t", "p", ms[i].ID), "t", "p", ms[i].ID)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, latency := range []time.Duration{0, 2 * time.Millisecond} {
		for _, width := range []int{1, 8} {
			b.Run(fmt.Sprintf("latency=%v/at-once=%d", latency, width), func(b *testing.B) {
				cs := &countingStore{Store: st, latency: latency}
				for b.Loop() {
					if err := eachAtOnce(len(ms), width, func(i int) error {
						_, err := store.Check(context.Background(), cs, "t", "p", ms[i].ID)
						return err
					}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cs.requests())/float64(b.N), "requests/op")
				b.ReportMetric(float64(containers*b.N)/b.Elapsed().Seconds(), "containers/s")
			})
		}
	}
}

// eachAtOnce calls f(0), ..., f(n-1), width at a time, and returns the
// first error.
func eachAtOnce(n, width int, f func(i int) error) error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		err  error
		wg   sync.WaitGroup
	)
	for range width {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if e := f(i); e != nil {
					mu.Lock()
					if err == nil {
						err = e
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return err
}
