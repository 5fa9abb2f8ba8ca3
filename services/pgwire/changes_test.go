package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
)

// keyedLocal is a keyed table k whose change events the test's backend
// applies as the walwriter does (applier.Table.Change, a Batch written
// as one container per statement, the version counting up), so a
// statement's changes are visible to the next query as they would be
// once the walwriter acknowledged them.
type keyedLocal struct {
	mu      sync.Mutex
	dataDir string
	t       *applier.Table
	dirs    []string
	version uint64
	events  []*messages.UpdateEvent // every event applied
}

func (k *keyedLocal) columns() []columnar.ColumnSchema {
	m, err := columnar.ReadManifest(k.liveDirs()[0])
	if err != nil {
		return nil
	}
	var out []columnar.ColumnSchema
	for _, c := range m.Schema {
		if !columnar.IsChangeColumn(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func (k *keyedLocal) liveDirs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.dirs...)
}

func (b *localBackend) keyedTable(ctx context.Context, table string) (*applier.Table, error) {
	switch {
	case table == "t":
		return nil, appendOnly("t")
	case table == "k" && b.keyed != nil:
		return b.keyed.t, nil
	}
	return nil, &pgError{code: "42P01", msg: fmt.Sprintf("relation %q does not exist", table)}
}

func (b *localBackend) currentRows(ctx context.Context, t *applier.Table, keys [][]byte) (map[string][]any, error) {
	var cs []*columnar.Container
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for _, dir := range b.keyed.liveDirs() {
		c, err := columnar.Open(dir, columnar.OpenOptions{})
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return readCurrentRows(ctx, cs, t, keys)
}

func (b *localBackend) applyChanges(ctx context.Context, evs []*messages.UpdateEvent) error {
	k := b.keyed
	k.mu.Lock()
	defer k.mu.Unlock()
	batch := k.t.NewBatch()
	for _, ev := range evs {
		if ev.Table != "k" || ev.EventID == "" {
			return fmt.Errorf("event %q of table %q", ev.EventID, ev.Table)
		}
		c, err := k.t.Change(ev)
		if err != nil {
			return fmt.Errorf("the walwriter would dead-letter event %s: %v", ev.EventID, err)
		}
		k.version++
		c.Version = k.version
		batch.Add(c)
		k.events = append(k.events, ev)
	}
	id := fmt.Sprintf("w%04d", k.version)
	dir := columnar.ContainerDir(k.dataDir, "k", "p", id)
	if _, err := batch.Write(dir, id, applier.WriteOptions{NoSync: true}); err != nil {
		return err
	}
	k.dirs = append(k.dirs, dir)
	return nil
}

func startKeyedServer(t testing.TB) *testServer {
	t.Helper()
	s := startServer(t, nil)
	ms, err := columnar.Generate(s.data, columnar.GenOptions{Table: "k", Projection: "p", Columns: 6, Containers: 2, RowsPerContainer: 50, BlockRows: 16, Seed: 5, Keyed: true})
	if err != nil {
		t.Fatal(err)
	}
	k := &keyedLocal{dataDir: s.data}
	for _, m := range ms {
		k.dirs = append(k.dirs, columnar.ContainerDir(s.data, m.Table, m.Projection, m.ID))
	}
	if k.t, err = applier.NewTable(ms[0]); err != nil {
		t.Fatal(err)
	}
	s.be.keyed = k
	return s
}

// keyedRow reads k's row of key k0 through a window query: "" if none.
func keyedRow(t *testing.T, c *pgx.Conn, k0 int64) string {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT k0, c001_utf8, c002_float64, c004_int32, c005_bool, count(*) OVER () AS n FROM k WHERE k0 = $1", k0)
	if err != nil {
		t.Fatal(err)
	}
	got := rowsOf(t, rows)
	switch len(got) {
	case 0:
		return ""
	case 1:
		return got[0]
	}
	t.Fatalf("key %d has %d rows: %v", k0, len(got), got)
	return ""
}

func execTag(t *testing.T, c *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	tag, err := c.Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.String()
}

// INSERT, UPDATE (of the row's own column) and DELETE of a keyed table
// become change events, and the next query of the session sees them;
// a key without a row changes nothing and says 0.
func TestChangeStatements(t *testing.T) {
	s := startKeyedServer(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			c := s.connect(t)
			c.Config().DefaultQueryExecMode = mode
			base := int64(1000 * (int(mode) + 1))
			if tag := execTag(t, c, "INSERT INTO k (k0, c001_utf8, c002_float64, c004_int32, c005_bool) VALUES ($1, $2, $3, $4, $5), ($6, 'two', 2.5, -7, false)",
				base, "it's", 1.25, int32(40), true, base+1); tag != "INSERT 0 2" {
				t.Fatalf("tag %q", tag)
			}
			if got, want := keyedRow(t, c, base), fmt.Sprintf("%d|it's|1.25|40|true|1", base); got != want {
				t.Fatalf("after INSERT: %q, want %q", got, want)
			}
			if got, want := keyedRow(t, c, base+1), fmt.Sprintf("%d|two|2.5|-7|false|1", base+1); got != want {
				t.Fatalf("after INSERT: %q, want %q", got, want)
			}
			if tag := execTag(t, c, "UPDATE k SET c004_int32 = c004_int32 + $1, c001_utf8 = c001_utf8 || '!' WHERE k0 = $2", 5, base); tag != "UPDATE 1" {
				t.Fatalf("tag %q", tag)
			}
			if got, want := keyedRow(t, c, base), fmt.Sprintf("%d|it's!|1.25|45|true|1", base); got != want {
				t.Fatalf("after UPDATE: %q, want %q", got, want)
			}
			if tag := execTag(t, c, "DELETE FROM k WHERE k0 = $1", base+1); tag != "DELETE 1" {
				t.Fatalf("tag %q", tag)
			}
			if got := keyedRow(t, c, base+1); got != "" {
				t.Fatalf("after DELETE: %q", got)
			}
			sent := len(s.be.keyed.events)
			if tag := execTag(t, c, "DELETE FROM k WHERE k0 = $1", base+1); tag != "DELETE 0" {
				t.Fatalf("DELETE of a missing key: tag %q", tag)
			}
			if tag := execTag(t, c, "UPDATE k SET c004_int32 = 1 WHERE k0 = $1", base+99); tag != "UPDATE 0" {
				t.Fatalf("UPDATE of a missing key: tag %q", tag)
			}
			if n := len(s.be.keyed.events); n != sent {
				t.Fatalf("a missing key sent %d events", n-sent)
			}
			// A timestamp parameter (binary in the extended protocol).
			ts := time.Date(2024, 1, 15, 10, 30, 0, 123456000, time.UTC)
			if tag := execTag(t, c, "UPDATE k SET c003_timestamp_us = $1 WHERE k0 = $2", ts, base); tag != "UPDATE 1" {
				t.Fatalf("tag %q", tag)
			}
			var got time.Time
			if err := c.QueryRow(context.Background(), "SELECT c003_timestamp_us, count(*) OVER () AS n FROM k WHERE k0 = $1", base).Scan(&got, new(int64)); err != nil || !got.Equal(ts) {
				t.Fatalf("timestamp %v (%v), want %v", got, err, ts)
			}
			// Upserts.
			if tag := execTag(t, c, "INSERT INTO k (k0, c004_int32) VALUES ($1, 1), ($2, 2) ON CONFLICT DO NOTHING", base, base+2); tag != "INSERT 0 1" {
				t.Fatalf("DO NOTHING: tag %q", tag)
			}
			if got, want := keyedRow(t, c, base+2), fmt.Sprintf("%d|<nil>|<nil>|2|<nil>|1", base+2); got != want {
				t.Fatalf("after DO NOTHING: %q, want %q", got, want)
			}
			if tag := execTag(t, c, "INSERT INTO k (k0, c004_int32) VALUES ($1, 10), ($2, 20) ON CONFLICT (k0) DO UPDATE SET c004_int32 = k.c004_int32 + EXCLUDED.c004_int32", base, base+3); tag != "INSERT 0 2" {
				t.Fatalf("DO UPDATE: tag %q", tag)
			}
			if got, want := keyedRow(t, c, base), fmt.Sprintf("%d|it's!|1.25|55|true|1", base); got != want {
				t.Fatalf("after DO UPDATE: %q, want %q", got, want)
			}
			if got, want := keyedRow(t, c, base+3), fmt.Sprintf("%d|<nil>|<nil>|20|<nil>|1", base+3); got != want {
				t.Fatalf("after DO UPDATE: %q, want %q", got, want)
			}
		})
	}
	// Each statement's events have IDs of their own: the same statement
	// again is a new change.
	ids := map[string]bool{}
	for _, ev := range s.be.keyed.events {
		if ids[ev.EventID] || !strings.HasPrefix(ev.EventID, "sql-") {
			t.Fatalf("event ID %q repeated or not a statement's", ev.EventID)
		}
		ids[ev.EventID] = true
	}
	// An UPDATE carries the row before it, a DELETE the key only.
	var ops []string
	for _, ev := range s.be.keyed.events[:4] {
		ops = append(ops, fmt.Sprintf("%s:%v:%v", ev.Op, ev.NewRow != nil, ev.OldRow != nil))
	}
	if got := strings.Join(ops, " "); got != "insert:true:false insert:true:false update:true:true delete:false:false" {
		t.Fatalf("events %s", got)
	}
}

// The errors of change statements, with PostgreSQL's SQLSTATEs; none of
// them sends a change.
func TestChangeStatementErrors(t *testing.T) {
	s := startKeyedServer(t)
	c := s.connect(t)
	ctx := context.Background()
	if tag := execTag(t, c, "INSERT INTO k (k0, c004_int32) VALUES (1000001, 5)"); tag != "INSERT 0 1" {
		t.Fatal(tag)
	}
	sent := len(s.be.keyed.events)
	for _, tc := range []struct{ sql, code, msg string }{
		{"INSERT INTO nope (a) VALUES (1)", "42P01", `relation "nope" does not exist`},
		{"UPDATE nope SET a = 1 WHERE a = 1", "42P01", ""},
		{"INSERT INTO k (k0, nope) VALUES (1, 2)", "42703", `column "nope" of relation "k" does not exist`},
		{"UPDATE k SET nope = 1 WHERE k0 = 1000001", "42703", ""},
		{"UPDATE k SET c004_int32 = nope + 1 WHERE k0 = 1000001", "42703", ""},
		{"INSERT INTO k (k0, _strata_version) VALUES (1, 2)", "42703", ""},
		{"INSERT INTO t (k0) VALUES (1)", "0A000", "table t is append-only: it has no primary key"},
		{"DELETE FROM t WHERE k0 = 1", "0A000", "append-only"},
		{"DELETE FROM k", "0A000", "must fix the whole primary key (k0)"},
		{"DELETE FROM k WHERE k0 > 5", "0A000", "must fix the whole primary key"},
		{"UPDATE k SET c004_int32 = 1 WHERE k0 = 1 OR k0 = 2", "0A000", "must fix the whole primary key"},
		{"UPDATE k SET c004_int32 = 1 WHERE c004_int32 = 1", "0A000", "must fix the whole primary key"},
		{"UPDATE k SET k0 = 5 WHERE k0 = 1000001", "0A000", "primary key column"},
		{"INSERT INTO k (k0) SELECT 1", "0A000", "INSERT ... SELECT"},
		{"INSERT INTO k (k0) VALUES (1) RETURNING k0", "0A000", "RETURNING"},
		{"UPDATE k SET c004_int32 = abs(-1) WHERE k0 = 1000001", "0A000", "function abs()"},
		{"INSERT INTO k (c004_int32) VALUES (1)", "23502", `null value in column "k0" of relation "k" violates not-null constraint`},
		{"INSERT INTO k (k0, c004_int32) VALUES (NULL, 1)", "23502", ""},
		{"INSERT INTO k (k0, c004_int32) VALUES (1, 'x')", "22P02", `invalid input syntax for type integer: "x"`},
		{"INSERT INTO k (k0, c004_int32) VALUES (1, 3000000000)", "22003", "integer out of range"},
		{"UPDATE k SET c004_int32 = c004_int32 * 1000000000 WHERE k0 = 1000001", "22003", "integer out of range"},
		{"UPDATE k SET c004_int32 = c004_int32 / 0 WHERE k0 = 1000001", "22012", "division by zero"},
		{"INSERT INTO k (k0, c004_int32) VALUES (1000001, 1)", "23505", "Key (k0)=(1000001) already exists"},
		{"INSERT INTO k (k0) VALUES (7000001), (7000001)", "23505", ""},
		{"INSERT INTO k (k0, c004_int32) VALUES (1, 2, 3)", "42601", "more expressions than target columns"},
		{"INSERT INTO k (k0) VALUES (1) ON CONFLICT (c004_int32) DO NOTHING", "42P10", ""},
		{"INSERT INTO k (k0) VALUES (1), (1) ON CONFLICT (k0) DO UPDATE SET c004_int32 = 1", "21000", ""},
		{"INSERT INTO k (k0, c005_bool) VALUES (1, 5)", "42804", `column "c005_bool" is of type boolean but expression is of type bigint`},
	} {
		_, err := c.Exec(ctx, tc.sql)
		wantCode(t, err, tc.code)
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want it to say %q", tc.sql, err, tc.msg)
		}
	}
	if n := len(s.be.keyed.events); n != sent {
		t.Fatalf("the refused statements sent %d events", n-sent)
	}
	// A WHERE no row can match sends nothing and says 0.
	for _, sql := range []string{"DELETE FROM k WHERE k0 = NULL", "DELETE FROM k WHERE k0 = 1 AND k0 = 2", "UPDATE k SET c004_int32 = 1 WHERE k0 = 99999999999999999"} {
		if tag := execTag(t, c, sql); !strings.HasSuffix(tag, " 0") {
			t.Errorf("%s: %q", sql, tag)
		}
	}
	// The session goes on after each error; a read-only user may not change.
	if got := keyedRow(t, c, 1000001); got != "1000001|<nil>|<nil>|5|<nil>|1" {
		t.Fatalf("after the errors: %q", got)
	}
	if err := pgauth.SetUser(s.data, "reader", pgauth.RoleRead, "reader-password"); err != nil {
		t.Fatal(err)
	}
	rc, err := pgx.Connect(ctx, s.url("reader", "reader-password", "disable"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	_, err = rc.Exec(ctx, "DELETE FROM k WHERE k0 = 1000001")
	wantCode(t, err, "42501")
	if got := keyedRow(t, c, 1000001); got == "" {
		t.Fatal("a read-only user deleted a row")
	}
}

// TestChangeMessages: a statement's one event goes as an update event;
// several as change batches, each under the payload limit, holding every
// event in order; a row too big for a message is 54000.
func TestChangeMessages(t *testing.T) {
	cols := []messages.RowType{messages.RowInt64, messages.RowText}
	ev := func(i, text int) *messages.UpdateEvent {
		key, _ := messages.EncodeRow(cols[:1], []any{int64(i)})
		row, _ := messages.EncodeRow(cols, []any{int64(i), strings.Repeat("r", text)})
		return &messages.UpdateEvent{EventID: fmt.Sprintf("sql-x-%d", i), Table: "acc", Columns: cols, Key: key, NewRow: row, Op: messages.OpInsert}
	}
	msgs, err := changeMessages([]*messages.UpdateEvent{ev(0, 10)}, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("one event: %d messages, %v", len(msgs), err)
	}
	if err := messages.Unmarshal(msgs[0].Data, &messages.UpdateEvent{}); err != nil || msgs[0].Header.Get(messages.HeaderMsgID) != "sql-x-0" {
		t.Errorf("one event: not sent as itself: %v", err)
	}

	var evs []*messages.UpdateEvent
	for i := range 3000 {
		evs = append(evs, ev(i, 500))
	}
	const limit = 256 << 10
	msgs, err = changeMessages(evs, limit)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for _, m := range msgs {
		var b messages.ChangeBatch
		if err := messages.Unmarshal(m.Data, &b); err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > limit || m.Header.Get(messages.HeaderMsgID) != b.BatchID {
			t.Errorf("batch %s: %d bytes (limit %d), Nats-Msg-Id %q", b.BatchID, len(m.Data), limit, m.Header.Get(messages.HeaderMsgID))
		}
		for i := range b.Changes {
			if string(b.Changes[i].Key) != string(evs[next].Key) {
				t.Fatalf("batch %s change %d is not event %d", b.BatchID, i, next)
			}
			next++
		}
	}
	if next != len(evs) || len(msgs) < 2 {
		t.Fatalf("%d events in %d batches, want %d in several", next, len(msgs), len(evs))
	}

	_, err = changeMessages([]*messages.UpdateEvent{ev(0, 10), ev(1, 300<<10)}, limit)
	var pe *pgError
	if !errors.As(err, &pe) || pe.code != "54000" {
		t.Errorf("a row over the limit: %v, want 54000", err)
	}
}
