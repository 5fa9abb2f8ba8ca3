package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
)

// runChange runs an INSERT, UPDATE or DELETE of a keyed table: its rows
// become change events (the key's current row read from the live
// containers where the statement needs it), published on
// strata.updates.<table>, and the statement completes once the walwriter
// has made them visible, so the session's next query sees them.
func (s *session) runChange(ctx context.Context, st *stmt) error {
	cs := st.change
	p, err := s.newChangePlan(ctx, cs)
	if err != nil {
		return err
	}
	var n int
	switch cs.kind {
	case "INSERT":
		n, err = p.insert(ctx, s.srv.sched)
	case "UPDATE", "DELETE":
		n, err = p.byKey(ctx, s.srv.sched)
	}
	if err != nil {
		return changeBackendError(ctx, err)
	}
	if err := s.publish(ctx, p); err != nil {
		return err
	}
	tag := cs.kind + " " + strconv.Itoa(n)
	if cs.kind == "INSERT" {
		tag = "INSERT 0 " + strconv.Itoa(n)
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

// newChangePlan checks that the session may change cs's table and that
// the table has a primary key, and starts the statement's plan.
func (s *session) newChangePlan(ctx context.Context, cs *changeStmt) (*changePlan, error) {
	if s.user.Role != pgauth.RoleWrite {
		return nil, &pgError{code: "42501", msg: fmt.Sprintf("permission denied for table %s: user %q has role %s; %s needs role write (strata auth pg-user %s --role write)",
			cs.table, s.user.Name, s.user.Role, cs.kind, s.user.Name)}
	}
	t, err := s.srv.sched.keyedTable(ctx, cs.table)
	if err != nil {
		return nil, changeBackendError(ctx, err)
	}
	p := &changePlan{t: t, tc: &tableCols{name: t.Name}, cs: cs, idPrefix: newEventPrefix()}
	for _, f := range t.Schema.Fields() {
		if !columnar.IsChangeColumn(f.Name) {
			p.tc.fields = append(p.tc.fields, f)
		}
	}
	return p, nil
}

// publish sends the plan's events, if any, and returns once they are
// visible to queries.
func (s *session) publish(ctx context.Context, p *changePlan) error {
	if len(p.events) == 0 {
		return nil
	}
	if err := s.srv.sched.applyChanges(ctx, p.events); err != nil {
		if ctx.Err() != nil {
			return &pgError{code: "57014", msg: context.Cause(ctx).Error() + ": the changes were sent, and become visible whether or not this statement waits for them"}
		}
		return changeBackendError(ctx, err)
	}
	return nil
}

func changeBackendError(ctx context.Context, err error) error {
	var pe *pgError
	if errors.As(err, &pe) || ctx.Err() != nil {
		return err
	}
	return jobError(err)
}

// newEventPrefix is a statement's event ID prefix: random, so a client
// that sends the statement again makes new changes, as PostgreSQL would.
func newEventPrefix() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "sql-" + hex.EncodeToString(b[:]) + "-"
}

// changePlan turns one statement into change events.
type changePlan struct {
	t        *applier.Table
	tc       *tableCols
	cs       *changeStmt
	idPrefix string
	events   []*messages.UpdateEvent
}

func (p *changePlan) event(op string, key []byte, row, old []any) error {
	ev := &messages.UpdateEvent{EventID: p.idPrefix + strconv.Itoa(len(p.events)), Table: p.t.Name, Columns: p.t.Types(), Key: key, Op: op}
	var err error
	if row != nil {
		if ev.NewRow, err = messages.EncodeRow(p.t.Types(), row); err != nil {
			return &pgError{code: "XX000", msg: fmt.Sprintf("%s of %s: encoding the row: %v", p.cs.kind, p.t.Name, err)}
		}
	}
	if old != nil {
		if ev.OldRow, err = messages.EncodeRow(p.t.Types(), old); err != nil {
			return &pgError{code: "XX000", msg: fmt.Sprintf("%s of %s: encoding the old row: %v", p.cs.kind, p.t.Name, err)}
		}
	}
	if err := ev.Validate(); err != nil {
		return &pgError{code: "XX000", msg: fmt.Sprintf("%s of %s: %v", p.cs.kind, p.t.Name, err)}
	}
	p.events = append(p.events, ev)
	return nil
}

// keyOf encodes row's key, refusing a NULL key column (23502) and, of a
// whole row, NULL in a column that is not nullable.
func (p *changePlan) keyOf(row []any, whole bool) ([]byte, error) {
	key := make([]any, len(p.t.KeyColumns()))
	for i, c := range p.t.KeyColumns() {
		key[i] = row[c]
	}
	if whole {
		for i, v := range row {
			if v == nil && (!p.tc.fields[i].Nullable || slices.Contains(p.t.KeyColumns(), i)) {
				return nil, &pgError{code: "23502", msg: fmt.Sprintf("null value in column %q of relation %q violates not-null constraint", p.tc.fields[i].Name, p.t.Name)}
			}
		}
	}
	k, err := messages.EncodeRow(p.t.KeyTypes(), key)
	if err != nil {
		return nil, &pgError{code: "XX000", msg: fmt.Sprintf("%s of %s: encoding the key: %v", p.cs.kind, p.t.Name, err)}
	}
	return k, nil
}

// keyText is "(a, b)=(1, x)" for a key violation's message.
func (p *changePlan) keyText(row []any) string {
	var names, vals []string
	for _, c := range p.t.KeyColumns() {
		names = append(names, p.tc.fields[c].Name)
		vals = append(vals, textOfValue(wrapValue(p.tc.fields[c].Type, row[c])))
	}
	return fmt.Sprintf("(%s)=(%s)", strings.Join(names, ", "), strings.Join(vals, ", "))
}

// wrapValue is a row value as the evaluator holds it.
func wrapValue(t arrow.DataType, v any) any {
	switch x := v.(type) {
	case int64:
		if t.ID() == arrow.TIMESTAMP {
			return tsVal(x)
		}
	case int32:
		return dateVal(x)
	}
	return v
}

// unwrapValue is an evaluator's value as messages.EncodeRow takes it.
func unwrapValue(v any) any {
	switch x := v.(type) {
	case tsVal:
		return int64(x)
	case dateVal:
		return int32(x)
	}
	return v
}

// setColumns evaluates SET items over e into row (a copy of the current
// row). A key column may not be set: a row's key is what it is.
func (p *changePlan) setColumns(e *env, row []any) error {
	seen := map[int]bool{}
	for _, it := range p.cs.set {
		i, err := p.tc.index(it.col)
		if err != nil {
			return err
		}
		if seen[i] {
			return &pgError{code: "42601", msg: fmt.Sprintf("multiple assignments to same column %q", p.tc.fields[i].Name)}
		}
		seen[i] = true
		v, err := e.eval(it.expr)
		if err != nil {
			return err
		}
		nv, err := assign(v, p.tc.fields[i].Type, false, p.tc.fields[i].Name)
		if err != nil {
			return err
		}
		if slices.Contains(p.t.KeyColumns(), i) {
			if !slices.Equal(mustKey(p, row), mustKey(p, withValue(row, i, unwrapValue(nv)))) {
				return notSupported(fmt.Sprintf("%s of a primary key column (%q of %s): delete the row and insert it with its new key", p.cs.kind, p.tc.fields[i].Name, p.t.Name))
			}
		}
		row[i] = unwrapValue(nv)
	}
	return nil
}

func withValue(row []any, i int, v any) []any {
	out := slices.Clone(row)
	out[i] = v
	return out
}

func mustKey(p *changePlan, row []any) []byte {
	k, err := p.keyOf(row, false)
	if err != nil {
		return nil
	}
	return k
}

// insert makes the events of an INSERT: every row's values evaluated and
// checked first, then the keys' current rows read: a key that has one
// is a unique violation (23505) unless ON CONFLICT says otherwise.
func (p *changePlan) insert(ctx context.Context, be backend) (int, error) {
	cs := p.cs
	cols, err := p.targetColumns()
	if err != nil {
		return 0, err
	}
	if cs.target != nil {
		var want []int
		for _, name := range cs.target {
			i, err := p.tc.index(name)
			if err != nil {
				return 0, err
			}
			want = append(want, i)
		}
		got := slices.Clone(p.t.KeyColumns())
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return 0, &pgError{code: "42P10", msg: fmt.Sprintf("there is no unique or exclusion constraint matching the ON CONFLICT specification: the key of %s is (%s)", p.t.Name, strings.Join(p.t.PrimaryKey, ", "))}
		}
	}
	e := &env{tbl: p.tc, where: "INSERT"}
	rows := make([][]any, 0, len(cs.values))
	keys := make([][]byte, 0, len(cs.values))
	for r, vals := range cs.values {
		if len(vals) > len(cols) {
			return 0, &pgError{code: "42601", msg: "INSERT has more expressions than target columns"}
		}
		if len(vals) < len(cols) {
			return 0, &pgError{code: "42601", msg: "INSERT has more target columns than expressions"}
		}
		row := make([]any, len(p.tc.fields))
		for j, n := range vals {
			v, err := e.eval(n)
			if err != nil {
				return 0, err
			}
			c := cols[j]
			nv, err := assign(v, p.tc.fields[c].Type, false, p.tc.fields[c].Name)
			if err != nil {
				return 0, rowError(err, r, len(cs.values))
			}
			row[c] = unwrapValue(nv)
		}
		key, err := p.keyOf(row, true)
		if err != nil {
			return 0, rowError(err, r, len(cs.values))
		}
		rows = append(rows, row)
		keys = append(keys, key)
	}
	return p.insertRows(ctx, be, rows, keys)
}

// targetColumns are the indexes of the columns an INSERT (or COPY) names,
// in its order; every column in table order when it names none.
func (p *changePlan) targetColumns() ([]int, error) {
	cols := make([]int, 0, len(p.tc.fields))
	if p.cs.cols == nil {
		for i := range p.tc.fields {
			cols = append(cols, i)
		}
		return cols, nil
	}
	seen := map[int]bool{}
	for _, name := range p.cs.cols {
		i, err := p.tc.index(name)
		if err != nil {
			return nil, err
		}
		if seen[i] {
			return nil, &pgError{code: "42701", msg: fmt.Sprintf("column %q specified more than once", p.tc.fields[i].Name)}
		}
		seen[i] = true
		cols = append(cols, i)
	}
	return cols, nil
}

// insertRows makes the events of inserting rows (checked, with their
// keys): the keys' current rows are read, and a key that has one is a
// unique violation (23505) unless ON CONFLICT says otherwise; so is a key
// twice among the rows.
func (p *changePlan) insertRows(ctx context.Context, be backend, rows [][]any, keys [][]byte) (int, error) {
	cs := p.cs
	current, err := be.currentRows(ctx, p.t, keys)
	if err != nil {
		return 0, err
	}
	done := map[string]bool{} // keys this statement has written
	n := 0
	for r, row := range rows {
		key := keys[r]
		old, exists := current[string(key)]
		if done[string(key)] {
			switch cs.conflict {
			case conflictNothing:
				continue
			case conflictUpdate:
				return 0, &pgError{code: "21000", msg: "ON CONFLICT DO UPDATE command cannot affect row a second time: the VALUES hold key " + p.keyText(row) + " twice"}
			}
			exists = true
		}
		if exists {
			switch cs.conflict {
			case conflictError:
				return 0, &pgError{code: "23505", msg: fmt.Sprintf("duplicate key value violates unique constraint \"%s_pkey\": Key %s already exists", p.t.Name, p.keyText(row))}
			case conflictNothing:
				continue
			}
			nrow := slices.Clone(old)
			if err := p.setColumns(&env{tbl: p.tc, row: old, excluded: row, where: "ON CONFLICT DO UPDATE"}, nrow); err != nil {
				return 0, err
			}
			if _, err := p.keyOf(nrow, true); err != nil {
				return 0, err
			}
			if err := p.event(messages.OpUpdate, key, nrow, old); err != nil {
				return 0, err
			}
		} else if err := p.event(messages.OpInsert, key, row, nil); err != nil {
			return 0, err
		}
		done[string(key)] = true
		n++
	}
	return n, nil
}

func rowError(err error, r, rows int) error {
	var pe *pgError
	if rows > 1 && errors.As(err, &pe) {
		return &pgError{code: pe.code, msg: fmt.Sprintf("%s (VALUES row %d)", pe.msg, r+1), pos: pe.pos}
	}
	return err
}

// byKey makes the event of an UPDATE or DELETE: its WHERE fixes the key,
// the key's current row is read; a key without one changes nothing (0).
func (p *changePlan) byKey(ctx context.Context, be backend) (int, error) {
	key, ok, err := p.whereKey()
	if err != nil || !ok {
		return 0, err
	}
	current, err := be.currentRows(ctx, p.t, [][]byte{key})
	if err != nil {
		return 0, err
	}
	old, exists := current[string(key)]
	if !exists {
		return 0, nil
	}
	if p.cs.kind == "DELETE" {
		return 1, p.event(messages.OpDelete, key, nil, nil)
	}
	row := slices.Clone(old)
	if err := p.setColumns(&env{tbl: p.tc, row: old, where: "UPDATE"}, row); err != nil {
		return 0, err
	}
	if _, err := p.keyOf(row, true); err != nil {
		return 0, err
	}
	return 1, p.event(messages.OpUpdate, key, row, old)
}

// whereKey reads the key a WHERE fixes: key column = constant, one for
// every key column, joined with AND (constant = column too). ok is false
// when no row can match (a key column compared with NULL, or with two
// different values).
func (p *changePlan) whereKey() (key []byte, ok bool, err error) {
	refuse := notSupported(fmt.Sprintf("%s of %s with this WHERE: it must fix the whole primary key (%s) with equalities, key = constant [AND ...]",
		p.cs.kind, p.t.Name, strings.Join(p.t.PrimaryKey, ", ")))
	if p.cs.where == nil {
		return nil, false, refuse
	}
	var conds []*pg.Node
	var flatten func(n *pg.Node) bool
	flatten = func(n *pg.Node) bool {
		if b := n.GetBoolExpr(); b != nil {
			if b.Boolop != pg.BoolExprType_AND_EXPR {
				return false
			}
			for _, a := range b.Args {
				if !flatten(a) {
					return false
				}
			}
			return true
		}
		conds = append(conds, n)
		return true
	}
	if !flatten(p.cs.where) {
		return nil, false, refuse
	}
	row := make([]any, len(p.tc.fields))
	set := map[int]bool{}
	noRow := false
	e := &env{tbl: p.tc, where: "WHERE"}
	for _, c := range conds {
		a := c.GetAExpr()
		if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Name[0].GetString_().Sval != "=" {
			return nil, false, refuse
		}
		colSide, valSide := a.Lexpr, a.Rexpr
		if colSide.GetColumnRef() == nil {
			colSide, valSide = valSide, colSide
		}
		cr := colSide.GetColumnRef()
		if cr == nil {
			return nil, false, refuse
		}
		fields := cr.Fields
		if len(fields) == 2 && fields[0].GetString_() != nil && fields[0].GetString_().Sval == p.t.Name {
			fields = fields[1:]
		}
		if len(fields) != 1 || fields[0].GetString_() == nil {
			return nil, false, refuse
		}
		i, err := p.tc.index(fields[0].GetString_().Sval)
		if err != nil {
			return nil, false, err
		}
		if !slices.Contains(p.t.KeyColumns(), i) {
			return nil, false, refuse
		}
		v, err := e.eval(valSide)
		if err != nil {
			return nil, false, err
		}
		nv, err := assign(v, p.tc.fields[i].Type, false, p.tc.fields[i].Name)
		if err != nil {
			var pe *pgError
			if errors.As(err, &pe) && pe.code == "22003" {
				noRow = true // no row has a value out of the column's range
				continue
			}
			return nil, false, err
		}
		nv = unwrapValue(nv)
		if nv == nil {
			noRow = true
			continue
		}
		if set[i] && !equalValue(row[i], nv) {
			noRow = true
		}
		row[i], set[i] = nv, true
	}
	for _, c := range p.t.KeyColumns() {
		if !set[c] && !noRow {
			return nil, false, refuse
		}
	}
	if noRow {
		return nil, false, nil
	}
	key, err = p.keyOf(row, false)
	return key, err == nil, err
}

func equalValue(a, b any) bool {
	if x, ok := a.([]byte); ok {
		y, _ := b.([]byte)
		return string(x) == string(y)
	}
	return a == b
}

// ---- the current rows of keys ----

// readCurrentRows returns the current row of each of keys that has one,
// by key encoding, over a keyed table's live containers cs (versions
// resolved with columnar.Superseded), as messages.EncodeRow takes its
// values.
func readCurrentRows(ctx context.Context, cs []*columnar.Container, t *applier.Table, keys [][]byte) (map[string][]any, error) {
	out := map[string][]any{}
	want := map[string]bool{}
	for _, k := range keys {
		want[string(k)] = true
	}
	if len(want) == 0 || len(cs) == 0 {
		return out, nil
	}
	res, err := columnar.Superseded(ctx, cs, columnar.ResolveOptions{})
	if err != nil {
		return nil, fmt.Errorf("table %s: current rows: %w", t.Name, err)
	}
	defer res.Release()
	ncols := len(t.Types())
	cols := make([]int, ncols)
	for i := range cols {
		cols[i] = i
	}
	keyTypes, keyCols := t.KeyTypes(), t.KeyColumns()
	kv := make([]any, len(keyCols))
	for i, ct := range cs {
		dropped := res.Dropped[i]
		br, err := ct.OpenColumns(cols)
		if err != nil {
			return nil, fmt.Errorf("table %s: container %s: %w", t.Name, ct.Manifest().ID, err)
		}
		base := 0
		for {
			if err := ctx.Err(); err != nil {
				br.Close()
				return nil, err
			}
			rec, err := br.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				br.Close()
				return nil, fmt.Errorf("table %s: container %s: %w", t.Name, ct.Manifest().ID, err)
			}
			for r := range int(rec.NumRows()) {
				if dropped != nil && dropped.Contains(uint32(base+r)) {
					continue
				}
				for j, c := range keyCols {
					kv[j] = applier.Value(rec.Column(c), r)
				}
				k, err := messages.EncodeRow(keyTypes, kv)
				if err != nil || !want[string(k)] {
					continue
				}
				row := make([]any, ncols)
				for j := range row {
					row[j] = applier.Value(rec.Column(j), r)
				}
				out[string(k)] = row
			}
			base += int(rec.NumRows())
			rec.Release()
		}
		br.Close()
	}
	return out, nil
}

// ---- the scheduler's side: catalog, containers, UPDATES ----

// keyedTable describes table from the catalog and a live container's
// manifest: 42P01 if the catalog does not have it, 0A000 if it has no
// primary key.
func (c *schedulerClient) keyedTable(ctx context.Context, table string) (*applier.Table, error) {
	for attempt := 1; ; attempt++ {
		pc, err := c.projection(ctx, table)
		if err != nil {
			return nil, err
		}
		ref := pc.Live[0]
		var m *columnar.Manifest
		if c.st != nil {
			m, err = store.ReadManifest(ctx, c.st, ref.Table, ref.Projection, ref.ID)
		} else {
			m, err = columnar.ReadManifest(columnar.ContainerDir(c.dataDir, ref.Table, ref.Projection, ref.ID))
		}
		if errors.Is(err, columnar.ErrNotFound) && attempt < 3 {
			continue // retired by a mergeout since the catalog named it
		}
		if err != nil {
			return nil, &pgError{code: "58030", msg: fmt.Sprintf("the schema of %s.%s, from container %s: %v", pc.Table, pc.Projection, ref.ID, err)}
		}
		t, err := applier.NewTable(m)
		if err != nil {
			return nil, &pgError{code: "XX000", msg: err.Error()}
		}
		return t, nil
	}
}

// projection is table's projection in the catalog (the first, if it has
// several: a change is of the table, every projection gets it).
func (c *schedulerClient) projection(ctx context.Context, table string) (messages.ProjectionCatalog, error) {
	var rep messages.CatalogReply
	if err := c.api.Call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: table}, &rep); err != nil {
		return messages.ProjectionCatalog{}, err
	}
	missing := &pgError{code: "42P01", msg: fmt.Sprintf("relation %q does not exist", table)}
	if rep.Error != nil {
		if rep.Error.Code == "not_found" {
			return messages.ProjectionCatalog{}, missing
		}
		return messages.ProjectionCatalog{}, rep.Error
	}
	for _, pc := range rep.Projections {
		if pc.Table != table || pc.Projection == messages.ResultProjection {
			continue
		}
		if len(pc.PrimaryKey) == 0 {
			return pc, appendOnly(table)
		}
		if len(pc.Live) == 0 {
			return pc, &pgError{code: "55000", msg: fmt.Sprintf("%s.%s has no live containers, so no schema", pc.Table, pc.Projection)}
		}
		return pc, nil
	}
	return messages.ProjectionCatalog{}, missing
}

func appendOnly(table string) *pgError {
	return &pgError{code: "0A000", msg: fmt.Sprintf("table %s is append-only: it has no primary key (load it with strata load --primary-key COLS to change it by key)", table)}
}

// currentRows reads the current rows of keys from t's live containers
// (the data directory, or the store).
func (c *schedulerClient) currentRows(ctx context.Context, t *applier.Table, keys [][]byte) (map[string][]any, error) {
	for attempt := 1; ; attempt++ {
		rows, err := c.readCurrent(ctx, t, keys)
		if errors.Is(err, columnar.ErrNotFound) && attempt < 3 {
			continue // a container retired by a mergeout since the catalog named it
		}
		return rows, err
	}
}

func (c *schedulerClient) readCurrent(ctx context.Context, t *applier.Table, keys [][]byte) (map[string][]any, error) {
	pc, err := c.projection(ctx, t.Name)
	if err != nil {
		return nil, err
	}
	var cs []*columnar.Container
	defer func() {
		for _, ct := range cs {
			ct.Close()
		}
	}()
	for _, ref := range pc.Live {
		var ct *columnar.Container
		if c.st != nil {
			var src *store.Source
			if src, _, err = store.OpenSource(ctx, c.st, ref.Table, ref.Projection, ref.ID); err == nil {
				ct, err = columnar.OpenSource(src, columnar.OpenOptions{})
			}
		} else {
			ct, err = columnar.Open(columnar.ContainerDir(c.dataDir, ref.Table, ref.Projection, ref.ID), columnar.OpenOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("%s.%s: container %s: %w", pc.Table, pc.Projection, ref.ID, err)
		}
		cs = append(cs, ct)
	}
	return readCurrentRows(ctx, cs, t, keys)
}

// applyChanges publishes evs on strata.updates.<table> and waits until the
// walwriter's consumer has acknowledged them all, which it does once they
// are visible (or dead-lettered: then the error says why). One event goes
// as an update event; several as change batches (messages.ChangeBatch),
// as many as fit in a message each, so a statement that fits one message
// is applied whole or not at all. Each message has Nats-Msg-Id = its ID.
func (c *schedulerClient) applyChanges(ctx context.Context, evs []*messages.UpdateEvent) error {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return err
	}
	// The first asynchronous publish gives js a reply subscription and a
	// goroutine, which live as long as the connection unless cleaned up:
	// one of each per statement otherwise.
	defer js.CleanupPublisher()
	mark, markErr := deadLetterMark(ctx, js)
	subject := messages.SubjectUpdates(evs[0].Table)
	msgs, err := changeMessages(evs, c.nc.MaxPayload())
	if err != nil {
		return err
	}
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, msg := range msgs {
		msg.Subject = subject
		fut, err := js.PublishMsgAsync(msg)
		if err != nil {
			fut = nil // published in line below
		}
		futs = append(futs, fut)
	}
	seqs := make([]uint64, len(msgs))
	var last uint64
	for i, fut := range futs {
		var ack *jetstream.PubAck
		if fut != nil {
			select {
			case ack = <-fut.Ok():
			case <-fut.Err():
			case <-time.After(30 * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if ack == nil {
			// Failed or not acknowledged: again with the same
			// Nats-Msg-Id, so the stream stores it once.
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			ack, err = natsutil.PublishRetry(rctx, js, msgs[i])
			cancel()
			if err != nil {
				return &pgError{code: "08006", msg: fmt.Sprintf("publishing message %d of %d of changes on %s: %v (the earlier ones were stored)", i+1, len(msgs), subject, err)}
			}
		}
		if ack.Stream != messages.StreamUpdates {
			return fmt.Errorf("changes %s were stored in stream %s, not %s", msgs[i].Header.Get(messages.HeaderMsgID), ack.Stream, messages.StreamUpdates)
		}
		seqs[i] = ack.Sequence
		last = max(last, ack.Sequence)
	}
	if err := c.waitVisible(ctx, js, last); err != nil {
		return err
	}
	if markErr != nil {
		return nil // the dead letters cannot be read: the changes are acknowledged
	}
	return deadLettered(ctx, js, mark, subject, seqs)
}

// changeMessages encodes evs as the messages applyChanges sends (without
// a subject): one update event, or change batches under maxPayload.
func changeMessages(evs []*messages.UpdateEvent, maxPayload int64) ([]*nats.Msg, error) {
	limit := messages.PayloadLimit(maxPayload)
	var msgs []*nats.Msg
	add := func(id string, m messages.Message) error {
		data, err := messages.Marshal(m)
		if err != nil {
			return fmt.Errorf("changes %s: %w", id, err)
		}
		if len(data) > limit {
			return &pgError{code: "54000", msg: fmt.Sprintf("a row of %d bytes is more than the NATS server takes in one message (%d bytes)", len(data), limit)}
		}
		msg := &nats.Msg{Data: data, Header: nats.Header{}}
		msg.Header.Set(messages.HeaderMsgID, id)
		msgs = append(msgs, msg)
		return nil
	}
	if len(evs) == 1 {
		return msgs, add(evs[0].EventID, evs[0])
	}
	b := messages.NewBatcher(messages.MaxBatchChanges, maxPayload)
	for _, ev := range evs {
		if full := b.Add(ev); full != nil {
			if err := add(full.BatchID, full); err != nil {
				return nil, err
			}
		}
	}
	full := b.Flush()
	return msgs, add(full.BatchID, full)
}

// waitVisible polls the walwriter consumer's ack floor until it passes
// last, for at most c.changeTimeout.
func (c *schedulerClient) waitVisible(ctx context.Context, js jetstream.JetStream, last uint64) error {
	timeout := c.changeTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := js.Consumer(ictx, messages.StreamUpdates, messages.ConsumerWalwriter)
		cancel()
		switch {
		case err == nil:
			info := cons.CachedInfo()
			if info.AckFloor.Stream >= last {
				return nil
			}
			if time.Now().After(deadline) {
				return &pgError{code: "58000", msg: fmt.Sprintf("the changes are stored (stream sequence %d) but not visible after %v: the walwriter has acknowledged through %d, %d events pending; is a walwriter running? They become visible once it applies them",
					last, timeout, info.AckFloor.Stream, info.NumAckPending+int(info.NumPending))}
			}
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			return &pgError{code: "55000", msg: fmt.Sprintf("no consumer %s on stream %s: the scheduler creates it; the changes are stored and wait for it", messages.ConsumerWalwriter, messages.StreamUpdates)}
		case ctx.Err() != nil:
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

func deadLetterMark(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq, nil
}

// deadLettered returns an error naming the reason if the walwriter
// dead-lettered any of the changes stored at seqs on subject (looked
// for after mark, DEADLETTER's last sequence before they were sent).
func deadLettered(ctx context.Context, js jetstream.JetStream, mark uint64, subject string, seqs []uint64) error {
	s, err := js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		return nil
	}
	for seq := mark + 1; seq <= s.CachedInfo().State.LastSeq; seq++ {
		msg, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if msg.Subject != messages.SubjectDeadLetter(subject) && msg.Header.Get(messages.HeaderSubject) != subject {
			continue
		}
		orig, err := strconv.ParseUint(msg.Header.Get(messages.HeaderStreamSeq), 10, 64)
		if err != nil || !slices.Contains(seqs, orig) {
			continue
		}
		return &pgError{code: "XX000", msg: fmt.Sprintf("the walwriter refused a change (stream sequence %d) and dead-lettered it: %s", orig, msg.Header.Get(messages.HeaderReason))}
	}
	return nil
}
