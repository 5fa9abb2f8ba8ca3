package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/messages"
)

// errNotKeyed wraps why a table's change events cannot be applied for
// good: the table is unknown, has no primary key, or has more than one
// projection with one. Such events are dead-lettered with the reason.
var errNotKeyed = errors.New("changes cannot be applied")

// tableCache knows the keyed tables whose changes the walwriter applies:
// their projection, schema, sort key and primary key, from the catalog and
// one live container's manifest (in the data directory, or the store).
// A table found not keyed is asked about again after negativeTTL: a load
// may make it keyed.
type tableCache struct {
	api   *apiclient.Client
	data  string      // the data directory
	store store.Store // nil without --store

	mu     sync.Mutex
	tables map[string]*applier.Table
	absent map[string]absentTable
}

type absentTable struct {
	err   error
	until time.Time
}

const negativeTTL = 2 * time.Second

func newTableCache(api *apiclient.Client, data string, st store.Store) *tableCache {
	return &tableCache{api: api, data: data, store: st, tables: map[string]*applier.Table{}, absent: map[string]absentTable{}}
}

// get returns the keyed table named name. An error wrapping errNotKeyed
// is final for the event (dead-letter it); any other is transient (the
// scheduler or the store did not answer: deliver the event again).
func (c *tableCache) get(ctx context.Context, name string) (*applier.Table, error) {
	c.mu.Lock()
	t, ok := c.tables[name]
	a, absent := c.absent[name]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	if absent && time.Now().Before(a.until) {
		return nil, a.err
	}
	t, err := c.lookup(ctx, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.tables[name] = t
		delete(c.absent, name)
	case errors.Is(err, errNotKeyed):
		c.absent[name] = absentTable{err: err, until: time.Now().Add(negativeTTL)}
	}
	return t, err
}

func (c *tableCache) lookup(ctx context.Context, name string) (*applier.Table, error) {
	var rep messages.CatalogReply
	if err := c.api.Call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: name}, &rep); err != nil {
		return nil, fmt.Errorf("table %s: read the catalog: %w", name, err)
	}
	if rep.Error != nil {
		return nil, fmt.Errorf("table %s: read the catalog: %s", name, rep.Error.Message)
	}
	var keyed []messages.ProjectionCatalog
	for _, p := range rep.Projections {
		if p.Table == name && len(p.PrimaryKey) > 0 {
			keyed = append(keyed, p)
		}
	}
	switch {
	case len(rep.Projections) == 0:
		return nil, fmt.Errorf("%w: table %s is not in the catalog (load it with a primary key first)", errNotKeyed, name)
	case len(keyed) == 0:
		return nil, fmt.Errorf("%w: table %s has no primary key: it is append-only (load it with --primary-key to change it by key)", errNotKeyed, name)
	case len(keyed) > 1:
		return nil, fmt.Errorf("%w: table %s has %d projections with a primary key; changes are applied to a table of one", errNotKeyed, name, len(keyed))
	case len(keyed[0].Live) == 0:
		return nil, fmt.Errorf("%w: table %s.%s has no live container to take its schema from", errNotKeyed, name, keyed[0].Projection)
	}
	p := keyed[0]
	ref := p.Live[0]
	var m *columnar.Manifest
	var err error
	if c.store != nil {
		m, err = store.ReadManifest(ctx, c.store, ref.Table, ref.Projection, ref.ID)
	} else {
		m, err = columnar.ReadManifest(filepath.Join(c.data, ref.Table, ref.Projection, ref.ID))
	}
	if err != nil {
		return nil, fmt.Errorf("table %s.%s: schema from container %s: %w", name, p.Projection, ref.ID, err)
	}
	t, err := applier.NewTable(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotKeyed, err)
	}
	return t, nil
}
