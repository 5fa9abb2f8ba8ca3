package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-db/strata/messages"
)

// ProjectionState is the catalog entry of one projection: which containers
// are live, which are dead but still read, and the jobs that read them.
// It is stored as JSON under the key "<table>/<projection>" (see the
// package documentation).
type ProjectionState struct {
	Table      string                  `json:"table"`
	Projection string                  `json:"projection"`
	Live       []messages.ContainerRef `json:"live"`
	Dead       []messages.ContainerRef `json:"dead,omitempty"`
	Pending    []PendingJob            `json:"pending,omitempty"`
	NextSeq    uint64                  `json:"next_seq"`
	// ResultOf names the window job whose result this table is; empty for
	// loaded tables. Created is when a result table was made (unix ns).
	ResultOf string `json:"result_of,omitempty"`
	Created  int64  `json:"created,omitempty"`
}

// PendingJob is a job the scheduler made and has not seen finish. It is in
// the catalog so a restarted scheduler knows which containers are being
// read, which grants are held, and which jobs to publish again.
type PendingJob struct {
	JobID     string                `json:"job_id"`
	Operation string                `json:"operation"`
	Inputs    []string              `json:"inputs"` // container IDs of this projection the job reads
	Granted   bool                  `json:"granted"`
	Grant     messages.Grant        `json:"grant"`
	Created   int64                 `json:"created"`
	GrantedAt int64                 `json:"granted_at,omitempty"`
	Mergeout  *messages.MergeoutJob `json:"mergeout,omitempty"`
	Window    *messages.WindowJob   `json:"window,omitempty"`
	// Worker is the worker that accepted the job's latest delivery,
	// Delivery that delivery's number: the only worker whose done or
	// failed claim the scheduler takes.
	Worker   string `json:"worker,omitempty"`
	Delivery uint64 `json:"delivery,omitempty"`
}

func (st *ProjectionState) pending(jobID string) (int, bool) {
	for i := range st.Pending {
		if st.Pending[i].JobID == jobID {
			return i, true
		}
	}
	return -1, false
}

// readers returns the container IDs pending jobs read.
func (st *ProjectionState) readers() map[string]bool {
	r := map[string]bool{}
	for _, p := range st.Pending {
		for _, id := range p.Inputs {
			r[id] = true
		}
	}
	return r
}

// readerOf returns the first pending job that reads container id, or "".
func (st *ProjectionState) readerOf(id string) string {
	for _, p := range st.Pending {
		if slices.Contains(p.Inputs, id) {
			return p.JobID
		}
	}
	return ""
}

func (st *ProjectionState) liveIndex(id string) int {
	return slices.IndexFunc(st.Live, func(c messages.ContainerRef) bool { return c.ID == id })
}

// named returns every container ID the entry names: live, dead, and the
// outputs pending jobs will write.
func (st *ProjectionState) named() map[string]bool {
	n := map[string]bool{}
	for _, c := range st.Live {
		n[c.ID] = true
	}
	for _, c := range st.Dead {
		n[c.ID] = true
	}
	for _, p := range st.Pending {
		if p.Mergeout != nil {
			n[p.Mergeout.Output] = true
		}
	}
	return n
}

// Catalog keeps ProjectionStates in a KV and changes them only by
// compare-and-set.
type Catalog struct {
	kv      KV
	retries int
}

// NewCatalog returns a catalog over kv.
func NewCatalog(kv KV) *Catalog { return &Catalog{kv: kv, retries: 32} }

func catalogKey(table, projection string) string { return table + "/" + projection }

// Get returns the projection's state and revision; a projection the catalog
// does not hold comes back empty with revision 0.
func (c *Catalog) Get(ctx context.Context, table, projection string) (*ProjectionState, uint64, error) {
	data, rev, err := c.kv.Get(ctx, catalogKey(table, projection))
	if errors.Is(err, ErrKeyNotFound) {
		return &ProjectionState{Table: table, Projection: projection}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: read %s.%s: %w", table, projection, err)
	}
	st := &ProjectionState{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, 0, fmt.Errorf("catalog: decode %s.%s at revision %d: %w", table, projection, rev, err)
	}
	if st.Table != table || st.Projection != projection {
		return nil, 0, fmt.Errorf("catalog: entry %q names %s.%s", catalogKey(table, projection), st.Table, st.Projection)
	}
	return st, rev, nil
}

// Update applies fn to the projection's current state and writes the result
// with compare-and-set, reading again and re-applying fn when another writer
// changed the entry in between; fn must therefore depend only on its
// argument. An error from fn aborts the update and is returned as is.
func (c *Catalog) Update(ctx context.Context, table, projection string, fn func(*ProjectionState) error) (*ProjectionState, error) {
	for range c.retries {
		st, rev, err := c.Get(ctx, table, projection)
		if err != nil {
			return nil, err
		}
		if err := fn(st); err != nil {
			return nil, err
		}
		data, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("catalog: encode %s.%s: %w", table, projection, err)
		}
		key := catalogKey(table, projection)
		if rev == 0 {
			_, err = c.kv.Create(ctx, key, data)
		} else {
			_, err = c.kv.Update(ctx, key, data, rev)
		}
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("catalog: write %s.%s: %w", table, projection, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("catalog: update %s.%s: %d attempts lost the race: %w", table, projection, c.retries, ErrConflict)
}

// Delete forgets a projection.
func (c *Catalog) Delete(ctx context.Context, table, projection string) error {
	if err := c.kv.Delete(ctx, catalogKey(table, projection)); err != nil {
		return fmt.Errorf("catalog: delete %s.%s: %w", table, projection, err)
	}
	return nil
}

// List returns every projection's state, by table then projection. A
// non-empty table limits it to that table.
func (c *Catalog) List(ctx context.Context, table string) ([]*ProjectionState, error) {
	prefix := ""
	if table != "" {
		prefix = table + "/"
	}
	keys, err := c.kv.Keys(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("catalog: list: %w", err)
	}
	var out []*ProjectionState
	for _, k := range keys {
		t, p, ok := strings.Cut(k, "/")
		if !ok {
			continue // not a catalog key
		}
		st, rev, err := c.Get(ctx, t, p)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			continue // deleted since Keys
		}
		out = append(out, st)
	}
	return out, nil
}
