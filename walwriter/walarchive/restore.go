package walarchive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/fsutil"
	"github.com/strata-db/strata/walwriter"
)

// RestoreReport says what Restore downloaded and what reading it found.
//
// Its JSON form (strata wal restore --json) has snake_case keys, as every
// report of the strata CLI.
type RestoreReport struct {
	Segments   int   `json:"segments"`   // segment objects downloaded
	Bytes      int64 `json:"bytes"`      // bytes downloaded, checkpoint file included
	Checkpoint bool  `json:"checkpoint"` // the archive had a checkpoint file
	// Checkpoints are the LSNs of the checkpoints the archive holds,
	// oldest first: what RestoreOptions.At may name.
	Checkpoints []walwriter.LSN `json:"archived_checkpoints"`
	// WAL is walwriter.Verify's report of the restored directory.
	WAL walwriter.VerifyReport `json:"wal"`
}

// RestoreOptions modify Restore.
type RestoreOptions struct {
	// At restores the WAL as it was at the archived checkpoint with this
	// LSN: its checkpoint file, and the segments up to the one holding
	// the checkpoint record, cut after that record. 0 restores the newest
	// checkpoint and every segment.
	At walwriter.LSN
}

// ErrNotEmpty is wrapped by Restore's error for a directory that holds a
// WAL already.
var ErrNotEmpty = errors.New("walarchive: directory holds a WAL")

// Restore downloads the archive under prefix of st ("" or ending in "/")
// into dir, which must not hold a WAL (it is created if missing), and reads
// the restored WAL end to end with walwriter.Verify. Each file is written
// under a temporary name, synced and renamed, and the directory synced;
// the checkpoint file comes last. A failed download removes what it wrote;
// a restored WAL that does not read is left in dir (for `strata wal
// repair`) and the error names the damaged object. Archives of both
// layouts are read (see "Format" in the package doc).
func Restore(ctx context.Context, st store.Store, prefix, dir string, opts RestoreOptions) (RestoreReport, error) {
	var rep RestoreReport
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return rep, fmt.Errorf("walarchive: prefix %q: want a key prefix ending in \"/\"", prefix)
	}
	if what, err := holdsWAL(dir); err != nil {
		return rep, err
	} else if what != "" {
		return rep, fmt.Errorf("%w: %s holds %s: restore into an empty or new directory", ErrNotEmpty, dir, what)
	}
	where := st.String()
	if prefix != "" {
		where += " under " + prefix
	}
	// The checkpoint file before the listing: the archiver uploads it
	// after the segment holding its record, so that segment is listed.
	ckptKey := prefix + walwriter.CheckpointFile
	ckpt, err := store.ReadAll(ctx, st, ckptKey)
	if errors.Is(err, store.ErrNotExist) {
		ckpt, err = nil, nil
	}
	if err != nil {
		return rep, fmt.Errorf("walarchive: restore from %s: %w", where, err)
	}
	var latest walwriter.LSN
	if ckpt != nil {
		if latest, err = walwriter.ParseCheckpointFile(ckpt); err != nil {
			return rep, fmt.Errorf("walarchive: restore from %s: object %s is damaged: %w", where, ckptKey, err)
		}
	}
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return rep, fmt.Errorf("walarchive: restore from %s: %w", where, err)
	}
	bySeg := map[string]store.Object{}
	var emptied []store.Object
	copies := map[walwriter.LSN]string{}
	others := map[string]bool{}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix)
		switch k := parseKey(name); k.kind {
		case segmentObj, flatSegmentObj:
			if o.Size == 0 {
				emptied = append(emptied, o) // a first-layout segment retention emptied
			} else if old, ok := bySeg[k.segment]; !ok || parseKey(strings.TrimPrefix(old.Key, prefix)).kind == flatSegmentObj {
				bySeg[k.segment] = o
			}
		case checkpointObj:
			copies[k.lsn] = o.Key
		default:
			if root := archiveRoot(name); root != "" {
				others[prefix+root] = true // an archive deeper down
			}
		}
	}
	if len(bySeg) == 0 {
		msg := fmt.Sprintf("walarchive: no archived WAL segments in %s", where)
		if len(others) > 0 {
			var ps []string
			for p := range others {
				ps = append(ps, p)
			}
			sort.Strings(ps)
			msg += fmt.Sprintf(" (archives under it: %s; give one as the prefix)", strings.Join(ps, ", "))
		}
		return rep, errors.New(msg)
	}
	names := make([]string, 0, len(bySeg))
	for n := range bySeg {
		names = append(names, n)
	}
	sort.Strings(names) // 20 digits: LSN order
	for _, o := range emptied {
		if n := parseKey(strings.TrimPrefix(o.Key, prefix)).segment; n > names[0] {
			if _, ok := bySeg[n]; !ok {
				return rep, fmt.Errorf("%w: restore from %s: object %s is empty, after segment %s", walwriter.ErrCorrupt, where, o.Key, names[0])
			}
		}
	}
	for l := range copies {
		rep.Checkpoints = append(rep.Checkpoints, l)
	}
	if latest != 0 && copies[latest] == "" {
		rep.Checkpoints = append(rep.Checkpoints, latest) // the first layout's
	}
	slices.Sort(rep.Checkpoints)

	// The checkpoint to restore: the newest, or the one asked for.
	want := latest
	if opts.At != 0 {
		want = opts.At
	} else if n := len(rep.Checkpoints); n > 0 {
		want = rep.Checkpoints[n-1] // a copy newer than CHECKPOINT: its put was cut short
	}
	if want != 0 && want != latest {
		key, ok := copies[want]
		if !ok {
			return rep, fmt.Errorf("walarchive: restore from %s: no checkpoint at LSN %d in the archive; it holds %s", where, want, lsnList(rep.Checkpoints))
		}
		if ckpt, err = store.ReadAll(ctx, st, key); err != nil {
			return rep, fmt.Errorf("walarchive: restore from %s: %w", where, err)
		}
		if lsn, err := walwriter.ParseCheckpointFile(ckpt); err != nil || lsn != want {
			return rep, fmt.Errorf("%w: restore from %s: object %s is damaged (checkpoint LSN %d, %v)", walwriter.ErrCorrupt, where, key, lsn, err)
		}
	}
	// The segment holding the checkpoint record, and what is downloaded.
	holder := -1
	for i, n := range names {
		if first, _ := walwriter.ParseSegmentName(n); want != 0 && first <= want {
			holder = i
		}
	}
	if want != 0 && holder < 0 {
		return rep, fmt.Errorf("walarchive: restore from %s: the archive holds no segment with the record of checkpoint %d (its first is %s)", where, want, names[0])
	}
	if opts.At != 0 {
		names = names[:holder+1]
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rep, fmt.Errorf("walarchive: create %s: %w", dir, err)
	}
	var written []string
	removeWritten := func() {
		for _, p := range written {
			os.Remove(p)
		}
		written = nil
	}
	fail := func(err error) (RestoreReport, error) {
		removeWritten()
		return rep, fmt.Errorf("walarchive: restore from %s into %s (removed what it wrote): %w", where, dir, err)
	}
	for i, name := range names {
		o := bySeg[name]
		path := filepath.Join(dir, name)
		n, err := download(ctx, st, o.Key, path, o.Size)
		if err != nil && i < holder && gone(ctx, st, o.Key) {
			// Retention deleted it since the listing, oldest first: what
			// was downloaded before it goes too, and the checkpoint's
			// segment and those after it are still there.
			removeWritten()
			rep.Segments, rep.Bytes = 0, 0
			continue
		}
		if err != nil {
			return fail(err)
		}
		written = append(written, path)
		rep.Segments++
		rep.Bytes += n
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return fail(err)
	}
	if ckpt != nil {
		path := filepath.Join(dir, walwriter.CheckpointFile)
		if err := fsutil.WriteFile(path, ckpt); err != nil {
			return fail(err)
		}
		written = append(written, path)
		if err := fsutil.SyncDir(dir); err != nil {
			return fail(err)
		}
		rep.Checkpoint = true
		rep.Bytes += int64(len(ckpt))
	}
	if opts.At != 0 {
		if err := cutAfter(dir, want); err != nil {
			return rep, fmt.Errorf("walarchive: restored WAL in %s: %w", dir, err)
		}
	}
	rep.WAL, err = walwriter.Verify(dir)
	if err != nil {
		var ce *walwriter.CorruptError
		if errors.As(err, &ce) {
			return rep, fmt.Errorf("%w: restored WAL in %s does not read: object %s of %s is damaged at offset %d: %s; the files are left in %s (`strata wal repair %s` cuts the damage)",
				walwriter.ErrCorrupt, dir, objectOf(bySeg, ce.Segment, prefix), st, ce.Offset, ce.Reason, dir, dir)
		}
		return rep, fmt.Errorf("walarchive: restored WAL in %s does not read: %w", dir, err)
	}
	return rep, nil
}

// objectOf names the object a restored file came from.
func objectOf(bySeg map[string]store.Object, file, prefix string) string {
	if o, ok := bySeg[file]; ok {
		return o.Key
	}
	return prefix + file
}

// gone reports whether the object at key was deleted, or emptied, since
// it was listed.
func gone(ctx context.Context, st store.Store, key string) bool {
	o, err := st.Stat(ctx, key)
	return errors.Is(err, store.ErrNotExist) || (err == nil && o.Size == 0)
}

// cutAfter cuts the restored WAL in dir after the checkpoint record at lsn:
// the WAL as it was at that checkpoint.
func cutAfter(dir string, lsn walwriter.LSN) error {
	r, err := walwriter.NewReader(dir, lsn)
	if err != nil {
		return err
	}
	rec, err := r.Next()
	r.Close()
	if err != nil {
		return fmt.Errorf("read checkpoint record %d: %w", lsn, err)
	}
	if rec.LSN != lsn || rec.Kind != walwriter.KindCheckpoint {
		return fmt.Errorf("%w: record %d of segment %s is not the checkpoint the archive names", walwriter.ErrCorrupt, rec.LSN, rec.Segment)
	}
	f, err := os.OpenFile(filepath.Join(dir, rec.Segment), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(rec.Offset + int64(rec.Size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cut segment %s after checkpoint %d: %w", rec.Segment, lsn, err)
	}
	return nil
}

// lsnList renders LSNs for an error: "none" or "1, 2, 3".
func lsnList(lsns []walwriter.LSN) string {
	if len(lsns) == 0 {
		return "none"
	}
	s := make([]string, len(lsns))
	for i, l := range lsns {
		s[i] = fmt.Sprint(l)
	}
	return strings.Join(s, ", ")
}

// holdsWAL describes the WAL files in dir, "" for none (or no dir).
func holdsWAL(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("walarchive: read %s: %w", dir, err)
	}
	segs, other := 0, ""
	for _, e := range entries {
		n := e.Name()
		switch {
		case isSegmentName(n):
			segs++
		case n == walwriter.CheckpointFile || strings.HasSuffix(n, ".broken"):
			if other == "" {
				other = n
			}
		}
	}
	switch {
	case segs > 0:
		return fmt.Sprintf("a WAL (%d segments)", segs), nil
	case other != "":
		return fmt.Sprintf("a WAL's %s", other), nil
	}
	return "", nil
}

func isSegmentName(n string) bool {
	_, ok := walwriter.ParseSegmentName(n)
	return ok
}

// download writes the object at key, size bytes long by the listing, to
// path: under a temporary name, synced, then renamed.
func download(ctx context.Context, st store.Store, key, path string, size int64) (int64, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", key, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	rc, err := st.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return 0, fmt.Errorf("download %s: %w", key, err)
	}
	n, err := io.Copy(f, rc)
	rc.Close()
	if err != nil {
		return n, fmt.Errorf("download %s: after %d bytes: %w", key, n, err)
	}
	if n != size {
		return n, fmt.Errorf("download %s: got %d bytes, listed as %d: object truncated or changed", key, n, size)
	}
	if err := f.Sync(); err != nil {
		return n, fmt.Errorf("download %s: sync %s: %w", key, tmp, err)
	}
	if err := f.Close(); err != nil {
		return n, fmt.Errorf("download %s: close %s: %w", key, tmp, err)
	}
	done = true
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("download %s: %w", key, err)
	}
	return n, nil
}
