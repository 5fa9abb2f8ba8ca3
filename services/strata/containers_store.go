package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/messages"
)

// bucketRow is one row of `strata containers --store`: an upload attempt
// of a container, or a container of the first layout (attempt "").
type bucketRow struct {
	table, projection, id, attempt string
	state                          string // committed, uncommitted, corrupt
	rows                           int64  // from the committed manifest; 0 unknown
	objects                        int64
	bytes                          int64
	modified                       time.Time
}

// bucketContainer is what a listing holds under one container's prefix.
type bucketContainer struct {
	table, projection, id string
	direct                []store.Object            // objects directly under the prefix (the commit; a first-layout container's files)
	attempts              map[string][]store.Object // by attempt name
	order                 []string                  // attempt names in key order
}

// listBucket prints what the store holds, container by container: each
// upload attempt with whether the container's commit names it (the
// committed one) or not (an upload in flight, or one a dead worker or the
// loser of a race left: the scheduler's orphan sweep deletes those after
// its grace period), its objects, bytes and newest modification time, and
// for a committed one its rows. Objects outside any container (the
// walwriter's archive under wal/) are counted on stderr. fromEnv says the
// store came from STRATA_STORE rather than --store, which it then says.
func listBucket(ctx context.Context, storeURL, tableName, projection, format string, fromEnv bool) error {
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if fromEnv {
		fmt.Fprintf(stderr, "listing %s, the store STRATA_STORE names, not the catalog (which `STRATA_STORE= strata containers` lists)\n", st)
	}
	prefix := ""
	if tableName != "" {
		prefix = tableName + "/"
		if projection != "" {
			prefix += projection + "/"
		}
	}
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return err
	}
	containers, other, otherBytes := groupContainers(objs, projection)
	rows := make([][]bucketRow, len(containers))
	warnings := make([]string, len(containers))
	// Two reads (the commit and the manifest) per committed container, a
	// few at a time.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, c := range containers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rows[i], warnings[i] = c.rows(ctx, st)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	t := newTable("table", "projection", "container", "attempt", "state", "rows", "objects", "bytes", "modified")
	for i := range containers {
		for _, r := range rows[i] {
			var n any
			if r.rows > 0 || r.state == "committed" {
				n = r.rows
			}
			t.add(r.table, r.projection, r.id, textCell(r.attempt), r.state, n, r.objects, size(r.bytes), r.modified.UTC())
		}
	}
	if err := t.print(os.Stdout, format); err != nil {
		return err
	}
	for _, w := range warnings {
		if w != "" {
			fmt.Fprintln(stderr, w)
		}
	}
	if other > 0 {
		fmt.Fprintf(stderr, "%s also holds %d objects (%s) that are not in a container (wal/HOST/ is the walwriter's archive)\n",
			st, other, fmtBytes(otherBytes))
	}
	return nil
}

// groupContainers groups a sorted listing by container prefix
// (<table>/<projection>/<id>/), keeping only projection when it is set,
// and counts the objects that are under no container.
func groupContainers(objs []store.Object, projection string) (cs []*bucketContainer, other int, otherBytes int64) {
	var cur *bucketContainer
	for _, o := range objs {
		parts := strings.SplitN(o.Key, "/", 4)
		if len(parts) < 4 || messages.ValidName(parts[0]) != nil || messages.ValidName(parts[1]) != nil || messages.ValidName(parts[2]) != nil {
			other++
			otherBytes += o.Size
			continue
		}
		if projection != "" && parts[1] != projection {
			continue
		}
		if cur == nil || cur.table != parts[0] || cur.projection != parts[1] || cur.id != parts[2] {
			cur = &bucketContainer{table: parts[0], projection: parts[1], id: parts[2], attempts: map[string][]store.Object{}}
			cs = append(cs, cur)
		}
		attempt, _, under := strings.Cut(parts[3], "/")
		if !under {
			cur.direct = append(cur.direct, o)
			continue
		}
		if _, ok := cur.attempts[attempt]; !ok {
			cur.order = append(cur.order, attempt)
		}
		cur.attempts[attempt] = append(cur.attempts[attempt], o)
	}
	return cs, other, otherBytes
}

// rows resolves the container's commit (store.Committed) and returns a
// row per attempt, and a warning when the container is corrupt.
func (c *bucketContainer) rows(ctx context.Context, st store.Store) ([]bucketRow, string) {
	row := func(attempt, state string, objs []store.Object) bucketRow {
		r := bucketRow{table: c.table, projection: c.projection, id: c.id, attempt: attempt, state: state, objects: int64(len(objs))}
		for _, o := range objs {
			r.bytes += o.Size
			if o.Modified.After(r.modified) {
				r.modified = o.Modified
			}
		}
		return r
	}
	m, prefix, err := store.Committed(ctx, st, c.table, c.projection, c.id)
	committed := "" // the attempt the commit names
	warning := ""
	switch {
	case err == nil:
		committed = strings.TrimSuffix(strings.TrimPrefix(prefix, store.ContainerPrefix(c.table, c.projection, c.id)), "/")
	case errors.Is(err, columnar.ErrNotFound):
		// No commit and no first-layout manifest: every attempt is
		// uncommitted.
	default:
		warning = fmt.Sprintf("%s/%s/%s: %v", c.table, c.projection, c.id, err)
	}
	var out []bucketRow
	if len(c.direct) > 0 {
		// The commit object, or a first-layout container's files.
		state := "uncommitted"
		switch {
		case err == nil && committed == "":
			state = "committed" // first layout: its files are right here
		case warning != "":
			state = "corrupt"
		}
		if err == nil && committed != "" {
			// Only the commit is here: count it with the attempt it names.
			if _, ok := c.attempts[committed]; !ok {
				c.order = append(c.order, committed) // a listing that lags its writes
			}
			c.attempts[committed] = append(c.attempts[committed], c.direct...)
		} else {
			r := row("", state, c.direct)
			if state == "committed" {
				r.rows = m.Rows
			}
			out = append(out, r)
		}
	}
	for _, a := range c.order {
		state := "uncommitted"
		if a == committed {
			state = "committed"
		}
		r := row(a, state, c.attempts[a])
		if state == "committed" {
			r.rows = m.Rows
		}
		out = append(out, r)
	}
	return out, warning
}
