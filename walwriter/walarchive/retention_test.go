package walarchive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
)

// recordsFrom reads the records of the WAL in dir from LSN from on.
func recordsFrom(t *testing.T, dir string, from walwriter.LSN) []record {
	t.Helper()
	r, err := walwriter.NewReader(dir, from)
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
			t.Fatalf("read %s from %d: %v", dir, from, err)
		}
		c := record{LSN: rec.LSN, Kind: rec.Kind, EventID: rec.EventID, Table: rec.Table, Key: string(rec.Key)}
		for _, v := range rec.Row {
			c.Row = append(c.Row, string(v))
		}
		out = append(out, c)
	}
}

// archivedCheckpoints returns the LSNs of the checkpoint copies in the
// archive, oldest first.
func archivedCheckpoints(t *testing.T, st store.Store) []walwriter.LSN {
	t.Helper()
	var out []walwriter.LSN
	for name := range objects(t, st, prefix) {
		if d, ok := strings.CutPrefix(name, "checkpoints/"); ok {
			var lsn uint64
			if _, err := fmt.Sscanf(d, "%020d/CHECKPOINT", &lsn); err != nil {
				t.Fatalf("checkpoint key %s: %v", name, err)
			}
			out = append(out, walwriter.LSN(lsn))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// holderOf returns the segment holding LSN lsn: the last one starting at
// or before it.
func holderOf(segs []walwriter.SegmentFile, lsn walwriter.LSN) walwriter.SegmentFile {
	var h walwriter.SegmentFile
	for _, s := range segs {
		if s.First <= lsn {
			h = s
		}
	}
	return h
}

// checkpointRounds appends and checkpoints rounds times, syncing the
// archive after each, and returns the checkpoints' LSNs.
func checkpointRounds(t *testing.T, w *walwriter.WAL, a *walarchive.Archiver, tag string, rounds int) []walwriter.LSN {
	t.Helper()
	var ckpts []walwriter.LSN
	for i := range rounds {
		appendN(t, w, fmt.Sprintf("%s%d-", tag, i), 600)
		lsn, err := w.Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ckpts = append(ckpts, lsn)
		// Appends until the checkpoint's segment is sealed, so that this
		// round's Sync archives the checkpoint before the next round's
		// replaces the WAL's checkpoint file. Where a segment ends depends
		// on how group commit batched the appends, so how many that takes
		// varies from run to run.
		for k := 0; ; k++ {
			appendN(t, w, fmt.Sprintf("%s%d-after%d-", tag, i, k), 300)
			segs, err := w.Segments()
			if err != nil {
				t.Fatal(err)
			}
			if holderOf(segs, lsn).Sealed {
				break
			}
			if k == 10 {
				t.Fatalf("checkpoint %d's segment not sealed after %d appends", lsn, 300*(k+1))
			}
		}
		if err := a.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return ckpts
}

// Retention by count: the archive keeps the newest checkpoints and every
// segment a restore from one of them needs, and deletes the rest; a
// restore from each retained checkpoint reads.
func TestArchiveRetentionByCount(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour, RetainCheckpoints: 2})
	if err != nil {
		t.Fatal(err)
	}
	ckpts := checkpointRounds(t, w, a, "r", 6)
	if err := w.Close(); err != nil { // the clean stop seals the last segment
		t.Fatal(err)
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	segs, err := walwriter.ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	retained := ckpts[len(ckpts)-2:]
	if got := archivedCheckpoints(t, st); !reflect.DeepEqual(got, retained) {
		t.Fatalf("checkpoints in the archive %v, want the newest two of %v", got, ckpts)
	}
	if lsn := archivedCheckpoint(t, st, prefix); lsn != ckpts[len(ckpts)-1] {
		t.Fatalf("CHECKPOINT %d, want the newest, %d", lsn, ckpts[len(ckpts)-1])
	}
	floor := holderOf(segs, retained[0])
	objs := objects(t, st, prefix)
	for _, s := range segs {
		size, ok := objs[s.Name]
		switch {
		case s.First < floor.First && ok:
			t.Errorf("segment %s, wholly before %s (holding the oldest retained checkpoint %d), is still archived", s.Name, floor.Name, retained[0])
		case s.First >= floor.First && size != s.Size:
			t.Errorf("segment %s: %d bytes archived, want %d: a retained checkpoint needs it", s.Name, size, s.Size)
		}
	}
	s := a.Stats()
	// A checkpoint replaced before a pass uploaded it was never archived,
	// so it is not deleted either: all archived but the newest two are.
	if s.DeletedCheckpoints != s.Checkpoints-2 || s.DeletedSegments == 0 || s.StoredCheckpoints != 2 {
		t.Fatalf("stats %+v; want all %d archived checkpoints but 2 deleted, some segments, 2 stored", s, s.Checkpoints)
	}

	// The newest restores whole from the oldest retained checkpoint on.
	dst := t.TempDir()
	rep, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := recordsFrom(t, dir, retained[0]); !reflect.DeepEqual(recordsFrom(t, dst, retained[0]), want) {
		t.Fatalf("restored WAL differs from the original after checkpoint %d", retained[0])
	}
	if rep.WAL.CheckpointLSN != ckpts[len(ckpts)-1] || !reflect.DeepEqual(rep.Checkpoints, retained) {
		t.Fatalf("report: checkpoint %d, archive's checkpoints %v; want %d of %v", rep.WAL.CheckpointLSN, rep.Checkpoints, ckpts[len(ckpts)-1], retained)
	}
	// Each retained checkpoint restores, as the WAL was at it.
	for _, c := range retained {
		dst := t.TempDir()
		rep, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{At: c})
		if err != nil {
			t.Fatalf("restore at %d: %v", c, err)
		}
		if rep.WAL.CheckpointLSN != c || rep.WAL.LastLSN != c {
			t.Fatalf("restore at %d: checkpoint %d, last LSN %d; want both %d", c, rep.WAL.CheckpointLSN, rep.WAL.LastLSN, c)
		}
		if got := recordsFrom(t, dst, c); len(got) != 1 || got[0].Kind != walwriter.KindCheckpoint {
			t.Fatalf("restore at %d: records from it %+v, want the checkpoint alone", c, got)
		}
	}
	// A deleted checkpoint is refused, naming the retained ones.
	_, err = walarchive.Restore(context.Background(), st, prefix, t.TempDir(), walarchive.RestoreOptions{At: ckpts[0]})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(retained[0])) {
		t.Fatalf("restore at deleted checkpoint %d: %v, want an error naming the retained ones", ckpts[0], err)
	}

	// The next start uploads nothing again; the local WAL may now drop
	// the segments retention deleted (they are before its checkpoint).
	w = openWAL(t, dir)
	defer w.Close()
	lists := &countingStore{Store: st}
	a, err = walarchive.Start(w, lists, walarchive.Options{Prefix: prefix, Interval: time.Hour, RetainCheckpoints: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := a.Stats(); s.Segments != 0 || s.LagSegments != 0 || s.Failures != 0 {
		t.Fatalf("after a restart: %+v; want nothing uploaded", s)
	}
	removed, err := w.RemoveObsoleteSegments()
	if err != nil || len(removed) == 0 || removed[0] != segs[0].Name {
		t.Fatalf("removed %v (%v) locally, want the segments from %s on", removed, err, segs[0].Name)
	}
}

// Retention by age: a checkpoint beyond the count is kept while younger
// than the age.
func TestArchiveRetentionByAge(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	w := openWAL(t, t.TempDir())
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	opts := walarchive.WithClock(walarchive.Options{Prefix: prefix, Interval: time.Hour, RetainCheckpoints: 1, RetainAge: time.Hour}, clock)
	a, err := walarchive.Start(w, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ckpts := checkpointRounds(t, w, a, "y", 4)
	w.Close() // seals the last checkpoint's segment
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	archived := archivedCheckpoints(t, st)
	if len(archived) != len(ckpts) || a.Stats().DeletedSegments != 0 {
		t.Fatalf("checkpoints %v archived of %v, %d segments deleted: want all kept within the hour", archived, ckpts, a.Stats().DeletedSegments)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := archivedCheckpoints(t, st); len(got) != 1 || got[0] != archived[len(archived)-1] {
		t.Fatalf("checkpoints %v after two hours, want the newest alone (%d)", got, archived[len(archived)-1])
	}
	if a.Stats().DeletedSegments == 0 {
		t.Fatal("no segment deleted once the older checkpoints expired")
	}
}

// Without retention options nothing is deleted.
func TestArchiveNoRetention(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	w := openWAL(t, t.TempDir())
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ckpts := checkpointRounds(t, w, a, "n", 4)
	w.Close() // seals the last checkpoint's segment
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := archivedCheckpoints(t, st); !reflect.DeepEqual(got, ckpts) {
		t.Fatalf("checkpoints %v archived, want every one of %v", got, ckpts)
	}
	segs, _ := sealed(t, w)
	objs := objects(t, st, prefix)
	for _, s := range segs {
		if objs[s.Name] != s.Size {
			t.Errorf("segment %s: %d bytes archived, want %d", s.Name, objs[s.Name], s.Size)
		}
	}
}

// An archive of the first layout (segments and CHECKPOINT directly under
// the prefix) restores; an archiver with retention continues it, and the
// first-layout segments it no longer needs stop counting (emptied, as the
// store deletes only prefixes) without breaking a restore.
func TestArchiveFirstLayout(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	appendN(t, w, "a-", 1500)
	first, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "b-", 500)
	w.Close()
	// As the first archiver left it: every sealed segment, then CHECKPOINT.
	segs, err := walwriter.ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if err := st.Put(context.Background(), prefix+s.Name, filepath.Join(dir, s.Name), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Put(context.Background(), prefix+walwriter.CheckpointFile, filepath.Join(dir, walwriter.CheckpointFile), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	want := records(t, dir)
	dst := t.TempDir()
	rep, err := walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := records(t, dst); !reflect.DeepEqual(got, want) || rep.WAL.CheckpointLSN != first {
		t.Fatalf("first layout: restored %d records with checkpoint %d, want %d with %d", len(got), rep.WAL.CheckpointLSN, len(want), first)
	}
	if _, err := walarchive.Restore(context.Background(), st, prefix, t.TempDir(), walarchive.RestoreOptions{At: first}); err != nil {
		t.Fatalf("first layout, at its checkpoint: %v", err)
	}

	w = openWAL(t, dir)
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour, RetainCheckpoints: 1})
	if err != nil {
		t.Fatal(err)
	}
	ckpts := checkpointRounds(t, w, a, "c", 3)
	w.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	newest := ckpts[len(ckpts)-1]
	if s := a.Stats(); s.Segments == 0 || s.DeletedSegments == 0 || s.Failures != 0 {
		t.Fatalf("stats %+v; want uploads and deletions", s)
	}
	all, err := walwriter.ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	floor := holderOf(all, newest)
	objs := objects(t, st, prefix)
	for _, s := range segs { // the first layout's
		if size := objs[s.Name]; size != 0 && s.First < floor.First {
			t.Errorf("first-layout segment %s: %d bytes left, want it emptied", s.Name, size)
		}
	}
	dst = t.TempDir()
	rep, err = walarchive.Restore(context.Background(), st, prefix, dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.WAL.CheckpointLSN != newest || !reflect.DeepEqual(recordsFrom(t, dst, newest), recordsFrom(t, dir, newest)) {
		t.Fatalf("restore after retention: checkpoint %d, want %d with the same records after it", rep.WAL.CheckpointLSN, newest)
	}
	if restored, _ := walwriter.ListSegments(dst); len(restored) == 0 || restored[0].Name != floor.Name {
		t.Fatalf("restored segments %v, want them from %s on", restored, floor.Name)
	}
}

// A restore that runs while retention deletes the oldest segments still
// succeeds: a segment gone before the restored checkpoint's is skipped
// with the ones before it.
func TestRestoreWhileRetentionDeletes(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ckpts := checkpointRounds(t, w, a, "d", 3)
	w.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	segs, err := walwriter.ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	newest := ckpts[len(ckpts)-1]
	// The second segment goes once the first is downloaded, as if
	// retention had run meanwhile.
	victim := segs[1]
	gone := &deletingStore{Store: st, after: segs[0].Name, del: strings.TrimSuffix(segmentKey(victim.Name), victim.Name)}
	dst := t.TempDir()
	rep, err := walarchive.Restore(context.Background(), gone, prefix, dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restored, _ := walwriter.ListSegments(dst)
	if len(restored) != len(segs)-2 || restored[0].Name != segs[2].Name || rep.WAL.CheckpointLSN != newest {
		t.Fatalf("restored %d segments from %s, checkpoint %d; want %d from %s, %d", len(restored), restored[0].Name, rep.WAL.CheckpointLSN, len(segs)-2, segs[2].Name, newest)
	}
	if _, err := os.Stat(filepath.Join(dst, segs[0].Name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment %s before the deleted one left in the restored WAL: %v", segs[0].Name, err)
	}
}

// deletingStore deletes prefix del once an object whose key ends in after
// has been read.
type deletingStore struct {
	store.Store
	after, del string
	once       sync.Once
}

func (d *deletingStore) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := d.Store.NewRangeReader(ctx, key, off, n)
	if err == nil && strings.HasSuffix(key, d.after) {
		d.once.Do(func() {
			if err := d.Store.DeletePrefix(ctx, d.del); err != nil {
				panic(err)
			}
		})
	}
	return rc, err
}

// A new archive with retention starts at the segment holding the WAL's
// checkpoint: the older segments would be deleted at once.
func TestArchiveRetentionNewArchiveStartsAtCheckpoint(t *testing.T) {
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	dir := t.TempDir()
	w := openWAL(t, dir)
	appendN(t, w, "a-", 2000)
	ckpt, err := w.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, w, "b-", 1000)
	w.Close()
	w = openWAL(t, dir) // every segment sealed
	defer w.Close()
	segs, _ := sealed(t, w)
	from := holderOf(segs, ckpt)
	if from.Name == segs[0].Name {
		t.Fatalf("checkpoint %d in the first segment: want older ones", ckpt)
	}
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: prefix, Interval: time.Hour, RetainCheckpoints: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, st, prefix)
	uploaded := 0
	for _, s := range segs {
		if _, ok := objs[s.Name]; ok != (s.First >= from.First) {
			t.Errorf("segment %s archived %v; want the segments from %s on", s.Name, ok, from.Name)
		}
		if s.First >= from.First {
			uploaded++
		}
	}
	if s := a.Stats(); s.Segments != uint64(uploaded) || s.DeletedSegments != 0 || s.LagSegments != 0 || s.CheckpointLSN != ckpt {
		t.Fatalf("stats %+v; want %d segments uploaded, none deleted, checkpoint %d", s, uploaded, ckpt)
	}
	if removed, err := w.RemoveObsoleteSegments(); err != nil || len(removed) == 0 {
		t.Fatalf("removed %v (%v) locally, want the segments before %s", removed, err, from.Name)
	}
}
