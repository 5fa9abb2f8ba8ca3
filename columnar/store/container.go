package store

import (
	"bytes"
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
// time, so a check costs about its reads / MaxCheckReads round trips
// rather than one per read. A caller checking several containers at once
// multiplies it: 8 Checks at once have at most 128 reads in flight.
const MaxCheckReads = 16

// Check reads of a pack: headers of column files closer than checkGap
// bytes are read together, up to checkReadBytes a read, so a container
// of small column files is checked in a few reads rather than one per
// file (and the files a read holds whole are checked whole).
const (
	checkGap       = 256 << 10
	checkReadBytes = 4 << 20
)

// Check is the cheap check of a committed container in st, as
// columnar.DataDir.Check is of one on disk: the manifest decodes and names
// this table, projection and ID, and every column file has the manifest's
// size and header checksum.
//
// Its requests are bounded. The commit and the manifest are read
// (Resolve). In a pack, the object's size comes from one Stat and must be
// the end of its last column file, then the column files' headers are
// read, those closer than 256KiB together in one read of up to 4MiB, and
// a file such a read holds whole is checked against its whole CRC-32C.
// In the layout of an object per file, the sizes of the files come from
// one listing of the committed attempt's prefix (a file the listing
// leaves out, as a listing lagging its writes may, is looked up alone
// before it is called missing), then each file's header is read with one
// ranged read. At most MaxCheckReads reads are in flight at once. A
// missing file, one of another size, a pack cut short and a header that
// fails its CRC-32C give a *columnar.CorruptError naming the container
// and the file (the first such file in the manifest's order of those
// seen); a container not in st wraps columnar.ErrNotFound. Check is safe
// to call from several goroutines at once, as every Store is.
func Check(ctx context.Context, st Store, table, projection, id string) (*columnar.Manifest, error) {
	c, err := Resolve(ctx, st, table, projection, id)
	if err != nil {
		return nil, err
	}
	m, where, prefix := c.Manifest, c.where, c.Prefix
	for i := range m.Files {
		fm := &m.Files[i]
		if err := checkKey(fm.Name, false); err != nil {
			return nil, checkCorrupt(where, fm, err, "file name")
		}
		if fm.HeaderLen <= 0 || fm.HeaderLen > fm.Size {
			return nil, checkCorrupt(where, fm, nil, "header length %d out of range", fm.HeaderLen)
		}
	}
	if c.Pack != "" {
		obj, err := st.Stat(ctx, c.Pack)
		if errors.Is(err, ErrNotExist) {
			return nil, &columnar.CorruptError{Container: where, File: PackName, Block: columnar.NoBlock, Reason: "missing", Err: err}
		}
		if err != nil {
			return nil, err
		}
		if obj.Size != c.PackSize {
			// Name the first column file the object does not hold whole.
			for i, fm := range m.Files {
				if _, off := c.File(i); off+fm.Size > obj.Size {
					return nil, checkCorrupt(where, &m.Files[i], nil, "pack %s is %d bytes, the file ends at %d", PackName, obj.Size, off+fm.Size)
				}
			}
			return nil, &columnar.CorruptError{Container: where, File: PackName, Block: columnar.NoBlock, Reason: fmt.Sprintf("%d bytes, its head says %d", obj.Size, c.PackSize)}
		}
		if c.headInCommit {
			if err := checkPackHead(ctx, st, c); err != nil {
				return nil, err
			}
		}
		if err := checkHeaders(ctx, st, where, c.checkReads(), m.Files); err != nil {
			return nil, err
		}
		return m, nil
	}
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
	}
	if err := checkHeaders(ctx, st, where, c.checkReads(), m.Files); err != nil {
		return nil, err
	}
	return m, nil
}

// checkPackHead checks that c's pack begins with the head its commit
// holds, which readers take instead of the pack's own.
func checkPackHead(ctx context.Context, st Store, c *Container) error {
	head, err := readRange(ctx, st, c.Pack, 0, int64(len(c.head)))
	if errors.Is(err, ErrNotExist) {
		return &columnar.CorruptError{Container: c.where, File: PackName, Block: columnar.NoBlock, Reason: "missing", Err: err}
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(head, c.head) {
		return &columnar.CorruptError{Container: c.where, File: PackName, Block: columnar.NoBlock, Reason: "its head is not the one its commit holds"}
	}
	return nil
}

// checkRead is one ranged read of Check: the range [off, off+n) of key,
// holding the headers of column files first to last.
type checkRead struct {
	key         string
	off, n      int64
	first, last int
	starts      []int64 // of files first to last, in the object
}

// checkReads returns Check's reads of the headers of c's column files:
// one a file, or in a pack one for the headers close together.
func (c *Container) checkReads() []checkRead {
	var out []checkRead
	for i, fm := range c.Manifest.Files {
		key, off := c.File(i)
		if n := len(out); n > 0 && c.Pack != "" {
			r := &out[n-1]
			if off >= r.off+r.n && off-(r.off+r.n) <= checkGap && off+fm.HeaderLen-r.off <= checkReadBytes {
				r.n = off + fm.HeaderLen - r.off
				r.last = i
				r.starts = append(r.starts, off)
				continue
			}
		}
		out = append(out, checkRead{key: key, off: off, n: fm.HeaderLen, first: i, last: i, starts: []int64{off}})
	}
	// A read that reaches into the next file's header holds the file
	// before it whole: extend the last one to its end too where that is
	// close.
	for i := range out {
		r := &out[i]
		if c.Pack == "" {
			continue
		}
		_, off := c.File(r.last)
		if end := off + c.Manifest.Files[r.last].Size; end-(r.off+r.n) <= checkGap && end-r.off <= checkReadBytes {
			r.n = end - r.off
		}
	}
	return out
}

// checkHeaders makes reads, MaxCheckReads at a time, and compares the
// header of each file they hold (and the whole file where a read holds
// it whole) with the manifest's CRC-32C. The first failure stops the
// reads not yet made; of the failures seen, the one of the first file in
// files is returned.
func checkHeaders(ctx context.Context, st Store, where string, reads []checkRead, files []columnar.FileMeta) error {
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		errs  = make([]error, len(reads))
		mu    sync.Mutex
		first error // the failure that stopped the others
		wg    sync.WaitGroup
	)
	for range min(MaxCheckReads, len(reads)) {
		wg.Go(func() {
			for readCtx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(reads) {
					return
				}
				if err := checkRead1(readCtx, st, where, reads[i], files); err != nil {
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

// checkRead1 makes one read of Check and checks the headers it holds.
func checkRead1(ctx context.Context, st Store, where string, cr checkRead, files []columnar.FileMeta) error {
	r, err := st.NewRangeReader(ctx, cr.key, cr.off, cr.n)
	if errors.Is(err, ErrNotExist) {
		return checkCorrupt(where, &files[cr.first], nil, "missing")
	}
	if err != nil {
		return err
	}
	data := make([]byte, cr.n)
	n, err := io.ReadFull(r, data)
	r.Close()
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil // a file it does not hold is named below
	}
	if err != nil {
		return fmt.Errorf("check %s/%s: %w", where, files[cr.first].Name, err)
	}
	data = data[:n]
	for i := cr.first; i <= cr.last; i++ {
		fm := &files[i]
		start := cr.starts[i-cr.first] - cr.off
		if start+fm.HeaderLen > int64(len(data)) {
			return checkCorrupt(where, fm, nil, "cut short: %d bytes of its header read", max(0, int64(len(data))-start))
		}
		if got := crc32.Checksum(data[start:start+fm.HeaderLen], castagnoli); got != fm.HeaderCRC {
			return checkCorrupt(where, fm, nil, "header checksum %08x, manifest says %08x", got, fm.HeaderCRC)
		}
		if start+fm.Size <= int64(len(data)) {
			if got := crc32.Checksum(data[start:start+fm.Size], castagnoli); got != fm.CRC {
				return checkCorrupt(where, fm, nil, "checksum %08x, manifest says %08x", got, fm.CRC)
			}
		}
	}
	return nil
}

// checkCorrupt is Check's error for a file of container where.
func checkCorrupt(where string, fm *columnar.FileMeta, err error, format string, args ...any) error {
	return &columnar.CorruptError{Container: where, File: fm.Name, Block: columnar.NoBlock, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Upload puts the committed local container in dir into st as
// table/projection/id. It writes the container as one object, its pack
// (PackName: the manifest, an index and the column files back to back),
// under a prefix of its own, a fresh attempt
// (<table>/<projection>/<id>/<attempt>/), then commits by putting the
// object naming the attempt (CommitName), only if absent: the first of two
// uploads of one container to commit wins, and the loser's pack, under
// its own attempt, never touches the winner's. Each column file is
// checked against the manifest's size and CRC-32C as it is streamed into
// the pack: a local file that is not what the manifest says fails the
// upload, and nothing is committed. It returns the manifest committed in
// st. If another upload committed the container first, the loser's
// attempt is deleted, the error wraps columnar.ErrExists and the manifest
// returned is the winner's. An attempt an error leaves behind is deleted
// when it can be, or else by RemoveUncommitted.
func Upload(ctx context.Context, st Store, dir, table, projection, id string) (*columnar.Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, columnar.ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("upload %s: no manifest: %w", dir, columnar.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", dir, err)
	}
	m, err := columnar.DecodeManifest(data)
	if err != nil {
		return nil, &columnar.CorruptError{Container: dir, File: columnar.ManifestName, Block: columnar.NoBlock, Reason: "invalid manifest", Err: err}
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
	if len(data) > packMaxManifest || len(m.Files) > packMaxColumns {
		return nil, fmt.Errorf("upload %s: %d manifest bytes and %d column files, more than a pack holds", dir, len(data), len(m.Files))
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
	head, _, size := encodePackHead(m, data)
	pr := newPackReader(dir, m, head)
	err = st.PutReader(ctx, prefix+PackName, pr, PutOptions{Size: size})
	pr.Close()
	if err != nil {
		return abandon(err)
	}
	err = putCommit(ctx, st, table, projection, id, attempt, head)
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
// directory is renamed to dst. A pack's column files are read with one
// ranged read, an object per file with one read each. It returns the
// manifest and the bytes read from st. A container not in st wraps
// columnar.ErrNotFound; a file that fails its checksum, or that a pack
// cut short does not hold whole, gives a *columnar.CorruptError naming
// the container, the file and, where there is one, the block.
func Fetch(ctx context.Context, st Store, table, projection, id, dst string) (*columnar.Manifest, int64, error) {
	c, err := Resolve(ctx, st, table, projection, id)
	if err != nil {
		return nil, 0, err
	}
	m, where := c.Manifest, c.where
	fetched := int64(len(c.manifest))
	if c.Pack != "" {
		fetched = int64(len(c.head))
	}
	all := make([]int, len(m.Files))
	for i, fm := range m.Files {
		if err := checkKey(fm.Name, false); err != nil || filepath.Base(fm.Name) != fm.Name {
			return nil, fetched, &columnar.CorruptError{Container: where, File: fm.Name, Block: columnar.NoBlock, Reason: "file name", Err: err}
		}
		all[i] = i
	}
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
	for _, r := range c.Ranges(all, 0) {
		n, err := fetchRange(ctx, st, c, r, tmp)
		fetched += n
		if err != nil {
			return nil, fetched, err
		}
	}
	if err := fsutil.WriteFile(filepath.Join(tmp, columnar.ManifestName), c.manifest); err != nil {
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

// fetchRange copies the column files of one read into dir, checking each
// one's size and CRC-32C.
func fetchRange(ctx context.Context, st Store, c *Container, rg Range, dir string) (int64, error) {
	length := rg.Len
	if c.Pack == "" {
		length = -1 // the whole object: one longer than its manifest says is found
	}
	r, err := st.NewRangeReader(ctx, rg.Key, rg.Off, length)
	if errors.Is(err, ErrNotExist) {
		return 0, &columnar.CorruptError{Container: c.where, File: c.Manifest.Files[rg.First].Name, Block: columnar.NoBlock, Reason: "missing from the store", Err: err}
	}
	if err != nil {
		return 0, err
	}
	defer r.Close()
	in := readerWithContext{ctx, r}
	var fetched int64
	for i := rg.First; i <= rg.Last; i++ {
		fm := &c.Manifest.Files[i]
		limit := fm.Size
		if c.Pack == "" {
			limit++
		}
		path := filepath.Join(dir, fm.Name)
		n, crc, err := fetchFile(in, path, limit)
		fetched += n
		if err != nil {
			return fetched, fmt.Errorf("fetch %s of %s from %s: %w", fm.Name, c.where, st, err)
		}
		switch {
		case n < fm.Size && c.Pack != "":
			return fetched, c.Corrupt(i, n, fmt.Sprintf("pack cut short: %d of the file's %d bytes there", n, fm.Size), nil)
		case n != fm.Size:
			return fetched, &columnar.CorruptError{Container: c.where, File: fm.Name, Block: columnar.NoBlock, Reason: fmt.Sprintf("object is %d bytes, manifest says %d", n, fm.Size)}
		case crc != fm.CRC:
			return fetched, damagedFile(c, i, path, crc)
		}
	}
	return fetched, nil
}

// fetchFile copies up to limit bytes of in to a new file at path, synced,
// and returns the bytes copied and their CRC-32C.
func fetchFile(in io.Reader, path string, limit int64) (int64, uint32, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, 0, err
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(in, limit))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, h.Sum32(), err
}

// damagedFile is the error for column file i of c, fetched into path,
// whose CRC-32C is crc, not the manifest's: it names the first of the
// header and blocks that fails its own checksum.
func damagedFile(c *Container, i int, path string, crc uint32) error {
	fm := &c.Manifest.Files[i]
	reason := fmt.Sprintf("checksum %08x, manifest says %08x", crc, fm.CRC)
	data, err := os.ReadFile(path)
	if err != nil {
		return &columnar.CorruptError{Container: c.where, File: fm.Name, Block: columnar.NoBlock, Reason: reason}
	}
	if fm.HeaderLen <= int64(len(data)) && crc32.Checksum(data[:fm.HeaderLen], castagnoli) != fm.HeaderCRC {
		return &columnar.CorruptError{Container: c.where, File: fm.Name, Block: columnar.NoBlock, Reason: reason + "; its header fails its checksum"}
	}
	for b, blk := range fm.Blocks {
		if blk.Offset < 0 || blk.Offset+blk.Length > int64(len(data)) {
			break
		}
		if got := crc32.Checksum(data[blk.Offset:blk.Offset+blk.Length], castagnoli); got != blk.CRC {
			return &columnar.CorruptError{Container: c.where, File: fm.Name, Block: b, Reason: fmt.Sprintf("%s; block checksum %08x, manifest says %08x", reason, got, blk.CRC)}
		}
	}
	return &columnar.CorruptError{Container: c.where, File: fm.Name, Block: columnar.NoBlock, Reason: reason}
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
