package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{
		name:    "changes",
		summary: "publish a CSV file's inserts, updates and deletes to a keyed table; wait until they are visible",
		run:     runChanges,
	})
}

const changesUsage = `usage: strata changes --table T --csv FILE [--projection P] [--batch N] [--no-wait] [flags]

Publishes the changes in FILE, one per row, on strata.updates.T, as change batches of up
to --batch changes each (one message per batch; --batch 1 sends one update event per
row), and waits until the walwriter has made every one visible to queries (its
consumer's ack floor passes the last of them). A batch is applied whole or not at all.

FILE is CSV. Its header is op, then every column of T (in any order); each row is one
change: op is insert, update or delete (or I, U, D; any case). A delete needs only the
key columns; its other fields may be empty. Values read as strata load reads them (NULL
is the empty field or NULL, --null changes that; binary is base64). Every row is checked
before the first is published, and every error names the line and the column.

Event IDs are derived from T, the file's content and each row's line, so sending the
same file again is stored once (JetStream's duplicate window, then the WAL's).`

func runChanges(ctx context.Context, args []string) error {
	cmd := newCmdLine("changes", changesUsage)
	fs := cmd.fs
	var af apiFlags
	af.register(fs)
	tableName := fs.String("table", "", "the keyed table the changes apply to (required)")
	csvPath := fs.String("csv", "", "the CSV file of changes (required)")
	projection := fs.String("projection", "", "the projection whose schema the file follows (required when the table has several)")
	storeURL := fs.String("store", "", "read the table's schema from this store (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the data directory")
	noWait := fs.Bool("no-wait", false, "return once JetStream has stored every change, without waiting until they are visible")
	waitTimeout := fs.Duration("wait-timeout", 5*time.Minute, "how long to wait until the changes are visible")
	inflight := fs.Int("inflight", 1024, "publishes awaiting JetStream's acknowledgement at once")
	batch := fs.Int("batch", defaultChangeBatch, "changes per message (a change batch); 1: one update event per change")
	var nulls []string
	fs.Func("null", "a spelling of NULL in the file; repeat for more (default: the empty field and NULL)", func(s string) error {
		nulls = append(nulls, s)
		return nil
	})
	if err := cmd.parse(args); err != nil {
		return err
	}
	switch {
	case *tableName == "":
		return cmd.usageError("want --table")
	case *csvPath == "":
		return cmd.usageError("want --csv FILE")
	case *inflight <= 0:
		return cmd.usageError("--inflight must be positive")
	case *batch < 1 || *batch > messages.MaxBatchChanges:
		return cmd.usageError(fmt.Sprintf("--batch must be 1 to %d", messages.MaxBatchChanges))
	case *waitTimeout <= 0:
		return cmd.usageError("--wait-timeout must be positive")
	}
	if err := messages.ValidTable(*tableName); err != nil {
		return fmt.Errorf("%w: --table: %v", errUsage, err)
	}
	if nulls == nil {
		nulls = convert.DefaultNulls
	}

	c, err := af.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	kt, err := lookupKeyedTable(ctx, c, af.common.DataDir, *storeURL, *tableName, *projection)
	if err != nil {
		return err
	}

	// First pass: check every row and hash the file, so that nothing is
	// published from a file with an error in it and the event IDs are
	// known before the first publish.
	sum, rows, err := scanChangeFile(*csvPath, kt, nulls, nil)
	if err != nil {
		return err
	}
	if rows == 0 {
		fmt.Fprintf(stderr, "%s holds no changes\n", *csvPath)
		return nil
	}
	idPrefix := "chg-" + sum[:16] + "-"

	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(*inflight+1))
	if err != nil {
		return err
	}
	dlMark, dlErr := deadLetterMark(ctx, js)
	pub := newChangePublisher(js, *inflight, c.nc.MaxPayload(), *batch)
	subject := messages.SubjectUpdates(kt.Name)
	start := time.Now()
	again, _, err := scanChangeFile(*csvPath, kt, nulls, func(ch *change) error {
		ev, err := ch.event(kt, fmt.Sprintf("%s%d", idPrefix, ch.line))
		if err != nil {
			return err
		}
		return pub.publish(ctx, subject, ev, ch.line)
	})
	if err == nil {
		err = pub.flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("%w (%d of %d changes published before it)", err, pub.published, rows)
	}
	if again != sum {
		return fmt.Errorf("%s changed while it was being sent: its %d changes were checked against one content and published from another; send it again once it is written", *csvPath, rows)
	}
	published := time.Since(start)
	fmt.Fprintf(stderr, "published %d changes of %s to %s in %v (%.0f changes/s), stream sequences %d..%d%s\n",
		pub.published, *csvPath, subject, published.Round(time.Millisecond), float64(pub.published)/published.Seconds(),
		pub.first, pub.last, pub.duplicateNote())
	if *noWait {
		return nil
	}
	if err := waitVisible(ctx, js, pub.last, *waitTimeout, fmt.Sprintf("%d changes", pub.published)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "visible %v after the last publish, %v after the first\n",
		(time.Since(start) - published).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if dlErr != nil {
		fmt.Fprintf(stderr, "could not check the dead letters (%v); `strata deadletter --subject %s` lists them\n", dlErr, subject)
		return nil
	}
	return reportDeadLetters(ctx, js, dlMark, subject, pub.sent, "line")
}

// lookupKeyedTable describes table as the catalog and one of its live
// containers' manifest (read from dataDir, or from the store at storeURL)
// give it. projection picks one of several projections.
func lookupKeyedTable(ctx context.Context, c *apiClient, dataDir, storeURL, table, projection string) (*applier.Table, error) {
	var st store.Store
	if storeURL != "" {
		var err error
		if st, err = store.Open(ctx, storeURL); err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		defer st.Close()
	}
	for attempt := 1; ; attempt++ {
		pc, err := keyedProjection(ctx, c, table, projection)
		if err != nil {
			return nil, err
		}
		ref := pc.Live[0]
		var m *columnar.Manifest
		if st != nil {
			m, err = store.ReadManifest(ctx, st, ref.Table, ref.Projection, ref.ID)
		} else {
			m, err = columnar.ReadManifest(columnar.ContainerDir(dataDir, ref.Table, ref.Projection, ref.ID))
		}
		if errors.Is(err, columnar.ErrNotFound) && attempt < 3 {
			continue // retired by a mergeout since the catalog named it
		}
		if err != nil {
			return nil, fmt.Errorf("the schema of %s.%s, from container %s: %w", pc.Table, pc.Projection, ref.ID, err)
		}
		t, err := applier.NewTable(m)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(t.PrimaryKey, pc.PrimaryKey) {
			return nil, fmt.Errorf("%s.%s: the catalog's primary key (%s) is not container %s's (%s)",
				pc.Table, pc.Projection, strings.Join(pc.PrimaryKey, ", "), ref.ID, strings.Join(t.PrimaryKey, ", "))
		}
		return t, nil
	}
}

// keyedProjection asks the catalog for table's projection: a keyed one
// with live containers.
func keyedProjection(ctx context.Context, c *apiClient, table, projection string) (messages.ProjectionCatalog, error) {
	var rep messages.CatalogReply
	if err := c.call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: table, Projection: projection}, &rep); err != nil {
		return messages.ProjectionCatalog{}, err
	}
	notLoaded := fmt.Errorf("table %s is not in the catalog: load it first (strata load --primary-key COLS); "+
		"the walwriter dead-letters changes of a table it does not know", table)
	if rep.Error != nil {
		if rep.Error.Code == "not_found" {
			return messages.ProjectionCatalog{}, notLoaded
		}
		return messages.ProjectionCatalog{}, rep.Error.Err()
	}
	var pcs []messages.ProjectionCatalog
	for _, pc := range rep.Projections {
		if pc.Projection != messages.ResultProjection {
			pcs = append(pcs, pc)
		}
	}
	if projection == "" && !slices.ContainsFunc(pcs, func(pc messages.ProjectionCatalog) bool { return pc.Table == table }) {
		return messages.ProjectionCatalog{}, notLoaded
	}
	pc, err := exportProjection(table, projection, pcs)
	if err != nil {
		return pc, err
	}
	if len(pc.PrimaryKey) == 0 {
		return pc, fmt.Errorf("table %s has no primary key: changes apply to keyed tables only (strata load --primary-key COLS); "+
			"the walwriter dead-letters changes of a table without one", table)
	}
	if len(pc.Live) == 0 {
		return pc, fmt.Errorf("%s.%s has no live containers, so no schema (a table's schema is its containers')", pc.Table, pc.Projection)
	}
	return pc, nil
}

// change is one row of a changes file.
type change struct {
	line int    // where the row starts (the header is line 1)
	op   string // messages.OpInsert, OpUpdate or OpDelete
	// row holds the values of the table's columns in schema order, as
	// messages.EncodeRow takes them (nil: NULL); a delete's holds the key
	// columns only.
	row []any
}

// event is the change as an UpdateEvent of table t with the given ID.
func (ch *change) event(t *applier.Table, id string) (*messages.UpdateEvent, error) {
	ev := &messages.UpdateEvent{EventID: id, Table: t.Name, Columns: t.Types(), Op: ch.op}
	key := make([]any, len(t.KeyColumns()))
	for i, c := range t.KeyColumns() {
		key[i] = ch.row[c]
	}
	var err error
	if ev.Key, err = messages.EncodeRow(t.KeyTypes(), key); err != nil {
		return nil, fmt.Errorf("line %d: key: %w", ch.line, err)
	}
	if ch.op != messages.OpDelete {
		if ev.NewRow, err = messages.EncodeRow(t.Types(), ch.row); err != nil {
			return nil, fmt.Errorf("line %d: %w", ch.line, err)
		}
	}
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("line %d: %w", ch.line, err)
	}
	return ev, nil
}

// scanChangeFile reads the changes file at path against table t, calling
// fn (if not nil) with each change in file order; it returns the hex
// SHA-256 of t's name and the file's bytes, which the event IDs derive
// from, and the number of changes. The first error stops it.
func scanChangeFile(path string, t *applier.Table, nulls []string, fn func(*change) error) (sum string, rows int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	fmt.Fprintf(h, "strata changes\x00%s\x00", t.Name)
	// The CSV reader reads to the end of the file, through the hash.
	rows, err = readChanges(io.TeeReader(bufio.NewReaderSize(f, 1<<20), h), path, t, nulls, fn)
	if err != nil {
		return "", rows, err
	}
	return hex.EncodeToString(h.Sum(nil)), rows, nil
}

// readChanges reads a changes CSV (package doc of the command: a header
// "op" and every non-change column of t, then one change per row) named
// name in errors, calling fn with each change. It returns the number of
// changes read. An error at a place in the input is a *convert.CSVError
// naming the line and, where there is one, the column.
func readChanges(r io.Reader, name string, t *applier.Table, nulls []string, fn func(*change) error) (int, error) {
	cr, err := newChangeReader(r, name, t, nulls)
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		ch, err := cr.next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		if fn != nil {
			if err := fn(ch); err != nil {
				return n, err
			}
		}
	}
}
