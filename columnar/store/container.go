package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/fsutil"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ContainerPrefix is the key prefix of a container: <table>/<projection>/<id>/.
func ContainerPrefix(table, projection, id string) string {
	return Join(table, projection, id) + "/"
}

// ReadManifest reads and decodes the manifest of a committed container
// in st (Committed without the prefix). A container with no commit
// (never uploaded, or not finished) gives an error wrapping
// columnar.ErrNotFound.
func ReadManifest(ctx context.Context, st Store, table, projection, id string) (*columnar.Manifest, error) {
	m, _, err := Committed(ctx, st, table, projection, id)
	return m, err
}

// MaxCheckReads is the most ranged reads of headers one Check has in
// flight. A container's files are checked in parallel, this many at a
// time, so a check costs about its files / MaxCheckReads round trips
// rather than one per file. A caller checking several containers at once
// multiplies it: 8 Checks at once have at most 128 reads in flight.
const MaxCheckReads = 16

// Check is the cheap check of a committed container in st, as
// columnar.DataDir.Check is of one on disk: the manifest decodes and names
// this table, projection and ID, and every column file has the manifest's
// size and header checksum.
//
// Its requests are bounded: the commit and the manifest are read
// (Committed), the sizes of the files come from one listing of the
// committed attempt's prefix (a file the listing leaves out, as a listing
// lagging its writes may, is looked up alone before it is called
// missing), then each file's header is read with one ranged read, at most
// MaxCheckReads of them in flight at once. A missing file, one of another
// size and a header that fails its CRC-32C give a *columnar.CorruptError
// naming the container and the file (the first such file in the
// manifest's order of those seen); a container not in st wraps
// columnar.ErrNotFound. Check is safe to call from several goroutines at
// once, as every Store is.
func Check(ctx context.Context, st Store, table, projection, id string) (*columnar.Manifest, error) {
	m, prefix, err := Committed(ctx, st, table, projection, id)
	if err != nil {
		return nil, err
	}
	where := st.String() + "/" + Join(table, projection, id)
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	sizes := make(map[string]int64, len(objs))
	for _, o := range objs {
		sizes[o.Key] = o.Size
	}
	for i := range m.Files {
		fm := &m.Files[i]
		if err := checkKey(fm.Name, false); err != nil {
			return nil, checkCorrupt(where, fm, err, "file name")
		}
		size, ok := sizes[prefix+fm.Name]
		if !ok {
			obj, err := st.Stat(ctx, prefix+fm.Name)
			if errors.Is(err, ErrNotExist) {
				return nil, checkCorrupt(where, fm, nil, "missing")
			}
			if err != nil {
				return nil, err
			}
			size = obj.Size
		}
		if size != fm.Size {
			return nil, checkCorrupt(where, fm, nil, "object is %d bytes, manifest says %d", size, fm.Size)
		}
		if fm.HeaderLen <= 0 || fm.HeaderLen > fm.Size {
			return nil, checkCorrupt(where, fm, nil, "header length %d out of range", fm.HeaderLen)
		}
	}
	if err := checkHeaders(ctx, st, where, prefix, m.Files); err != nil {
		return nil, err
	}
	return m, nil
}

// checkHeaders reads the header of each of files (under prefix) and
// compares its CRC-32C with the manifest's, MaxCheckReads at a time. The
// first failure stops the reads not yet made; of the failures seen, the
// one of the first file in files is returned.
func checkHeaders(ctx context.Context, st Store, where, prefix string, files []columnar.FileMeta) error {
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		errs  = make([]error, len(files))
		mu    sync.Mutex
		first error // the failure that stopped the others
		wg    sync.WaitGroup
	)
	for range min(MaxCheckReads, len(files)) {
		wg.Go(func() {
			for readCtx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(files) {
					return
				}
				if err := checkHeader(readCtx, st, where, prefix, &files[i]); err != nil {
					errs[i] = err
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		return ctx.Err()
	}
	for _, err := range errs {
		// A read cut short by the cancel that another's failure made is
		// no failure of its own.
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.Canceled)) {
			return err
		}
	}
	return first
}

// checkHeader reads one file's header and checks its CRC-32C.
func checkHeader(ctx context.Context, st Store, where, prefix string, fm *columnar.FileMeta) error {
	r, err := st.NewRangeReader(ctx, prefix+fm.Name, 0, fm.HeaderLen)
	if errors.Is(err, ErrNotExist) {
		return checkCorrupt(where, fm, nil, "missing")
	}
	if err != nil {
		return err
	}
	header := make([]byte, fm.HeaderLen)
	_, err = io.ReadFull(r, header)
	r.Close()
	if err != nil {
		return fmt.Errorf("check %s/%s: %w", where, fm.Name, err)
	}
	if got := crc32.Checksum(header, castagnoli); got != fm.HeaderCRC {
		return checkCorrupt(where, fm, nil, "header checksum %08x, manifest says %08x", got, fm.HeaderCRC)
	}
	return nil
}

// checkCorrupt is Check's error for a file of container where.
func checkCorrupt(where string, fm *columnar.FileMeta, err error, format string, args ...any) error {
	return &columnar.CorruptError{Container: where, File: fm.Name, Block: columnar.NoBlock, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Upload puts the committed local container in dir into st as
// table/projection/id. It writes the column files and a copy of the
// manifest under a prefix of their own, a fresh attempt
// (<table>/<projection>/<id>/<attempt>/), then commits by putting the
// object naming the attempt (CommitName), only if absent: the first of two
// uploads of one container to commit wins, and the loser's files, under
// its own attempt, never touch the winner's. It returns the manifest
// committed in st. If another upload committed the container first, the
// loser's attempt is deleted, the error wraps columnar.ErrExists and the
// manifest returned is the winner's. An attempt an error leaves behind
// is deleted when it can be, or else by RemoveUncommitted.
func Upload(ctx context.Context, st Store, dir, table, projection, id string) (*columnar.Manifest, error) {
	m, err := columnar.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if m.Table != table || m.Projection != projection || m.ID != id {
		return nil, fmt.Errorf("upload %s: manifest names %s/%s/%s, not %s/%s/%s", dir, m.Table, m.Projection, m.ID, table, projection, id)
	}
	theirs, err := ReadManifest(ctx, st, table, projection, id)
	if err == nil {
		return theirs, fmt.Errorf("upload %s/%s/%s to %s: %w", table, projection, id, st, columnar.ErrExists)
	}
	if !errors.Is(err, columnar.ErrNotFound) {
		return nil, err
	}
	for _, fm := range m.Files {
		if err := checkKey(fm.Name, false); err != nil || strings.Contains(fm.Name, "/") {
			return nil, fmt.Errorf("upload %s: file %q: %w", dir, fm.Name, ErrInvalidKey)
		}
	}
	attempt, err := newAttempt()
	if err != nil {
		return nil, err
	}
	prefix := ContainerPrefix(table, projection, id) + attempt + "/"
	abandon := func(err error) (*columnar.Manifest, error) {
		// Best effort: what is left is an attempt no commit names, which
		// the orphan sweep deletes after its grace period.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
		defer cancel()
		st.DeletePrefix(dctx, prefix)
		return nil, err
	}
	names := make([]string, 0, len(m.Files)+1)
	for _, fm := range m.Files {
		names = append(names, fm.Name)
	}
	for _, name := range append(names, columnar.ManifestName) {
		if err := st.Put(ctx, prefix+name, filepath.Join(dir, name), PutOptions{}); err != nil {
			return abandon(err)
		}
	}
	err = putCommit(ctx, st, table, projection, id, attempt)
	if errors.Is(err, ErrExists) {
		abandon(nil)
		theirs, err := ReadManifest(ctx, st, table, projection, id)
		if err != nil {
			return nil, err
		}
		return theirs, fmt.Errorf("upload %s/%s/%s to %s: %w", table, projection, id, st, columnar.ErrExists)
	}
	if err != nil {
		// The commit may have landed: the attempt stays, and a retry
		// finds it committed.
		return nil, err
	}
	return m, nil
}

// abandonTimeout bounds the deletion of an attempt that did not commit.
const abandonTimeout = 10 * time.Second

// Fetch downloads the committed container table/projection/id from st
// into the local directory dst, which must not exist, with the atomic
// commit of a container writer: the files go into a temporary directory
// beside dst (".<id>.fetch-<random>"), each checked against the
// manifest's size and CRC-32C and synced, the manifest last, then the
// directory is renamed to dst. It returns the manifest and the bytes read
// from st. A container not in st wraps columnar.ErrNotFound; a file that
// fails its checksum gives a *columnar.CorruptError.
func Fetch(ctx context.Context, st Store, table, projection, id, dst string) (*columnar.Manifest, int64, error) {
	m, prefix, manifest, err := committed(ctx, st, table, projection, id)
	if err != nil {
		return nil, 0, err
	}
	where := st.String() + "/" + Join(table, projection, id)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, 0, fmt.Errorf("fetch %s: %w", where, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".fetch-")
	if err != nil {
		return nil, 0, fmt.Errorf("fetch %s: %w", where, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	fetched := int64(len(manifest))
	for _, fm := range m.Files {
		if err := checkKey(fm.Name, false); err != nil || filepath.Base(fm.Name) != fm.Name {
			return nil, fetched, &columnar.CorruptError{Container: where, File: fm.Name, Block: columnar.NoBlock, Reason: "file name", Err: err}
		}
		n, err := fetchFile(ctx, st, prefix+fm.Name, filepath.Join(tmp, fm.Name), fm.Size, fm.CRC)
		fetched += n
		if err != nil {
			var ce *columnar.CorruptError
			if errors.As(err, &ce) {
				ce.Container, ce.File = where, fm.Name
			}
			return nil, fetched, err
		}
	}
	if err := fsutil.WriteFile(filepath.Join(tmp, columnar.ManifestName), manifest); err != nil {
		return nil, fetched, fmt.Errorf("fetch %s: %w", where, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(filepath.Join(dst, columnar.ManifestName)); serr == nil {
			return nil, fetched, fmt.Errorf("fetch %s into %s: %w", where, dst, columnar.ErrExists)
		}
		return nil, fetched, fmt.Errorf("fetch %s into %s: %w", where, dst, err)
	}
	ok = true
	return m, fetched, nil
}

// fetchFile copies one object to path, checking its size and CRC-32C.
func fetchFile(ctx context.Context, st Store, key, path string, size int64, crc uint32) (int64, error) {
	r, err := st.NewRangeReader(ctx, key, 0, -1)
	if errors.Is(err, ErrNotExist) {
		return 0, &columnar.CorruptError{Block: columnar.NoBlock, Reason: "missing from the store", Err: err}
	}
	if err != nil {
		return 0, err
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(readerWithContext{ctx, r}, size+1))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("fetch %s from %s: %w", key, st, err)
	}
	if n != size {
		return n, &columnar.CorruptError{Block: columnar.NoBlock, Reason: fmt.Sprintf("object is %d bytes, manifest says %d", n, size)}
	}
	if got := h.Sum32(); got != crc {
		return n, &columnar.CorruptError{Block: columnar.NoBlock, Reason: fmt.Sprintf("checksum %08x, manifest says %08x", got, crc)}
	}
	return n, nil
}

// Remove deletes a container's whole prefix from st (its commit before its
// attempts where the store deletes in reverse key order); a missing one is
// not an error.
func Remove(ctx context.Context, st Store, table, projection, id string) error {
	return st.DeletePrefix(ctx, ContainerPrefix(table, projection, id))
}

// Prefixes groups a listing of <table>/<projection>/ by the next key
// element (a container ID, committed or not) and gives each the newest
// modification time under it: the scheduler's orphan sweep sees a
// projection of a store as it sees a directory.
func Prefixes(objs []Object, prefix string) []Entry {
	var out []Entry
	for _, o := range objs {
		rest := o.Key[len(prefix):]
		name := rest
		for i := 0; i < len(rest); i++ {
			if rest[i] == '/' {
				name = rest[:i]
				break
			}
		}
		if name == rest {
			continue // an object directly under the prefix, not a container
		}
		if n := len(out); n > 0 && out[n-1].Name == name {
			if o.Modified.After(out[n-1].Modified) {
				out[n-1].Modified = o.Modified
			}
			out[n-1].Size += o.Size
			continue
		}
		out = append(out, Entry{Name: name, Modified: o.Modified, Size: o.Size})
	}
	return out
}

// Entry is one key prefix of a listing: a container's ID, the newest
// modification time of its objects and their total size.
type Entry struct {
	Name     string
	Modified time.Time
	Size     int64
}
