package walarchive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// WAL is walwriter.Verify's report of the restored directory.
	WAL walwriter.VerifyReport `json:"wal"`
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
// repair`) and the error names the damaged object.
func Restore(ctx context.Context, st store.Store, prefix, dir string) (RestoreReport, error) {
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
	if ckpt != nil {
		if _, err := walwriter.ParseCheckpointFile(ckpt); err != nil {
			return rep, fmt.Errorf("walarchive: restore from %s: object %s is damaged: %w", where, ckptKey, err)
		}
	}
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return rep, fmt.Errorf("walarchive: restore from %s: %w", where, err)
	}
	var segs []store.Object
	others := map[string]bool{}
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix)
		if _, ok := walwriter.ParseSegmentName(name); ok {
			segs = append(segs, o)
		} else if i := strings.LastIndex(name, "/"); i > 0 && isSegmentName(name[i+1:]) {
			others[prefix+name[:i+1]] = true // an archive deeper down
		}
	}
	if len(segs) == 0 {
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
	sort.Slice(segs, func(i, j int) bool { return segs[i].Key < segs[j].Key })

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rep, fmt.Errorf("walarchive: create %s: %w", dir, err)
	}
	var written []string
	fail := func(err error) (RestoreReport, error) {
		for _, p := range written {
			os.Remove(p)
		}
		return rep, fmt.Errorf("walarchive: restore from %s into %s (removed what it wrote): %w", where, dir, err)
	}
	for _, o := range segs {
		name := strings.TrimPrefix(o.Key, prefix)
		path := filepath.Join(dir, name)
		n, err := download(ctx, st, o.Key, path, o.Size)
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
	rep.WAL, err = walwriter.Verify(dir)
	if err != nil {
		var ce *walwriter.CorruptError
		if errors.As(err, &ce) {
			return rep, fmt.Errorf("%w: restored WAL in %s does not read: object %s of %s is damaged at offset %d: %s; the files are left in %s (`strata wal repair %s` cuts the damage)",
				walwriter.ErrCorrupt, dir, prefix+ce.Segment, st, ce.Offset, ce.Reason, dir, dir)
		}
		return rep, fmt.Errorf("walarchive: restored WAL in %s does not read: %w", dir, err)
	}
	return rep, nil
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
