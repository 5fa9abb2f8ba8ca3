package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"testing"
	"time"
)

// rootStorage is a Storage over an os.Root for the scheduler's tests: a
// container's manifest.json is a stub naming its table, projection, ID and
// rows (the real one, columnar.DataDir, is tested in columnar).
type rootStorage struct {
	root        *os.Root
	uncommitted []string // the RemoveUncommitted calls: "table/projection/id cutoff"
}

func newRootStorage(t *testing.T, dir string) *rootStorage {
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &rootStorage{root: r}
}

type stubManifest struct {
	Table      string      `json:"table"`
	Projection string      `json:"projection"`
	ID         string      `json:"id"`
	Rows       int64       `json:"rows"`
	Bytes      int64       `json:"bytes"`
	PrimaryKey []string    `json:"primary_key"`
	Changes    *ChangeInfo `json:"changes"`
}

func (s *rootStorage) CheckContainer(table, projection, id string) (ContainerInfo, error) {
	data, err := s.root.ReadFile(path.Join(table, projection, id, "manifest.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return ContainerInfo{}, fmt.Errorf("%w: not found", ErrBadOutput)
	}
	if err != nil {
		return ContainerInfo{}, err
	}
	var m stubManifest
	if err := json.Unmarshal(data, &m); err != nil || m.Table != table || m.Projection != projection || m.ID != id {
		return ContainerInfo{}, fmt.Errorf("%w: manifest %s (%v)", ErrBadOutput, data, err)
	}
	return ContainerInfo{Rows: m.Rows, Bytes: m.Bytes, PrimaryKey: m.PrimaryKey, Changes: m.Changes}, nil
}

func (s *rootStorage) RemoveContainer(table, projection, id string) error {
	return s.root.RemoveAll(path.Join(table, projection, id))
}

func (s *rootStorage) ReadDir(elems ...string) ([]fs.DirEntry, error) {
	ents, err := fs.ReadDir(s.root.FS(), path.Join(elems...))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return ents, err
}

func (s *rootStorage) RemoveAll(elems ...string) error { return s.root.RemoveAll(path.Join(elems...)) }

func (s *rootStorage) RemoveEmpty(elems ...string) error {
	if err := s.root.Remove(path.Join(elems...)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil // not empty
	}
	return nil
}

func (s *rootStorage) RemoveUncommitted(table, projection, id string, cutoff time.Time) ([]string, error) {
	s.uncommitted = append(s.uncommitted, path.Join(table, projection, id)+" "+cutoff.UTC().Format(time.RFC3339))
	return nil, nil
}
