package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/strata-db/strata/columnar"
)

// CommitName is the object under a container's prefix that names its
// committed upload attempt.
const CommitName = "commit"

// attemptPrefix begins every attempt name. It sorts before CommitName, so
// a deletion in reverse key order (the S3 store's DeletePrefix) removes a
// container's commit before any of its files.
const attemptPrefix = "a"

// newAttempt returns a fresh attempt name: attemptPrefix and 16 random hex
// digits.
func newAttempt() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("attempt name: %w", err)
	}
	return attemptPrefix + hex.EncodeToString(b[:]), nil
}

// validAttempt reports whether name can be an attempt: one clean key
// element beginning with attemptPrefix.
func validAttempt(name string) bool {
	return strings.HasPrefix(name, attemptPrefix) && !strings.Contains(name, "/") && checkKey(name, false) == nil
}

// Committed resolves container table/projection/id in st: it returns the
// committed manifest and the key prefix of its attempt
// (<table>/<projection>/<id>/<attempt>/, or <table>/<projection>/<id>/
// in the first layout). Where a column file's bytes are is Resolve's: in
// a pack they are a range of one object, else the object prefix + the
// file's name.
//
// Errors are Resolve's.
func Committed(ctx context.Context, st Store, table, projection, id string) (*columnar.Manifest, string, error) {
	c, err := Resolve(ctx, st, table, projection, id)
	if err != nil {
		return nil, "", err
	}
	return c.Manifest, c.Prefix, nil
}

// Resolve resolves container table/projection/id in st: its commit, then
// the attempt the commit names, read as a pack (PackName) or, if the
// attempt has none, as one object per column file and a manifest (the
// layout uploads wrote before packs). It is the one way to a committed
// container's keys; everything that reads a container from a store goes
// through it. A container with no commit but a manifest directly under
// its prefix is in the first layout and read from there.
//
// A container with neither a commit nor a first-layout manifest gives an
// error wrapping columnar.ErrNotFound. A commit that does not name an
// attempt, an attempt with neither a pack nor a manifest, a pack whose
// head is cut short, damaged or not a pack, and a manifest that does not
// decode or names another container give a *columnar.CorruptError naming
// the container.
func Resolve(ctx context.Context, st Store, table, projection, id string) (*Container, error) {
	base := ContainerPrefix(table, projection, id)
	c := &Container{Table: table, Projection: projection, ID: id, Prefix: base, where: st.String() + "/" + Join(table, projection, id)}
	corrupt := func(file, reason string, err error) error {
		return &columnar.CorruptError{Container: c.where, File: file, Block: columnar.NoBlock, Reason: reason, Err: err}
	}
	attempt, head, err := readCommit(ctx, st, table, projection, id)
	switch {
	case err == nil:
		c.Prefix = base + attempt + "/"
		if head != nil {
			if err := c.takeHead(c.Prefix+PackName, CommitName, head, true); err != nil {
				return nil, err
			}
			c.headInCommit = true
			break
		}
		err := c.readPack(ctx, st, c.Prefix+PackName)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotExist) {
			return nil, err
		}
		fallthrough // an attempt of a column file an object
	case errors.Is(err, ErrNotExist):
		data, err := ReadAll(ctx, st, c.Prefix+columnar.ManifestName)
		if errors.Is(err, ErrNotExist) {
			if attempt != "" {
				return nil, corrupt(CommitName, fmt.Sprintf("commit names attempt %s, which has no pack or manifest", attempt), nil)
			}
			return nil, fmt.Errorf("container %s/%s/%s in %s: %w", table, projection, id, st, columnar.ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		m, err := columnar.DecodeManifest(data)
		if err != nil {
			return nil, corrupt(strings.TrimPrefix(c.Prefix+columnar.ManifestName, base), "invalid manifest", err)
		}
		c.Manifest, c.manifest = m, data
	default:
		return nil, err
	}
	file := strings.TrimPrefix(c.Prefix+columnar.ManifestName, base)
	if c.Pack != "" {
		file = strings.TrimPrefix(c.Pack, base)
	}
	m := c.Manifest
	if m.Table != table || m.Projection != projection || m.ID != id {
		return nil, corrupt(file, fmt.Sprintf("manifest names %s/%s/%s", m.Table, m.Projection, m.ID), nil)
	}
	c.index = make(map[string]int, len(m.Files))
	for i, fm := range m.Files {
		c.index[fm.Name] = i
	}
	return c, nil
}

// readCommit returns the attempt a container's commit names and the
// pack's head it holds after the attempt's line (nil for a commit of the
// attempt's name alone, as uploads wrote before heads were in commits);
// a container without a commit gives an error wrapping ErrNotExist.
func readCommit(ctx context.Context, st Store, table, projection, id string) (string, []byte, error) {
	data, err := ReadAll(ctx, st, ContainerPrefix(table, projection, id)+CommitName)
	if err != nil {
		return "", nil, err
	}
	line, head, _ := bytes.Cut(data, []byte("\n"))
	if len(head) == 0 {
		head = nil
	}
	attempt := string(line)
	if !validAttempt(attempt) {
		return "", nil, &columnar.CorruptError{Container: st.String() + "/" + Join(table, projection, id), File: CommitName, Block: columnar.NoBlock, Reason: fmt.Sprintf("commit holds %q, not an attempt name", truncate(attempt, 64))}
	}
	return attempt, head, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// putCommit puts the commit naming attempt and holding its pack's head,
// only if the container has none: the step that commits an upload.
func putCommit(ctx context.Context, st Store, table, projection, id, attempt string, head []byte) error {
	f, err := os.CreateTemp("", "strata-commit-")
	if err != nil {
		return fmt.Errorf("commit %s/%s/%s: %w", table, projection, id, err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(attempt + "\n")
	if err == nil {
		_, err = f.Write(head)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commit %s/%s/%s: %w", table, projection, id, err)
	}
	return st.Put(ctx, ContainerPrefix(table, projection, id)+CommitName, f.Name(), PutOptions{IfAbsent: true})
}

// RemoveUncommitted deletes the upload attempts of container
// table/projection/id that its commit does not name (all of them if it
// has no commit) and whose newest object was modified before cutoff:
// what a worker killed mid-upload, or the loser of two uploads of one
// container, left. It returns the attempts deleted. A commit that cannot
// be read deletes nothing.
func RemoveUncommitted(ctx context.Context, st Store, table, projection, id string, cutoff time.Time) ([]string, error) {
	base := ContainerPrefix(table, projection, id)
	objs, err := st.List(ctx, base)
	if err != nil {
		return nil, err
	}
	attempts := Prefixes(objs, base)
	if len(attempts) == 0 {
		return nil, nil
	}
	committed, _, err := readCommit(ctx, st, table, projection, id)
	if err != nil && !errors.Is(err, ErrNotExist) {
		return nil, err
	}
	var removed []string
	for _, a := range attempts {
		if a.Name == committed || !a.Modified.Before(cutoff) {
			continue
		}
		if err := st.DeletePrefix(ctx, base+a.Name+"/"); err != nil {
			return removed, err
		}
		removed = append(removed, a.Name)
	}
	return removed, nil
}
