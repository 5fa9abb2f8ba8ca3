package walarchive_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
)

var orders = walwriter.Table{Name: "orders", Columns: []messages.RowType{messages.RowInt64, messages.RowText}}

func openWAL(t *testing.T, dir string) *walwriter.WAL {
	t.Helper()
	w, err := walwriter.Open(dir, walwriter.Options{Tables: []walwriter.Table{orders}, SegmentSize: 128 << 10, MaxRowBytes: 4096})
	if err != nil {
		t.Fatalf("open WAL: %v", err)
	}
	return w
}

// appendN appends n updates of 100 keys, event IDs prefix0..prefix(n-1),
// with notes of random letters (deltas save little), and waits until all
// are durable.
func appendN(t *testing.T, w *walwriter.WAL, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(uint64(len(prefix)), uint64(n)))
	for i := range n {
		k := binary.BigEndian.AppendUint64(nil, uint64(i%100))
		note := make([]byte, 100+i%100)
		for j := range note {
			note[j] = byte('a' + rng.IntN(26))
		}
		row := walwriter.Row{binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63), note}
		wg.Add(1)
		err := w.AppendAsync(walwriter.Update{EventID: fmt.Sprint(prefix, i), Table: "orders", Key: k, Row: row}, func(_ walwriter.LSN, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

type record struct {
	LSN     walwriter.LSN
	Kind    walwriter.RecordKind
	EventID string
	Table   string
	Key     string
	Row     []string
}

// records reads every record of the WAL in dir with the walwriter's reader.
func records(t *testing.T, dir string) []record {
	t.Helper()
	r, err := walwriter.NewReader(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		c := record{LSN: rec.LSN, Kind: rec.Kind, EventID: rec.EventID, Table: rec.Table, Key: string(rec.Key)}
		for _, v := range rec.Row {
			c.Row = append(c.Row, string(v))
		}
		out = append(out, c)
	}
}

// objects returns the archive's objects: name under prefix -> size; a
// segment under segments/ by its name.
func objects(t *testing.T, st store.Store, prefix string) map[string]int64 {
	t.Helper()
	objs, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix)
		if rest, ok := strings.CutPrefix(name, "segments/"); ok {
			name = rest[strings.Index(rest, "/")+1:]
		}
		out[name] = o.Size
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sealed(t *testing.T, w *walwriter.WAL) (sealed []walwriter.SegmentFile, current string) {
	t.Helper()
	segs, err := w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if s.Sealed {
			sealed = append(sealed, s)
		} else {
			current = s.Name
		}
	}
	return sealed, current
}

func archivedCheckpoint(t *testing.T, st store.Store, prefix string) walwriter.LSN {
	t.Helper()
	b, err := store.ReadAll(context.Background(), st, prefix+walwriter.CheckpointFile)
	if errors.Is(err, store.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	lsn, err := walwriter.ParseCheckpointFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

const prefix = "wal/db1/"

// segmentKey is the key of the archived segment named name.
func segmentKey(name string) string {
	return prefix + "segments/" + strings.TrimSuffix(name, ".wal") + "/" + name
}

func TestArchiveSealedSegmentsAndCheckpoint(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	defer w.Close()
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	appendN(t, w, "a-", 3000)
	ckpt, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The background uploads follow the seals.
	segs, current := sealed(t, w)
	if len(segs) < 3 {
		t.Fatalf("%d sealed segments, want several", len(segs))
	}
	waitFor(t, "the sealed segments in the bucket", func() bool { return a.Stats().Segments >= uint64(len(segs)) })
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, st, prefix)
	for _, s := range segs {
		if objs[s.Name] != s.Size {
			t.Errorf("segment %s: %d bytes in the bucket, %d local", s.Name, objs[s.Name], s.Size)
		}
	}
	if _, ok := objs[current]; ok {
		t.Errorf("segment being written, %s, is in the bucket", current)
	}
	// The checkpoint record is in the segment being written: its file waits.
	if lsn := archivedCheckpoint(t, st, prefix); lsn != 0 {
		t.Errorf("checkpoint %d in the bucket before the segment holding its record (%s)", lsn, current)
	}
	if len(objs) != len(segs) {
		t.Errorf("bucket holds %v, want the %d sealed segments", objs, len(segs))
	}

	appendN(t, w, "b-", 1000) // seals the checkpoint's segment
	waitFor(t, "the checkpoint in the bucket", func() bool { return a.Stats().CheckpointLSN == ckpt })
	if lsn := archivedCheckpoint(t, st, prefix); lsn != ckpt {
		t.Fatalf("archived checkpoint %d, want %d", lsn, ckpt)
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, _ = sealed(t, w)
	var bytes int64
	for _, s := range segs {
		bytes += s.Size
	}
	s := a.Stats()
	if s.LagSegments != 0 || s.Segments != uint64(len(segs)) || s.Bytes != uint64(bytes) || s.Checkpoints != 1 || s.Failures != 0 {
		t.Fatalf("stats %+v; want %d segments of %d bytes, 1 checkpoint, no lag or failure", s, len(segs), bytes)
	}
}

func TestArchiveUploadsMissingOnStart(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "a-", 1000)
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	before := objects(t, st, prefix)
	if len(before) == 0 {
		t.Fatal("nothing archived")
	}
	// Sealed while no archiver runs.
	appendN(t, w, "b-", 1000)
	w.Close()

	w = openWAL(t, dir) // seals the segment written at close
	defer w.Close()
	segs, _ := sealed(t, w)
	a, err = walarchive.Start(w, st, walarchive.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, st, prefix)
	missing := 0
	for _, s := range segs {
		if objs[s.Name] != s.Size {
			t.Errorf("segment %s: %d bytes in the bucket, %d local", s.Name, objs[s.Name], s.Size)
		}
		if before[s.Name] != s.Size {
			missing++
		}
	}
	if got := a.Stats().Segments; got != uint64(missing) {
		t.Fatalf("uploaded %d segments on start, want the %d missing ones", got, missing)
	}
}

// flakyStore fails every call while down, as a store that cannot be
// reached does.
type flakyStore struct {
	store.Store
	down atomic.Bool
}

var errDown = errors.New("connection refused (test)")

func (f *flakyStore) List(ctx context.Context, prefix string) ([]store.Object, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.List(ctx, prefix)
}

func (f *flakyStore) Put(ctx context.Context, key, path string, opts store.PutOptions) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Put(ctx, key, path, opts)
}

func (f *flakyStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.NewRangeReader(ctx, key, off, n)
}

func TestArchiveStoreOutage(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := &flakyStore{Store: srv.Store(t)}
	st.down.Store(true)
	dir := t.TempDir()
	w := openWAL(t, dir)
	defer w.Close()
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	// The WAL writes as ever while the store is down.
	appendN(t, w, "a-", 2000)
	if _, err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "b-", 500)
	if err := w.Health(); err != nil {
		t.Fatalf("WAL health during the outage: %v", err)
	}
	segs, _ := sealed(t, w)
	waitFor(t, "the lag to count every sealed segment", func() bool { return a.Stats().LagSegments == len(segs) })
	waitFor(t, "failed uploads", func() bool { return a.Stats().Failures >= 3 })
	if err := a.Sync(context.Background()); !errors.Is(err, errDown) {
		t.Fatalf("Sync during the outage: %v, want the store's error", err)
	}
	// Nothing unarchived is removed.
	if removed, err := w.RemoveObsoleteSegments(); err != nil || len(removed) != 0 {
		t.Fatalf("removed %v (%v) while nothing is archived", removed, err)
	}

	st.down.Store(false)
	waitFor(t, "the archive to catch up", func() bool { s := a.Stats(); return s.LagSegments == 0 && s.CheckpointLSN != 0 })
	objs := objects(t, st, prefix)
	for _, s := range segs {
		if objs[s.Name] != s.Size {
			t.Errorf("segment %s: %d bytes in the bucket, %d local", s.Name, objs[s.Name], s.Size)
		}
	}
	removed, err := w.RemoveObsoleteSegments()
	if err != nil || len(removed) == 0 {
		t.Fatalf("removed %v (%v) once archived, want the segments before the checkpoint", removed, err)
	}
}

// archiveAll writes a WAL of several segments and a checkpoint, archives
// all of it (reopening it seals the last segment) and returns its
// directory and records.
func archiveAll(t *testing.T, st store.Store) (string, []record) {
	t.Helper()
	dir := t.TempDir()
	w := openWAL(t, dir)
	appendN(t, w, "a-", 1500)
	if _, err := w.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "b-", 1500)
	w.Close()
	w = openWAL(t, dir)
	defer w.Close()
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.LagSegments != 0 || s.CheckpointLSN == 0 {
		t.Fatalf("archive not complete: %+v", s)
	}
	return dir, records(t, dir)
}

func TestRestore(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	_, want := archiveAll(t, st)

	dst := filepath.Join(t.TempDir(), "restored")
	rep, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := records(t, dst)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %d records, want %d equal to the original", len(got), len(want))
	}
	last := want[len(want)-1].LSN
	if rep.WAL.LastLSN != last || rep.WAL.Records != 3000 || !rep.Checkpoint || rep.WAL.CheckpointLSN == 0 || rep.Segments < 3 {
		t.Fatalf("report %+v; want records 3000 up to LSN %d with a checkpoint", rep, last)
	}
	var bytes int64
	for name, size := range objects(t, st, prefix) {
		if !strings.HasPrefix(name, "checkpoints/") { // copies of CHECKPOINT
			bytes += size
		}
	}
	if rep.Bytes != bytes {
		t.Fatalf("report says %d bytes, the archive's segments and CHECKPOINT hold %d", rep.Bytes, bytes)
	}

	// The restored WAL opens and continues: a redelivered event is still a
	// duplicate, a new one gets the next LSN.
	w := openWAL(t, dst)
	row := walwriter.Row{binary.BigEndian.AppendUint64(nil, 1<<63), []byte("x")}
	if lsn, err := w.Append(context.Background(), walwriter.Update{EventID: want[len(want)-1].EventID, Table: "orders", Key: []byte("k"), Row: row}); err != nil || lsn != last {
		t.Fatalf("append of the last event again: LSN %d, %v; want %d", lsn, err, last)
	}
	if lsn, err := w.Append(context.Background(), walwriter.Update{EventID: "c-1", Table: "orders", Key: []byte("k"), Row: row}); err != nil || lsn != last+1 {
		t.Fatalf("append: LSN %d, %v; want %d", lsn, err, last+1)
	}
	w.Close()

	// A directory that holds a WAL is refused, and left as it was.
	if _, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{}); !errors.Is(err, walarchive.ErrNotEmpty) {
		t.Fatalf("restore into a WAL directory: %v, want ErrNotEmpty", err)
	}
	if got := records(t, dst); len(got) != len(want)+1 {
		t.Fatalf("after the refused restore: %d records, want %d", len(got), len(want)+1)
	}
	// An empty prefix names the archives it holds.
	_, err = walarchive.Restore(context.Background(), st, "", t.TempDir(), walarchive.RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), prefix) {
		t.Fatalf("restore from the store's root: %v, want one naming %s", err, prefix)
	}
}

// replaceObject puts data as the object at key.
func replaceObject(t *testing.T, st store.Store, key string, data []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "object")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), key, path, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreDamagedObject(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir, _ := archiveAll(t, st)
	segs, err := walwriter.ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := segmentKey(segs[1].Name)
	orig, err := store.ReadAll(context.Background(), st, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"flipped byte", func() []byte { b := append([]byte(nil), orig...); b[200] ^= 0xff; return b }()},
		{"truncated", orig[:len(orig)/2+7]},
		{"header only", orig[:20]},
	} {
		t.Run(c.name, func(t *testing.T) {
			replaceObject(t, st, key, c.data)
			_, err := walarchive.Restore(context.Background(), st, prefix, t.TempDir(), walarchive.RestoreOptions{})
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Fatalf("restore with a damaged %s: %v, want an error naming it", key, err)
			}
			t.Log(err)
		})
	}
	replaceObject(t, st, prefix+walwriter.CheckpointFile, []byte("not a checkpoint"))
	if _, err := walarchive.Restore(context.Background(), st, prefix, t.TempDir(), walarchive.RestoreOptions{}); err == nil || !strings.Contains(err.Error(), prefix+walwriter.CheckpointFile) {
		t.Fatalf("restore with a damaged checkpoint: %v", err)
	}
}

func TestArchiveRefusesAnotherWALsPrefix(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	archiveAll(t, st)
	dir := t.TempDir()
	w := openWAL(t, dir)
	defer w.Close()
	appendN(t, w, "other-", 1500)
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour, MinBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "another WAL") {
		t.Fatalf("archiving a second WAL to the prefix of another: %v", err)
	}
}

// A failed fsync makes the WAL cut segments back and start again; the
// archive, made meanwhile, still restores to exactly the WAL's records.
func TestArchiveAcrossWriteFailures(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	var mu sync.Mutex
	seen := map[string]int{}
	faults := &walwriter.Faults{Sync: func(seg string) error {
		mu.Lock()
		defer mu.Unlock()
		seen[seg]++
		// The first sync of every third segment fails.
		if seen[seg] == 1 && len(seen)%3 == 0 {
			return errors.New("I/O error (test)")
		}
		return nil
	}}
	opts := walwriter.Options{Tables: []walwriter.Table{orders}, SegmentSize: 128 << 10, MaxRowBytes: 4096, Faults: faults, RetryBackoff: 20 * time.Millisecond}
	w, err := walwriter.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, MinBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "a-", 4000)
	if s := w.Stats(); s.WriteFailures == 0 {
		t.Fatalf("no write failed: %+v", s)
	}
	a.Close()
	w.Close()
	opts.Faults = nil
	if w, err = walwriter.Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if a, err = walarchive.Start(w, st, walarchive.Options{Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := records(t, dir)
	if len(want) != 4000 {
		t.Fatalf("%d records in the WAL, want 4000", len(want))
	}
	dst := t.TempDir()
	if _, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := records(t, dst); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %d records, want the WAL's %d", len(got), len(want))
	}
}

// countingStore counts the listings made through it.
type countingStore struct {
	store.Store
	lists atomic.Int64
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]store.Object, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix)
}

// The archiver lists its prefix once, on its first pass, and keeps what it
// uploads in memory after that: N passes that each upload something make
// one listing, not N.
func TestArchiveListsOnce(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := &countingStore{Store: srv.Store(t)}
	dir := t.TempDir()
	w := openWAL(t, dir)
	defer w.Close()
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour, MinBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const passes = 8
	for i := range passes {
		appendN(t, w, fmt.Sprintf("p%d-", i), 400)
		if _, err := w.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := a.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := sealed(t, w)
	if s := a.Stats(); s.Segments != uint64(len(segs)) || s.Checkpoints < 2 {
		t.Fatalf("stats %+v; want the %d sealed segments and several checkpoints uploaded", s, len(segs))
	}
	if n := st.lists.Load(); n != 1 {
		t.Fatalf("%d passes made %d listings, want 1", passes, n)
	}
}

// A clean stop (the WAL closed, then one more pass) puts the segment being
// written in the bucket too: a restore has every acknowledged record, and
// the next start finds that segment archived.
func TestArchiveCleanStop(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "a-", 1500)
	ckpt, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "b-", 50) // the checkpoint and these are in the segment being written
	_, current := sealed(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	want := records(t, dir)
	if objs := objects(t, st, prefix); objs[current] == 0 {
		t.Errorf("the segment written at the stop, %s, is not in the bucket: %v", current, objs)
	}

	dst := t.TempDir()
	rep, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := records(t, dst); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %d records, want the %d written before the stop", len(got), len(want))
	}
	if rep.WAL.Records != 1550 || rep.WAL.LastLSN != want[len(want)-1].LSN || rep.WAL.CheckpointLSN != ckpt {
		t.Fatalf("report %+v; want 1550 records and checkpoint %d", rep.WAL, ckpt)
	}

	// The next start recovers that segment (nothing to cut), seals it and
	// finds it archived.
	w = openWAL(t, dir)
	defer w.Close()
	a, err = walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Segments != 0 || s.LagSegments != 0 || s.Failures != 0 {
		t.Fatalf("after the restart: %+v; want nothing more uploaded", s)
	}
}
