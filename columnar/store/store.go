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
// A container in a store (container.go, commit.go) is the key prefix
// <table>/<projection>/<id>/. Each upload of it writes under a prefix of
// its own, an attempt, and commits by naming that attempt:
//
//	<table>/<projection>/<id>/<attempt>/col-0000.arrow   column files, uploaded first
//	<table>/<projection>/<id>/<attempt>/...
//	<table>/<projection>/<id>/<attempt>/manifest.json    a copy of the manifest
//	<table>/<projection>/<id>/commit                     the attempt's name and "\n", put last
//
// An attempt's name is "a" and 16 random hex digits, so two uploads of one
// container (a job redelivered after a lease loss, two workers racing)
// never write the same key but the commit, which is put only if absent
// (If-None-Match: * on S3; a hard link in a directory): the first upload
// to commit wins and the loser's files, however its blocks were laid out,
// cannot touch the winner's. "a" sorts before "commit", so a deletion in
// reverse key order removes the commit before the files it names.
//
// Readers resolve the commit first (Committed gives the manifest and the
// prefix that a file's name completes into its key). A commit naming an
// attempt without a manifest, or holding no attempt name, makes the
// container corrupt. A container committed once exists for readers once
// the catalog names it. Attempts no commit names are unfinished or
// losing uploads: the scheduler's orphan sweep deletes them after the
// grace period (RemoveUncommitted), and a prefix with no commit at all as
// a whole. Deleting a container deletes its prefix.
//
// Check, the scheduler's check of a container before the catalog names
// it, makes a bounded number of requests in few round trips: the commit,
// the manifest, one listing of the committed attempt's prefix for every
// file's size (not a request per file), then one ranged read of each
// file's header for its CRC-32C, MaxCheckReads (16) of them in flight at
// once. A container of N files costs N+3 requests and about N/16 round
// trips for the headers; Check is safe to call from several goroutines,
// so a caller checking many containers runs them at once too.
//
// The first layout, the files and manifest.json directly under
// <table>/<projection>/<id>/ with no commit, is still read: it is what a
// data directory holds, and a data directory is a file:// store as it is;
// uploads from before attempts were in it too. Nothing writes it any more.
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
