// Package store is where containers live when they are shared between
// hosts: a small interface over an object store (Store), with two
// implementations chosen by URL (Open):
//
//	file:///srv/strata/data                          a directory on this host
//	s3://bucket/prefix?endpoint=URL&region=REGION    an S3-compatible bucket
//
// Keys are slash-separated paths relative to the store's root; the file
// store keeps key a/b/c at DIR/a/b/c, so a data directory is a store as it
// is. The S3 store goes through gocloud.dev/blob (ARCHITECTURE.md says
// why); no type of that library or of the AWS SDK is part of this API.
// Credentials for S3 follow the AWS conventions: the AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and AWS_PROFILE
// environment variables, the shared files ~/.aws/credentials and
// ~/.aws/config, and instance or task roles.
//
// # Format
//
// A container in a store (container.go, commit.go, pack.go) is the key
// prefix <table>/<projection>/<id>/. Each upload of it writes under a
// prefix of its own, an attempt, and commits by naming that attempt:
//
//	<table>/<projection>/<id>/<attempt>/container.pack   the whole container, uploaded first
//	<table>/<projection>/<id>/commit                     the attempt's name and "\n", then the pack's head; put last
//
// The pack is one object: a head (the manifest and an index), then the
// column files back to back in the manifest's order, each byte for byte
// the file columnar wrote:
//
//	offset 0   "STRATACP"                    magic (8 bytes)
//	       8   uint32 1                      version
//	      12   uint32 M                      manifest length
//	      16   uint32 N                      column files (the manifest's)
//	      20   uint32                        CRC-32C of bytes 0-19 and 24-(D-1)
//	      24   M bytes                       manifest.json
//	    24+M   N x uint64                    index: each column file's offset
//	       D   column file 0 ... N-1         D = 24+M+8N; file i at index[i]
//
// Integers are little-endian. The writer puts the files back to back
// (index[0] = D, index[i+1] = index[i] + size of file i) and the object
// ends where the last one does; a reader requires the offsets in order,
// not overlapping and past the head, and reads file i as the range
// [index[i], index[i] + its manifest size). Why one object: a cold read
// of a container was one ranged GET per column file (3,200 for a
// mergeout of 32 containers of 100 columns), each costing the client and
// the server CPU that the merge wanted. With the files back to back, the
// files a reader wants that are adjacent are one range (Container.Ranges),
// so the depot prefetches a container in a few GETs of up to 8MiB, and a
// reader of some columns fetches only their ranges. Why the manifest in
// the head rather than an object beside it: the container is one object
// to upload, list, sweep and delete. Why the head in the commit as well
// (byte for byte the pack's first D bytes, after the attempt's line): a
// reader finds the container with one request, the commit, where it took
// two or three in a row (the commit, then the pack's first 64KiB, then the
// rest of a head that passed it, as a container of 400 column files'
// does), and a cold job waits on those round trips before its first read.
// Readers take the commit's head and do not read the pack's; Check reads
// the pack's and requires it to be the same bytes. A commit of the
// attempt's name alone (uploads before heads were in commits) is read as
// before: the pack's head from the pack. A strata older than this format
// refuses a commit that holds a head (not an attempt name), so the readers
// of a store are upgraded before its writers. The index, redundant for the packs written today, lets
// a later writer align or pad files without changing readers. The pack is
// streamed from the local files as it is uploaded (PutReader), each file
// checked against the manifest's size and CRC-32C on the way, so a local
// file that is not what the manifest says fails the upload instead of
// being committed.
//
// An attempt's name is "a" and 16 random hex digits, so two uploads of one
// container (a job redelivered after a lease loss, two workers racing)
// never write the same key but the commit, which is put only if absent
// (If-None-Match: * on S3; a hard link in a directory): the first upload
// to commit wins and the loser's pack, however its blocks were laid out,
// cannot touch the winner's. "a" sorts before "commit", so a deletion in
// reverse key order removes the commit before the attempt it names.
//
// Readers resolve the commit first (Resolve gives the manifest and where
// each column file's bytes are; Committed the manifest and the attempt's
// prefix). A commit holding no attempt name or a head cut short, failing
// its CRC-32C, not a head or followed by bytes, and (for a commit of the
// attempt's name alone) an attempt with neither a pack nor a manifest or
// a pack whose head is so damaged, make the container corrupt (a
// *columnar.CorruptError naming the container and the commit or the
// pack). A pack missing under a commit that holds its head is found by
// the first read of it (and by Check). Damage in a
// column file's bytes (a pack cut short inside it, a byte changed) is
// found by whoever reads them: a Source's read past the object's end, and
// the block checksums of the column reader, name the container, the file
// and the block; Fetch names them too. A container committed once exists
// for readers once the catalog names it. Attempts no commit names are
// unfinished or losing uploads: the scheduler's orphan sweep deletes them
// after the grace period (RemoveUncommitted), and a prefix with no commit
// at all as a whole. Deleting a container deletes its prefix.
//
// Check, the scheduler's check of a container before the catalog names
// it, makes a bounded number of requests in few round trips: the commit
// (Resolve), one read of the pack's head (the same bytes as the commit's,
// or a pack whose head is damaged is corrupt), one Stat of the pack (its size must be
// the end of its last column file: a pack cut short names the first file
// it does not hold whole), then ranged reads of the column files'
// headers, the headers less than 256KiB apart read together in one read
// of up to 4MiB, at most MaxCheckReads (16) in flight at once; each
// header is checked against its CRC-32C, and a file a read holds whole
// against the whole file's. A container of small column files (the
// mergeout benchmark's: 5MiB in 100 files) costs about 3 + its size / 4MiB
// requests; one of large files, about 3 + N. Check is safe to call from
// several goroutines, so a caller checking many containers runs them at
// once too.
//
// Two older layouts are still read, checked, fetched, listed, swept and
// deleted; nothing writes them any more. An attempt of an object per
// column file and a copy of the manifest (uploads before packs):
//
//	<table>/<projection>/<id>/<attempt>/col-0000.arrow   column files
//	<table>/<projection>/<id>/<attempt>/manifest.json    a copy of the manifest
//
// A reader finds no pack in the attempt (one more request), then reads
// the manifest and each file as an object of its own; Check lists the
// attempt once for the sizes and reads each header. And the first layout,
// the files and manifest.json directly under <table>/<projection>/<id>/
// with no commit: it is what a data directory holds, and a data directory
// is a file:// store as it is.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// ErrNotExist is wrapped by errors for a key that is not in the store.
var ErrNotExist = errors.New("store: object does not exist")

// ErrExists is wrapped by Put's error when PutOptions.IfAbsent is set and
// the key is already there.
var ErrExists = errors.New("store: object already exists")

// ErrInvalidKey is wrapped by errors for a key or prefix that is not a
// clean relative path: an empty, "." or ".." element, a backslash or NUL,
// a leading slash.
var ErrInvalidKey = errors.New("store: invalid key")

// Store is an object store. Every method takes a context; errors name the
// operation, the store and the key, and wrap ErrNotExist, ErrExists or
// ErrInvalidKey where one applies. A Store is safe for concurrent use by
// several goroutines (Check relies on it).
type Store interface {
	// List returns every object whose key begins with prefix, sorted by
	// key. prefix is "" (everything) or a key prefix ending in "/".
	List(ctx context.Context, prefix string) ([]Object, error)
	// Stat returns the object at key.
	Stat(ctx context.Context, key string) (Object, error)
	// NewRangeReader reads length bytes of the object at key from offset;
	// a negative length reads to the end.
	NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Put uploads the local file at path as the object at key. The object
	// appears whole or not at all.
	Put(ctx context.Context, key, path string, opts PutOptions) error
	// PutReader uploads what r yields, to its end, as the object at key.
	// The object appears whole or not at all: an error from r fails the
	// put and leaves no object.
	PutReader(ctx context.Context, key string, r io.Reader, opts PutOptions) error
	// DeletePrefix deletes every object whose key begins with prefix
	// (ending in "/"); none is not an error.
	DeletePrefix(ctx context.Context, prefix string) error
	// String is the store's URL, without credentials.
	String() string
	Close() error
}

// PutOptions modify Put.
type PutOptions struct {
	// IfAbsent fails the put with ErrExists if key is there already. On
	// S3 this is a conditional write (If-None-Match: *); a server that
	// ignores the header overwrites.
	IfAbsent bool
	// Size, if not 0, is the bytes PutReader's reader yields: an S3
	// upload sizes its parts by it, so an object larger than the SDK's
	// 10,000 default parts (80GiB) can be uploaded from a stream.
	Size int64
}

// Object is one object of a listing.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Exists reports whether key is in st.
func Exists(ctx context.Context, st Store, key string) (bool, error) {
	_, err := st.Stat(ctx, key)
	if errors.Is(err, ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// ReadAll reads the whole object at key.
func ReadAll(ctx context.Context, st Store, key string) ([]byte, error) {
	r, err := st.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s from %s: %w", key, st, err)
	}
	return data, nil
}

// Open opens the store a URL names: file:///DIR (or a plain path) or
// s3://bucket/prefix?endpoint=...&region=....
func Open(ctx context.Context, rawURL string) (Store, error) {
	if rawURL == "" {
		return nil, errors.New("store: empty URL")
	}
	if !strings.Contains(rawURL, "://") {
		return OpenDir(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("store URL %q: a file URL names no host (file:///DIR)", rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("store URL %q: no directory", rawURL)
		}
		return OpenDir(u.Path)
	case "s3":
		return openS3(ctx, u)
	default:
		return nil, fmt.Errorf("store URL %q: scheme %q is not file or s3", rawURL, u.Scheme)
	}
}

// checkKey checks a key (prefix false) or a prefix ("" or ending in "/").
func checkKey(key string, prefix bool) error {
	if prefix {
		if key == "" {
			return nil
		}
		if !strings.HasSuffix(key, "/") {
			return fmt.Errorf("%w: prefix %q does not end in /", ErrInvalidKey, key)
		}
		key = strings.TrimSuffix(key, "/")
	}
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, e := range strings.Split(key, "/") {
		if e == "" || e == "." || e == ".." || len(e) > 255 || strings.ContainsAny(e, "\\\x00") {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// Join joins key elements with "/".
func Join(elems ...string) string { return strings.Join(elems, "/") }
