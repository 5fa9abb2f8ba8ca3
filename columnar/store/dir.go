package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// putTempPrefix begins the names of the temporary files a Put writes
// beside its key; listings skip them.
const putTempPrefix = ".strata-put-"

// dirStore is a directory on this host, opened as an os.Root so no key
// reaches outside it.
type dirStore struct {
	root *os.Root
	path string
	seq  atomic.Uint64
}

// OpenDir opens (creating it if needed) a directory as a store.
func OpenDir(dir string) (Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	return &dirStore{root: r, path: abs}, nil
}

func (d *dirStore) String() string { return "file://" + filepath.ToSlash(d.path) }

func (d *dirStore) Close() error { return d.root.Close() }

func (d *dirStore) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := checkKey(prefix, true); err != nil {
		return nil, fmt.Errorf("list %s: %w", d, err)
	}
	start := strings.TrimSuffix(prefix, "/")
	if start == "" {
		start = "."
	}
	var objs []Object
	err := fs.WalkDir(d.root.FS(), start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == start {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), putTempPrefix) || !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while listing
		}
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: p, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", prefix, d, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

func (d *dirStore) Stat(ctx context.Context, key string) (Object, error) {
	if err := checkKey(key, false); err != nil {
		return Object{}, fmt.Errorf("stat %s: %w", d, err)
	}
	info, err := d.root.Stat(key)
	if err == nil && !info.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return Object{}, d.wrap("stat", key, err)
	}
	return Object{Key: key, Size: info.Size(), Modified: info.ModTime()}, nil
}

func (d *dirStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey(key, false); err != nil {
		return nil, fmt.Errorf("read %s: %w", d, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("read %s from %s: negative offset %d", key, d, offset)
	}
	f, err := d.root.Open(key)
	if err != nil {
		return nil, d.wrap("read", key, err)
	}
	if length < 0 {
		length = 1<<63 - 1 - offset
	}
	return &fileRange{Reader: io.NewSectionReader(f, offset, length), f: f}, nil
}

type fileRange struct {
	io.Reader
	f *os.File
}

func (r *fileRange) Close() error { return r.f.Close() }

func (d *dirStore) Put(ctx context.Context, key, src string, opts PutOptions) error {
	if err := checkKey(key, false); err != nil {
		return fmt.Errorf("put %s: %w", d, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("put %s in %s: %w", key, d, err)
	}
	defer in.Close()
	return d.PutReader(ctx, key, in, opts)
}

func (d *dirStore) PutReader(ctx context.Context, key string, in io.Reader, opts PutOptions) error {
	if err := checkKey(key, false); err != nil {
		return fmt.Errorf("put %s: %w", d, err)
	}
	if err := d.root.MkdirAll(path.Dir(key), 0o755); err != nil {
		return d.wrap("put", key, err)
	}
	tmp := path.Join(path.Dir(key), putTempPrefix+path.Base(key)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.FormatUint(d.seq.Add(1), 36))
	out, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return d.wrap("put", key, err)
	}
	defer d.root.Remove(tmp) // after a rename or link, removes nothing or the temporary name
	_, err = io.Copy(out, readerWithContext{ctx, in})
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return d.wrap("put", key, err)
	}
	if opts.IfAbsent {
		// A hard link fails if key exists: the check and the put are one step.
		err = d.root.Link(tmp, key)
	} else {
		err = d.root.Rename(tmp, key)
	}
	if err != nil {
		return d.wrap("put", key, err)
	}
	return nil
}

func (d *dirStore) DeletePrefix(ctx context.Context, prefix string) error {
	if err := checkKey(prefix, true); err != nil || prefix == "" {
		if err == nil {
			err = fmt.Errorf("%w: empty prefix", ErrInvalidKey)
		}
		return fmt.Errorf("delete %s: %w", d, err)
	}
	if err := d.root.RemoveAll(strings.TrimSuffix(prefix, "/")); err != nil {
		return d.wrap("delete", prefix, err)
	}
	return nil
}

func (d *dirStore) wrap(op, key string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s in %s: %w", op, key, d, ErrNotExist)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s %s in %s: %w", op, key, d, ErrExists)
	}
	return fmt.Errorf("%s %s in %s: %w", op, key, d, err)
}

// readerWithContext stops a copy when its context ends.
type readerWithContext struct {
	ctx context.Context
	r   io.Reader
}

func (r readerWithContext) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
