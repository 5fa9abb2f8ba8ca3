package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{
		name:    "updates",
		summary: "publish pgbench's UPDATE of pgbench_accounts (abalance += delta on random accounts) as change events",
		run:     runUpdates,
	})
}

const updatesUsage = `usage: strata updates [--table pgbench_accounts] [--events N] [--rate R] [--batch N] [--wait] [flags]

Publishes pgbench's account update, UPDATE pgbench_accounts SET abalance = abalance + delta
WHERE aid = random(1, N), delta random in -5000..5000, as update events on
strata.updates.TABLE. TABLE is a keyed table loaded with strata load (--pgbench-accounts):
its key is one integer column (aid) and it has an integer column abalance. The current
rows of the accounts drawn are read from the table's live containers (the data directory,
or --store) once, at the start, and each event carries the account's whole new row; so
changes of the same accounts made by others while it runs are overwritten (an event is a
row image, not an increment). An aid without a row is skipped, as pgbench's UPDATE would
change nothing. Events are sent as change batches of up to --batch (with --rate, of at
most 10ms of events), one message each.`

func runUpdates(ctx context.Context, args []string) error {
	cmd := newCmdLine("updates", updatesUsage)
	fs := cmd.fs
	var af apiFlags
	af.register(fs)
	table := fs.String("table", "pgbench_accounts", "the keyed table the events update")
	projection := fs.String("projection", "", "the projection to read the current rows from (required when the table has several)")
	keys := fs.Int64("keys", 0, "accounts to draw from: aid in 1..N (default: the table's rows)")
	events := fs.Int("events", 10000, "events to publish")
	rate := fs.Float64("rate", 0, "events per second (0: as fast as NATS acknowledges)")
	seed := fs.Int64("seed", 1, "random seed (the same seed draws the same accounts and deltas)")
	prefix := fs.String("id-prefix", "", "event ID prefix (default: the table, the seed and the start time, so separate runs do not collide;\n"+
		"a run with the prefix of an earlier one is deduplicated against it)")
	inflight := fs.Int("inflight", 512, "publishes awaiting acknowledgement at once")
	batch := fs.Int("batch", defaultChangeBatch, "events per message (a change batch; with --rate, at most 10ms of events); 1: one update event per message")
	storeURL := fs.String("store", "", "read the table from this store (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the data directory")
	wait := fs.Bool("wait", false, "wait until every event is visible to queries (the walwriter's ack floor passes the last)")
	waitTimeout := fs.Duration("wait-timeout", 5*time.Minute, "with --wait: how long to wait")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if *keys < 0 || *events < 0 || *inflight <= 0 || *waitTimeout <= 0 {
		return fmt.Errorf("%w: --inflight and --wait-timeout must be positive, --keys and --events not negative", errUsage)
	}
	if *batch < 1 || *batch > messages.MaxBatchChanges {
		return fmt.Errorf("%w: --batch must be 1 to %d", errUsage, messages.MaxBatchChanges)
	}
	if *rate > 0 {
		*batch = min(*batch, max(1, int(*rate/100))) // a change waits at most 10ms for its batch
	}
	if err := messages.ValidTable(*table); err != nil {
		return fmt.Errorf("%w: --table: %v", errUsage, err)
	}
	if *prefix == "" {
		*prefix = fmt.Sprintf("%s-%d-%s-", *table, *seed, strconv.FormatInt(time.Now().UnixNano(), 36))
	}

	c, err := af.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// The accounts drawn, then their current rows: the same draws again
	// make the events.
	var (
		n    int64
		t    *applier.Table
		rows map[int64][]any
		// accounts makes the events: its table and abalance column stay
		// after its containers are closed.
		accounts *accountsTable
		draw     func(rng *rand.Rand) (aid, delta int64)
		rng      *rand.Rand
		newRNG   = func() *rand.Rand { return rand.New(rand.NewPCG(uint64(*seed), 0x5eed)) }
	)
	err = readAccounts(ctx, c, af.common.DataDir, *storeURL, *table, *projection, func(a *accountsTable) error {
		accounts = a
		if n = *keys; n == 0 {
			if n = accounts.live; n == 0 {
				return fmt.Errorf("%s has no rows: nothing to update", *table)
			}
		}
		draw = func(rng *rand.Rand) (aid, delta int64) { return rng.Int64N(n) + 1, rng.Int64N(10001) - 5000 }
		drawn := map[int64]bool{}
		rng = newRNG()
		for range *events {
			aid, _ := draw(rng)
			drawn[aid] = true
		}
		var err error
		rows, err = accounts.read(ctx, drawn)
		t = accounts.t
		return err
	})
	if err != nil {
		return err
	}

	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(*inflight+1))
	if err != nil {
		return err
	}
	// Only a wait reports dead letters; reading them is cli-admin's.
	var dlMark uint64
	var dlErr error
	if *wait {
		dlMark, dlErr = deadLetterMark(ctx, js)
	}
	pub := newChangePublisher(js, *inflight, c.nc.MaxPayload(), *batch)
	var tick <-chan time.Time
	if *rate > 0 {
		tk := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer tk.Stop()
		tick = tk.C
	}
	subject := messages.SubjectUpdates(t.Name)
	rng = newRNG()
	skipped := 0
	start := time.Now()
	lastReport := start
	progressed := false
	for i := range *events {
		aid, delta := draw(rng)
		old, ok := rows[aid]
		if !ok {
			skipped++
			continue
		}
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		ev, row, err := accounts.update(fmt.Sprintf("%s%d", *prefix, i), aid, old, delta)
		if err != nil {
			return err
		}
		rows[aid] = row
		if err := pub.publish(ctx, subject, ev, i); err != nil {
			return err
		}
		if now := time.Now(); now.Sub(lastReport) >= time.Second {
			lastReport, progressed = now, true
			fmt.Fprintf(stderr, "\rpublished %d/%d events, %.0f/s", i+1, *events, float64(i+1)/now.Sub(start).Seconds())
		}
	}
	if err := pub.flush(ctx); err != nil {
		return err
	}
	el := time.Since(start)
	var skip string
	if skipped > 0 {
		skip = fmt.Sprintf("; %d of the aids drawn (1..%d) have no row and were skipped", skipped, n)
	}
	if progressed {
		fmt.Fprintln(stderr) // end the progress line
	}
	fmt.Fprintf(stderr, "published %d update events to %s in %v, %.0f events/s, stream sequences %d..%d%s%s\n",
		pub.published, subject, el.Round(time.Millisecond), float64(pub.published)/el.Seconds(), pub.first, pub.last, skip, pub.duplicateNote())
	if !*wait || pub.published == 0 {
		return nil
	}
	if err := waitVisible(ctx, js, pub.last, *waitTimeout, fmt.Sprintf("%d update events", pub.published)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "visible %v after the last publish\n", (time.Since(start) - el).Round(time.Millisecond))
	if dlErr != nil {
		fmt.Fprintf(stderr, "could not check the dead letters (%v); `strata deadletter --subject %s` lists them\n", dlErr, subject)
		return nil
	}
	return reportDeadLetters(ctx, js, dlMark, subject, pub.sent, "event")
}

// accountsTable is a pgbench_accounts-shaped keyed table: its live
// containers, open, and which of its rows are current.
type accountsTable struct {
	t       *applier.Table
	aid     int // the key column
	balance int // the abalance column
	cs      []*columnar.Container
	res     *columnar.Resolution
	live    int64 // current rows
	st      store.Store
}

// readAccounts opens the live containers of table (from dataDir, or the
// store at storeURL), resolves which rows are current and calls read with
// them, then closes them. A mergeout may retire a container (and remove
// its files) between the catalog naming it and read reading it: when
// opening or read fails and one of the containers is no longer live, it
// starts again from the catalog, up to three times.
func readAccounts(ctx context.Context, c *apiClient, dataDir, storeURL, table, projection string, read func(*accountsTable) error) error {
	a := &accountsTable{}
	if storeURL != "" {
		var err error
		if a.st, err = store.Open(ctx, storeURL); err != nil {
			return fmt.Errorf("--store: %w", err)
		}
	}
	defer a.close()
	for attempt := 1; ; attempt++ {
		err := a.open(ctx, c, dataDir, table, projection)
		if err == nil {
			err = read(a)
		}
		if err != nil && attempt < 3 && (errors.Is(err, columnar.ErrNotFound) || a.retired(ctx, c, table, projection)) {
			continue
		}
		return err
	}
}

// retired reports whether a container a opened is no longer live.
func (a *accountsTable) retired(ctx context.Context, c *apiClient, table, projection string) bool {
	pc, err := keyedProjection(ctx, c, table, projection)
	if err != nil {
		return false
	}
	live := map[string]bool{}
	for _, ref := range pc.Live {
		live[ref.ID] = true
	}
	for _, ct := range a.cs {
		if !live[ct.Manifest().ID] {
			return true
		}
	}
	return false
}

func (a *accountsTable) open(ctx context.Context, c *apiClient, dataDir, table, projection string) error {
	pc, err := keyedProjection(ctx, c, table, projection)
	if err != nil {
		return err
	}
	for _, ct := range a.cs {
		ct.Close() // of an earlier attempt
	}
	a.cs = a.cs[:0]
	for _, ref := range pc.Live {
		var ct *columnar.Container
		if a.st != nil {
			var src *store.Source
			if src, _, err = store.OpenSource(ctx, a.st, ref.Table, ref.Projection, ref.ID); err == nil {
				ct, err = columnar.OpenSource(src, columnar.OpenOptions{})
			}
		} else {
			ct, err = columnar.Open(columnar.ContainerDir(dataDir, ref.Table, ref.Projection, ref.ID), columnar.OpenOptions{})
		}
		if err != nil {
			return fmt.Errorf("%s.%s: container %s: %w", pc.Table, pc.Projection, ref.ID, err)
		}
		a.cs = append(a.cs, ct)
	}
	if a.t, err = applier.NewTable(a.cs[0].Manifest()); err != nil {
		return err
	}
	types := a.t.Types()
	if len(a.t.KeyColumns()) != 1 || types[a.t.KeyColumns()[0]] != messages.RowInt64 {
		return fmt.Errorf("%s.%s: primary key (%s): want one integer column, pgbench_accounts' aid", pc.Table, pc.Projection, quoteList(a.t.PrimaryKey))
	}
	a.aid = a.t.KeyColumns()[0]
	bal := a.t.Schema.FieldIndices("abalance")
	if len(bal) != 1 || types[bal[0]] != messages.RowInt64 {
		return fmt.Errorf("%s.%s has no integer column abalance: strata updates makes pgbench's account updates", pc.Table, pc.Projection)
	}
	a.balance = bal[0]
	for _, ct := range a.cs[1:] {
		for j := range types {
			if f, g := a.t.Schema.Field(j), ct.Schema().Field(j); f.Name != g.Name || !arrow.TypeEqual(f.Type, g.Type) {
				return fmt.Errorf("%s.%s: container %s's column %d is %s %s, container %s's %s %s",
					pc.Table, pc.Projection, ct.Manifest().ID, j, g.Name, g.Type, a.cs[0].Manifest().ID, f.Name, f.Type)
			}
		}
	}
	res, err := columnar.Superseded(ctx, a.cs, columnar.ResolveOptions{})
	if err != nil {
		return fmt.Errorf("%s.%s: current rows: %w", pc.Table, pc.Projection, err)
	}
	a.res, a.live = res, res.Live
	return nil
}

func (a *accountsTable) close() {
	a.res.Release()
	a.res = nil
	for _, ct := range a.cs {
		ct.Close()
	}
	a.cs = nil
	if a.st != nil {
		a.st.Close()
		a.st = nil
	}
}

// eachCurrent calls fn with each current row of the table (rows newer
// versions replaced, and delete markers, skipped): its aid and its values
// as messages.EncodeRow takes them. row is reused between calls.
func (a *accountsTable) eachCurrent(ctx context.Context, fn func(aid int64, row []any) error) error {
	ncols := len(a.t.Types())
	cols := make([]int, ncols)
	for i := range cols {
		cols[i] = i
	}
	row := make([]any, ncols)
	for i, ct := range a.cs {
		if err := a.eachCurrentOf(ctx, i, ct, cols, row, fn); err != nil {
			return err
		}
	}
	return nil
}

func (a *accountsTable) eachCurrentOf(ctx context.Context, i int, ct *columnar.Container, cols []int, row []any, fn func(int64, []any) error) error {
	dropped := a.res.Dropped[i]
	br, err := ct.OpenColumns(cols)
	if err != nil {
		return fmt.Errorf("container %s: %w", ct.Manifest().ID, err)
	}
	defer br.Close()
	base := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("container %s: %w", ct.Manifest().ID, err)
		}
		keys := rec.Column(a.aid)
		for r := range int(rec.NumRows()) {
			if dropped != nil && dropped.Contains(uint32(base+r)) {
				continue
			}
			aid, ok := applier.Value(keys, r).(int64)
			if !ok {
				continue
			}
			for j := range row {
				row[j] = applier.Value(rec.Column(j), r)
			}
			if err := fn(aid, row); err != nil {
				rec.Release()
				return err
			}
		}
		base += int(rec.NumRows())
		rec.Release()
	}
}

// read returns the current row of each account in want that has one, as
// messages.EncodeRow takes its values.
func (a *accountsTable) read(ctx context.Context, want map[int64]bool) (map[int64][]any, error) {
	rows := make(map[int64][]any, len(want))
	err := a.eachCurrent(ctx, func(aid int64, row []any) error {
		if want[aid] {
			rows[aid] = slices.Clone(row)
		}
		return nil
	})
	return rows, err
}

// update is the event setting old's balance to balance + delta.
func (a *accountsTable) update(id string, aid int64, old []any, delta int64) (*messages.UpdateEvent, []any, error) {
	row := slices.Clone(old)
	if b, ok := old[a.balance].(int64); ok { // NULL + delta is NULL
		nb := b + delta
		f := a.t.Schema.Field(a.balance)
		bits := f.Type.(arrow.FixedWidthDataType).BitWidth()
		if (delta > 0) != (nb > b) || (bits < 64 && (nb < -(1<<(bits-1)) || nb >= 1<<(bits-1))) {
			return nil, nil, fmt.Errorf("aid %d: abalance %d + %d overflows %s", aid, b, delta, f.Type)
		}
		row[a.balance] = nb
	}
	ev := &messages.UpdateEvent{EventID: id, Table: a.t.Name, Columns: a.t.Types(), Op: messages.OpUpdate}
	var err error
	if ev.Key, err = messages.EncodeRow(a.t.KeyTypes(), []any{aid}); err == nil {
		if ev.OldRow, err = messages.EncodeRow(a.t.Types(), old); err == nil {
			ev.NewRow, err = messages.EncodeRow(a.t.Types(), row)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("aid %d: %w", aid, err)
	}
	return ev, row, nil
}

// retryFor bounds how long a failed publish is tried again: longer than a
// cluster takes to elect a new leader or a client to reconnect.
const retryFor = 2 * time.Minute
