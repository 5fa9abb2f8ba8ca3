package main

import (
	"errors"
	"fmt"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/scheduler"
)

// dataStorage is the scheduler's view of the data directory: every name it
// is given is resolved through columnar.DataDir's confined root.
type dataStorage struct{ *columnar.DataDir }

// CheckContainer checks a worker's output cheaply (manifest, file sizes and
// header checksums); a missing or corrupt one wraps scheduler.ErrBadOutput.
func (d dataStorage) CheckContainer(table, projection, id string) (int64, int64, error) {
	m, err := d.Check(table, projection, id)
	if err != nil {
		if errors.Is(err, columnar.ErrNotFound) || errors.Is(err, columnar.ErrCorrupt) || errors.Is(err, columnar.ErrOutsideRoot) {
			return 0, 0, fmt.Errorf("%w: %v", scheduler.ErrBadOutput, err)
		}
		return 0, 0, err
	}
	return m.Rows, m.CompressedBytes(), nil
}
