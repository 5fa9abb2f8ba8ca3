package windower

// The differential test of keyed tables' changes: random inserts, updates
// and deletes applied, as the walwriter applies them, to a loaded keyed
// container (applier.Batch, one container per batch), then random window
// queries over the containers before any mergeout, after a partial one
// (markers kept) and after a full one (markers dropped), at 1 and 4
// threads, in memory and spilling. The oracle is the brute-force current
// rows of the changes applied in version order: the reference evaluator
// over them (TestKeyedChangesAgainstReference, every run) and a real
// PostgreSQL table with a PRIMARY KEY to which the same changes are
// applied as INSERT ... ON CONFLICT DO UPDATE and DELETE
// (TestAgainstPostgresKeyed, `make test-postgres`).
//
// The changes cover: a key changed twice or more in one batch; a key
// deleted, then inserted again; a delete of a key that has no row; an
// insert or update of a key with or without a row (both are upserts,
// messages.OpInsert, OpUpdate); NULLs in every non-key column; strings
// of 0 to thousands of bytes, multi-byte UTF-8; keys of one int64 column
// (dense or sparse, for both of columnar.Superseded's int64 tables) and
// of two columns, text and int64 in either order; batches whose changes
// arrive out of version order (an event redelivered after later ones
// joins a later batch), changes applied twice (in two batches, and a
// batch of old events applied again after the partial mergeout).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// kcFields are the visible columns of the changed table: shapeSchema's
// (so the queries of TestAgainstPostgres apply) and k, n, the parts of a
// two-column key. id is unique over the current rows whatever the key.
var kcFields = append(slices.Clone(shapeSchema.Fields()),
	arrow.Field{Name: "k", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64})

var kcSchema = arrow.NewSchema(append(slices.Clone(kcFields), columnar.ChangeFields()...), nil)

// kcKeyTexts are the values of key column k: empty, one byte, prefixes of
// one another, multi-byte, combining, and long (hundreds of bytes). None
// holds '|' or a newline (psql's unaligned output splits on them).
var kcKeyTexts = []string{"", "a", "ab", "a b", "b", "é", "e\u0301", "日本語", "🙂", "ab🙂",
	strings.Repeat("x", 200), strings.Repeat("é", 150), strings.Repeat("ab🙂", 40) + "z"}

const kcTable = "strata_keyed_test"

// kcCase is one random table and its changes.
type kcCase struct {
	pk      []string
	sortKey columnar.SortKey
	keys    int   // the key space: key ids 0..keys+keys/4 (the last ones never loaded)
	stride  int64 // id of key id kid: base + kid*stride
	base    int64
	// blockRows of the containers the batches write (0: Batch.Write's
	// default) and of the merges' output.
	blockRows int
	big       bool // queried spilling too
}

func (c *kcCase) String() string {
	return fmt.Sprintf("pk %v, sort key %v, %d keys, id = %d + kid*%d, block rows %d", c.pk, c.sortKey, c.keys, c.base, c.stride, c.blockRows)
}

// keyOf is key id kid's id, k and n.
func (c *kcCase) keyOf(kid int) (int64, string, int64) {
	return c.base + int64(kid)*c.stride, kcKeyTexts[kid%len(kcKeyTexts)], int64(kid/len(kcKeyTexts)) - 5
}

// keyString names key id kid as keyString of a container row does.
func (c *kcCase) keyString(kid int) string {
	id, k, n := c.keyOf(kid)
	return c.keyValuesString(id, k, n)
}

func (c *kcCase) keyValuesString(id int64, k string, n int64) string {
	if len(c.pk) == 1 {
		return fmt.Sprint(id)
	}
	return fmt.Sprintf("%q/%d", k, n)
}

// kcRow is a row by column of kcFields.
type kcRow []refVal

// randomRow is a row of key id kid with random values, as shapeTable makes
// them: NULLs in every non-key column, strings of every length.
func (c *kcCase) randomRow(rng *rand.Rand, kid int) kcRow {
	id, k, n := c.keyOf(kid)
	null := func(p float64) bool { return rng.Float64() < p }
	g := refVal{null: null(0.05), kind: kindInt}
	if !g.null && rng.IntN(2) == 0 {
		g.i = int64(rng.IntN(6))
	}
	r := kcRow{
		{i: id, kind: kindInt},
		g,
		{null: null(0.15), i: int64(rng.IntN(12)) - 3, kind: kindInt},
		{null: null(0.15), f: float64(rng.IntN(20))/4 - 1, kind: kindFloat},
		{null: null(0.1), i: int64(rng.IntN(30)) * 1e6, kind: kindInt},
		{null: null(0.1), s: c.poolString(rng), kind: kindString},
		{null: null(0.1), i: calendarDay(rng)*86400e6 + int64([]int{0, 1, 11, 23}[rng.IntN(4)])*3600e6, kind: kindInt},
		{null: null(0.1), i: calendarDay(rng), kind: kindInt},
		{null: null(0.1), s: c.randomString(rng), kind: kindString},
		{s: k, kind: kindString},
		{i: n, kind: kindInt},
	}
	for i := range r {
		if r[i].null {
			r[i] = refVal{null: true, kind: r[i].kind}
		}
	}
	return r
}

// poolString is a value of s: shapePool's, of at most a few hundred
// bytes in a large case.
func (c *kcCase) poolString(rng *rand.Rand) string {
	for {
		if s := shapePool[rng.IntN(len(shapePool))]; !c.big || len(s) <= 400 {
			return s
		}
	}
}

// randomString is a value of u: randomString's, of at most about 150
// characters in a large case (whose rows a small grant must hold a
// thousand of).
func (c *kcCase) randomString(rng *rand.Rand) string {
	s := randomString(rng)
	if r := []rune(s); c.big && len(r) > 150 {
		return string(r[:100+rng.IntN(50)])
	}
	return s
}

// kcEvent is one change event: its version (the stream sequence), its
// key id and op, and the row of an insert or update.
type kcEvent struct {
	version int64
	kid     int
	op      string
	row     kcRow // nil for a delete
}

// kcEntry is what a container holds of a key: a row of a version, or a
// marker.
type kcEntry struct {
	kid     int
	version int64
	deleted bool
}

// kcState is the model: the events in version order and the current rows.
type kcState struct {
	load    map[int]kcRow
	events  []*kcEvent
	current map[int]kcRow
	// batches are the events as the walwriter's batches receive them, in
	// arrival order.
	batches [][]*kcEvent
}

// generate makes the load and the events, applies them to the model in
// version order, and deals them into batches as they would arrive.
func (c *kcCase) generate(rng *rand.Rand) *kcState {
	st := &kcState{load: map[int]kcRow{}, current: map[int]kcRow{}}
	for kid := range c.keys {
		if rng.IntN(10) < 8 {
			st.load[kid] = c.randomRow(rng, kid)
			st.current[kid] = st.load[kid]
		}
	}
	events := 2 + c.keys/2 + rng.IntN(c.keys+1)
	var recent []int
	for v := 1; v <= events; v++ {
		var kid int
		if len(recent) > 0 && rng.IntN(3) == 0 {
			kid = recent[rng.IntN(len(recent))] // changed again soon: often in the same batch
		} else {
			kid = rng.IntN(c.keys + c.keys/4 + 1)
		}
		e := &kcEvent{version: int64(v), kid: kid}
		_, has := st.current[kid]
		if r := rng.IntN(10); (has && r < 3) || (!has && r < 2) {
			e.op = messages.OpDelete // of a missing key when !has
			delete(st.current, kid)
		} else {
			e.op = []string{messages.OpInsert, messages.OpUpdate, messages.OpUpsert}[rng.IntN(3)]
			e.row = c.randomRow(rng, kid)
			st.current[kid] = e.row
		}
		st.events = append(st.events, e)
		recent = append(recent, kid)
		if len(recent) > 6 {
			recent = recent[1:]
		}
	}
	// Batches: consecutive events, some delayed into a later batch (an
	// event redelivered after later ones: it arrives after them), some
	// also applied a second time in a later batch; one batch in three
	// receives its events in a random order.
	nb := min(40, 1+len(st.events)/(1+rng.IntN(25)))
	regular := make([][]*kcEvent, nb)
	late := make([][]*kcEvent, nb)
	for i, e := range st.events {
		b := i * nb / len(st.events)
		if l := min(nb-1, b+1+rng.IntN(3)); l > b && rng.IntN(10) == 0 {
			late[l] = append(late[l], e)
		} else {
			regular[b] = append(regular[b], e)
		}
		if rng.IntN(15) == 0 {
			again := min(nb-1, b+rng.IntN(4))
			late[again] = append(late[again], e)
		}
	}
	for b := range nb {
		batch := append(regular[b], late[b]...)
		if rng.IntN(3) == 0 {
			rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		}
		if len(batch) > 0 {
			st.batches = append(st.batches, batch)
		}
	}
	return st
}

// kcTables writes an empty container of the table (a table the catalog
// knows) and returns the applier's view of it, as the walwriter has it.
func (c *kcCase) table(t *testing.T, dir string) (*applier.Table, string) {
	t.Helper()
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: "t", Projection: "p", ID: filepath.Base(dir), Schema: kcSchema,
		SortKey: c.sortKey, PrimaryKey: c.pk, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := applier.NewTable(m)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, dir
}

// change is the applier's change of event e, made the walwriter's way:
// the event encoded as a producer publishes it, validated, and checked
// against the table (applier.Table.Change).
func (c *kcCase) change(t *testing.T, tbl *applier.Table, e *kcEvent) applier.Change {
	t.Helper()
	id, k, n := c.keyOf(e.kid)
	byName := map[string]any{"id": id, "k": k, "n": n}
	var keyVals []any
	for _, name := range c.pk {
		keyVals = append(keyVals, byName[name])
	}
	key, err := messages.EncodeRow(tbl.KeyTypes(), keyVals)
	if err != nil {
		t.Fatal(err)
	}
	ev := &messages.UpdateEvent{EventID: fmt.Sprint("e", e.version), Table: "t", Columns: tbl.Types(), Key: key, Op: e.op}
	if e.row != nil {
		vals := make([]any, len(kcFields))
		for i, f := range kcFields {
			v := e.row[i]
			switch {
			case v.null:
			case f.Type.ID() == arrow.DATE32:
				vals[i] = int32(v.i)
			case v.kind == kindFloat:
				vals[i] = v.f
			case v.kind == kindString:
				vals[i] = v.s
			default:
				vals[i] = v.i
			}
		}
		if ev.NewRow, err = messages.EncodeRow(tbl.Types(), vals); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Validate(); err != nil {
		t.Fatal(err)
	}
	ch, err := tbl.Change(ev)
	if err != nil {
		t.Fatalf("event %d: %v", e.version, err)
	}
	ch.Version = uint64(e.version)
	return ch
}

// writeBatch writes events (in arrival order) as one container through
// applier.Batch, and returns what it holds of each key: the change of
// the highest version.
func (c *kcCase) writeBatch(t *testing.T, tbl *applier.Table, dir string, events []*kcEvent) []kcEntry {
	t.Helper()
	b := tbl.NewBatch()
	held := map[int]kcEntry{}
	for _, e := range events {
		b.Add(c.change(t, tbl, e))
		if old, ok := held[e.kid]; !ok || e.version >= old.version {
			held[e.kid] = kcEntry{kid: e.kid, version: e.version, deleted: e.op == messages.OpDelete}
		}
	}
	if b.Len() != len(held) {
		t.Fatalf("batch of %d events holds %d keys, want %d", len(events), b.Len(), len(held))
	}
	if c.blockRows == 0 {
		if _, err := b.Write(dir, filepath.Base(dir), applier.WriteOptions{NoSync: true}); err != nil {
			t.Fatal(err)
		}
	} else {
		// Batch.Write with small blocks.
		rec, err := b.Record(memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		w, err := columnar.Create(dir, columnar.WriterOptions{Table: tbl.Name, Projection: tbl.Projection, ID: filepath.Base(dir),
			Schema: tbl.Schema, SortKey: tbl.SortKey, PrimaryKey: tbl.PrimaryKey, BlockRows: c.blockRows, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var out []kcEntry
	for _, e := range held {
		out = append(out, e)
	}
	return out
}

// kcLive is a state of the table's live containers and what each holds.
type kcLive struct {
	dirs []string
	held [][]kcEntry
}

func (l *kcLive) rows() int {
	n := 0
	for _, h := range l.held {
		n += len(h)
	}
	return n
}

// fold is what a mergeout of containers held should write: each key's
// entry of the highest version, markers of version above through kept.
func fold(held [][]kcEntry, through int64) []kcEntry {
	best := map[int]kcEntry{}
	for _, h := range held {
		for _, e := range h {
			if b, ok := best[e.kid]; !ok || e.version > b.version {
				best[e.kid] = e
			}
		}
	}
	var out []kcEntry
	for _, e := range best {
		if !e.deleted || e.version > through {
			out = append(out, e)
		}
	}
	return out
}

// entryStrings formats entries for comparison, sorted.
func (c *kcCase) entryStrings(es []kcEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s v%d deleted=%v", c.keyString(e.kid), e.version, e.deleted)
	}
	slices.Sort(out)
	return out
}

// containerEntries reads the key, version and deleted columns of the
// container at dir, formatted as entryStrings does, sorted.
func (c *kcCase) containerEntries(t *testing.T, dir string) []string {
	t.Helper()
	ct, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	cols := []int{0, 9, 10, len(kcFields), len(kcFields) + 1} // id, k, n, version, deleted
	br, err := ct.OpenColumns(cols)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var out []string
	for b := 0; b < br.NumBlocks(); b++ {
		rec, err := br.ReadBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		ids, ks, ns := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String), rec.Column(2).(*array.Int64)
		vers, dels := rec.Column(3).(*array.Int64), rec.Column(4).(*array.Boolean)
		for r := 0; r < int(rec.NumRows()); r++ {
			out = append(out, fmt.Sprintf("%s v%d deleted=%v", c.keyValuesString(ids.Value(r), ks.Value(r), ns.Value(r)), vers.Value(r), dels.Value(r)))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// merge merges containers idx of live into one at dir with markers of
// version at most through dropped, checks what it wrote against fold, and
// returns live with the merged container in place of its inputs.
func (c *kcCase) merge(t *testing.T, live *kcLive, idx []int, dir string, through int64, rng *rand.Rand) *kcLive {
	t.Helper()
	var dirs []string
	var held [][]kcEntry
	out := &kcLive{}
	for i := range live.dirs {
		if slices.Contains(idx, i) {
			dirs = append(dirs, live.dirs[i])
			held = append(held, live.held[i])
		} else {
			out.dirs = append(out.dirs, live.dirs[i])
			out.held = append(out.held, live.held[i])
		}
	}
	st, err := merger.Merge(context.Background(), dirs, dir, merger.Options{Grant: []int64{8 << 20, 64 << 20}[rng.IntN(2)],
		BlockRows: max(c.blockRows, 5), TempDir: t.TempDir(), NoSync: true, DropMarkersThrough: through, Parallelism: 1 + rng.IntN(2)})
	if err != nil {
		t.Fatalf("merge of %d containers, markers dropped through %d: %v", len(dirs), through, err)
	}
	want := fold(held, through)
	got := c.containerEntries(t, dir)
	if w := c.entryStrings(want); !slices.Equal(got, w) {
		t.Fatalf("merge of %d containers, markers dropped through %d: wrote %d rows, want %d\n got %.600v\nwant %.600v", len(dirs), through, len(got), len(w), got, w)
	}
	in := 0
	for _, h := range held {
		in += len(h)
	}
	if st.Rows != int64(len(want)) || st.SupersededRows != int64(in-len(want)) {
		t.Errorf("merge stats: %d rows, %d superseded; want %d and %d", st.Rows, st.SupersededRows, len(want), in-len(want))
	}
	out.dirs = append(out.dirs, dir)
	out.held = append(out.held, want)
	return out
}

// kcQuery is a random query of TestAgainstPostgres's generator: 1-2
// window calls and a WHERE.
type kcQuery struct {
	sql   string
	where []messages.Predicate
	calls []*messages.WindowCall
	q     *messages.WindowQuery
}

func randomKCQuery(t *testing.T, rng *rand.Rand, c *kcCase) kcQuery {
	t.Helper()
	var kq kcQuery
	items := []string{"id"}
	for i := range 1 + rng.IntN(2) {
		w := randomCall(rng)
		for _, a := range w.Args {
			if a.Column == "s" && rng.IntN(2) == 0 {
				a.Column = "u"
			}
		}
		switch {
		case rng.IntN(4) == 0:
			calendarFrame(rng, w)
		case rng.IntN(4) == 0:
			// Over the key's text part.
			w.PartitionBy = []messages.Expr{{Column: "k"}}
		case c.sortKey != nil && c.sortKey[0].Name == "g" && rng.IntN(2) == 0:
			// The containers' sort key: one container streams sorted.
			w.PartitionBy = []messages.Expr{{Column: "g"}}
			w.OrderBy = []messages.SortItem{{Expr: messages.Expr{Column: "id"}}}
			if w.Frame != nil {
				w.Frame = randomFrame(rng, w.OrderBy)
			}
		}
		deterministic(w)
		kq.calls = append(kq.calls, w)
		items = append(items, fmt.Sprintf("%s AS w%d", callSQL(w), i))
	}
	kq.where = shapeWheres[rng.IntN(len(shapeWheres))]
	kq.sql = "SELECT " + strings.Join(items, ", ") + " FROM " + kcTable + whereSQL(kq.where) + " ORDER BY id"
	q, err := sqlparse.Parse(strings.Replace(kq.sql, kcTable, "t", 1))
	if err != nil {
		t.Fatalf("%s: %v", kq.sql, err)
	}
	kq.q = q
	return kq
}

// kcAllColumns selects every visible column.
const kcAllColumns = "SELECT id, g, x, f, t, s, c, d, u, k, n FROM t ORDER BY id"

// refTable is the model's current rows, by id.
func (st *kcState) refTable() *refTable {
	rows := make([]kcRow, 0, len(st.current))
	for _, r := range st.current {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b kcRow) int { return cmpInt(a[0].i, b[0].i) })
	t := &refTable{cols: map[string][]refVal{}, n: len(rows), micros: map[string]int64{"t": 1, "c": 1, "d": 86400e6}}
	for _, r := range rows {
		for i, f := range kcFields {
			t.cols[f.Name] = append(t.cols[f.Name], r[i])
		}
	}
	return t
}

// kcSQLValue is v as a PostgreSQL literal of column name.
func kcSQLValue(name string, v refVal) string {
	switch {
	case v.null:
		return "NULL"
	case name == "t" || name == "c":
		return "'" + time.UnixMicro(v.i).UTC().Format("2006-01-02 15:04:05.999999") + "'::timestamp"
	case name == "d":
		return "'" + time.Unix(v.i*86400, 0).UTC().Format("2006-01-02") + "'::date"
	case v.kind == kindFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64) + "::float8"
	case v.kind == kindString:
		return "'" + strings.ReplaceAll(v.s, "'", "''") + "'"
	}
	return strconv.FormatInt(v.i, 10)
}

// pgScript is the SQL that makes the table in PostgreSQL: the load, then
// the events in version order, inserts and updates as upserts.
func (c *kcCase) pgScript(st *kcState) string {
	var b strings.Builder
	names := make([]string, len(kcFields))
	var set []string
	for i, f := range kcFields {
		names[i] = f.Name
		if !slices.Contains(c.pk, f.Name) {
			set = append(set, f.Name+" = EXCLUDED."+f.Name)
		}
	}
	fmt.Fprintf(&b, "DROP TABLE IF EXISTS %s;\nCREATE TABLE %s (id bigint NOT NULL, g int, x bigint, f float8, t timestamp, s text COLLATE \"C\", c timestamp, d date, u text COLLATE \"C\", k text COLLATE \"C\" NOT NULL, n bigint NOT NULL, PRIMARY KEY (%s));\nBEGIN;\n",
		kcTable, kcTable, strings.Join(c.pk, ", "))
	values := func(r kcRow) string {
		vals := make([]string, len(r))
		for i, f := range kcFields {
			vals[i] = kcSQLValue(f.Name, r[i])
		}
		return strings.Join(vals, ", ")
	}
	kids := make([]int, 0, len(st.load))
	for kid := range st.load {
		kids = append(kids, kid)
	}
	slices.Sort(kids)
	for i, kid := range kids {
		if i == 0 {
			fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES\n", kcTable, strings.Join(names, ", "))
		} else {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "(%s)", values(st.load[kid]))
	}
	if len(kids) > 0 {
		b.WriteString(";\n")
	}
	for _, e := range st.events {
		if e.op == messages.OpDelete {
			id, k, n := c.keyOf(e.kid)
			byName := map[string]string{"id": fmt.Sprint(id), "k": kcSQLValue("k", refVal{s: k, kind: kindString}), "n": fmt.Sprint(n)}
			var conds []string
			for _, name := range c.pk {
				conds = append(conds, name+" = "+byName[name])
			}
			fmt.Fprintf(&b, "DELETE FROM %s WHERE %s;\n", kcTable, strings.Join(conds, " AND "))
			continue
		}
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s;\n",
			kcTable, strings.Join(names, ", "), values(e.row), strings.Join(c.pk, ", "), strings.Join(set, ", "))
	}
	b.WriteString("COMMIT;\n")
	return b.String()
}

// psqlScript runs a script of statements.
func psqlScript(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("psql script: %v\n%s", err, out)
	}
}

// pgRows parses psql's unaligned rows into their fields, by id (the
// first), checking that no id repeats.
func pgRows(t *testing.T, out string, fields int) map[int64][]string {
	t.Helper()
	rows := map[int64][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != fields {
			t.Fatalf("psql row %q: %d fields, want %d", line, len(f), fields)
		}
		id, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("psql row %q: %v", line, err)
		}
		if _, dup := rows[id]; dup {
			t.Fatalf("psql returned id %d twice", id)
		}
		rows[id] = f[1:]
	}
	return rows
}

// kcRun is one way a state is queried: threads, in memory or spilling.
type kcRun struct {
	threads int
	spill   bool
}

// kcBudget is how much a spilling run gets: room is the grant's, which a
// ballast keeps at least MinGrant (as TestParallelOnePartitionSmallGrant
// does).
func (r kcRun) options(t *testing.T, room int64) Options {
	o := Options{Threads: r.threads, TempDir: t.TempDir()}
	if r.spill {
		ballast := max(0, MinGrant-room)
		b := columnar.NewBudget(room+ballast, nil)
		if err := b.Reserve(ballast); err != nil {
			t.Fatal(err)
		}
		o.Budget = b
	}
	return o
}

// spillRoom is the room under which Run spills q over the containers at
// dirs: just below what the query's plan estimates its input takes in
// memory (run, runResolved) once the versions are resolved, and enough
// for resolving them. ok is false when no room is both (the key table
// resolving the versions takes more than the query's input).
func spillRoom(t *testing.T, q *messages.WindowQuery, dirs []string) (room int64, ok bool) {
	t.Helper()
	var cs []*columnar.Container
	var schema *arrow.Schema
	for _, d := range dirs {
		c, err := columnar.Open(d, columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs, schema = append(cs, c), c.Schema()
	}
	p, err := compile(q, schema)
	if err != nil {
		t.Fatal(err)
	}
	p.measureStrings(cs)
	b := columnar.NewBudget(1<<40, nil)
	res, err := columnar.Superseded(context.Background(), cs, columnar.ResolveOptions{Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	held := b.InUse() // the bitmaps, held while the query runs
	res.Release()
	need := p.memoryPerRow() * res.Live
	// Resolving within Run, the budget also holds the input's block
	// buffers (columnar.Recycler): slack for them.
	room = max(held+need*7/8, b.Peak()*5/4+128<<10)
	return room, room < held+need
}

// kcTally counts what the runs did, to check the test covers what it claims.
type kcTally struct {
	runs, spillRuns, spilled, refused, unspillable, sortedInput, pgQueries, refChecks, plainChecks int
}

// kcChecker runs the queries of one case over each state.
type kcChecker struct {
	c       *kcCase
	st      *kcState
	ref     *refTable
	queries []kcQuery
	// want[q][call][id]: the reference's values (or, over more rows than
	// it takes, RunRecords's over the current rows in one plain batch);
	// pg[q]: PostgreSQL's rows as printed, to compare with pgEqual (nil
	// without PostgreSQL).
	want  [][]map[int64]refVal
	pg    []map[int64][]string
	spill bool // the case is large enough to spill
	tally *kcTally
}

// check runs every query over the state's containers at 1 and 4 threads
// in memory and, in a large case, spilling, and compares the results
// with the oracles.
func (k *kcChecker) check(t *testing.T, label string, live *kcLive) {
	t.Helper()
	ctx := context.Background()
	total := live.rows()
	allQ, err := sqlparse.Parse(kcAllColumns)
	if err != nil {
		t.Fatal(err)
	}
	runs := []kcRun{{1, false}, {4, false}}
	if k.spill {
		runs = append(runs, kcRun{1, true}, kcRun{4, true})
	}
	for qi := -1; qi < len(k.queries); qi++ {
		q, sql := allQ, kcAllColumns
		if qi >= 0 {
			q, sql = k.queries[qi].q, k.queries[qi].sql
		}
		var first []string
		var room int64
		if k.spill {
			var ok bool
			if room, ok = spillRoom(t, q, live.dirs); !ok {
				k.tally.unspillable++
				room = 0
			}
		}
		for _, r := range runs {
			if r.spill && room == 0 {
				continue
			}
			what := fmt.Sprintf("%s, %d containers, threads %d, spilling %v: %s", label, len(live.dirs), r.threads, r.spill, sql)
			o := r.options(t, room)
			res, err := Run(ctx, q, live.dirs, o)
			if r.spill {
				k.tally.spillRuns++
			}
			if err != nil {
				if r.spill && (errors.Is(err, ErrGrantTooSmall) || errors.Is(err, merger.ErrGrantTooSmall) ||
					errors.Is(err, ErrUnsupported) && strings.Contains(err.Error(), "partition larger than the grant")) {
					// Documented limits (TestShapesDifferential): refused with
					// the reason, never run over the grant.
					k.tally.refused++
					continue
				}
				t.Fatalf("%s: %v", what, err)
			}
			cols, rows := readResult(t, res, 0)
			stats := res.Stats()
			res.Close()
			k.tally.runs++
			if r.spill {
				if stats.SpilledBytes == 0 {
					t.Errorf("%s: nothing spilled with %d bytes of room", what, room)
				}
				k.tally.spilled++
				if stats.PeakBytes > o.Budget.Limit() {
					t.Errorf("%s: peak %d bytes over the %d-byte grant", what, stats.PeakBytes, o.Budget.Limit())
				}
			}
			if stats.SortedInput {
				k.tally.sortedInput++
			}
			if stats.SupersededRows != int64(total-len(k.st.current)) {
				t.Errorf("%s: %d rows superseded, want %d of %d", what, stats.SupersededRows, total-len(k.st.current), total)
			}
			if first == nil {
				first = rows
			} else if !slices.Equal(rows, first) {
				t.Fatalf("%s: other rows or another order than threads 1 in memory", what)
			}
			if qi < 0 {
				k.checkAll(t, what, cols)
				continue
			}
			k.checkQuery(t, what, qi, cols)
		}
	}
}

// plainWant is the oracle of a query over more rows than the reference
// takes: RunRecords over the model's current rows in one batch of an
// unkeyed schema (itself checked against the reference by
// TestDifferential), by call and id.
func (k *kcChecker) plainWant(t *testing.T, kq kcQuery) []map[int64]refVal {
	t.Helper()
	schema := arrow.NewSchema(kcFields, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for r := range k.ref.n {
		for c, f := range kcFields {
			v := k.ref.cols[f.Name][r]
			if v.null {
				b.Field(c).AppendNull()
				continue
			}
			switch fb := b.Field(c).(type) {
			case *array.Int64Builder:
				fb.Append(v.i)
			case *array.Int32Builder:
				fb.Append(int32(v.i))
			case *array.Float64Builder:
				fb.Append(v.f)
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(v.i))
			case *array.Date32Builder:
				fb.Append(arrow.Date32(v.i))
			case *array.StringBuilder:
				fb.Append(v.s)
			default:
				t.Fatalf("column %s: builder %T", f.Name, fb)
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	res, err := RunRecords(context.Background(), kq.q, schema, []arrow.RecordBatch{rec}, Options{Grant: 1 << 30, Threads: 1})
	if err != nil {
		t.Fatalf("oracle %s: %v", kq.sql, err)
	}
	defer res.Close()
	return resultColumns(t, res, 0)[1:]
}

// checkAll compares every column of the current rows with the model.
func (k *kcChecker) checkAll(t *testing.T, what string, cols []map[int64]refVal) {
	t.Helper()
	ids := k.ref.cols["id"]
	for c, f := range kcFields {
		if len(cols[c]) != len(ids) {
			t.Fatalf("%s: %d rows, want %d", what, len(cols[c]), len(ids))
		}
		for r, id := range ids {
			want := k.ref.cols[f.Name][r]
			if got, ok := cols[c][id.i]; !ok || !sameValue(got, want) {
				t.Fatalf("%s: id %d column %s: %+v, want %+v", what, id.i, f.Name, short(got), short(want))
			}
		}
	}
}

// checkQuery compares a window query's result with PostgreSQL's (if
// any) and with the reference evaluator's.
func (k *kcChecker) checkQuery(t *testing.T, what string, qi int, cols []map[int64]refVal) {
	t.Helper()
	if pg := k.pg[qi]; pg != nil {
		if len(cols[0]) != len(pg) {
			t.Fatalf("%s: %d rows, postgres %d", what, len(cols[0]), len(pg))
		}
		for id, fields := range pg {
			for c, val := range fields {
				g, ok := cols[c+1][id]
				if !ok || !pgEqual(val, g) {
					t.Fatalf("%s\nid %d, %s: postgres %q, windower %+v", what, id, describeCall(k.queries[qi].calls[c]), val, short(g))
				}
			}
		}
	}
	if want := k.want[qi]; want != nil {
		for c, w := range want {
			if len(cols[c+1]) != len(w) {
				t.Fatalf("%s: %d rows, the reference %d", what, len(cols[c+1]), len(w))
			}
			for id, wv := range w {
				if g, ok := cols[c+1][id]; !ok || !sameValue(g, wv) {
					t.Fatalf("%s\nid %d, %s: windower %+v, reference %+v", what, id, describeCall(k.queries[qi].calls[c]), short(g), short(wv))
				}
			}
		}
	}
}

// randomKCCase is the shape of a random case: the key, the sort key, the
// ids' stride (1: a dense int64 key table; large: a map) and the blocks.
func randomKCCase(rng *rand.Rand, it int, big bool) *kcCase {
	c := &kcCase{keys: []int{1, 4, 25, 120, 400}[rng.IntN(5)], stride: 1, blockRows: []int{0, 3, 7, 16}[rng.IntN(4)]}
	if big {
		// Enough rows to spill within a grant that still holds the
		// sorted runs' 1024 rows, in blocks much smaller than that.
		c.keys, c.blockRows, c.big = 6000, []int{16, 64, 256}[rng.IntN(3)], true
	}
	switch it % 3 {
	case 0:
		c.pk = []string{"id"}
	case 1:
		c.pk = []string{"k", "n"}
	default:
		c.pk = []string{"n", "k"}
	}
	if rng.IntN(2) == 0 {
		c.stride = 1 + rng.Int64N(1<<32)
	}
	if rng.IntN(3) == 0 {
		c.base = -int64(c.keys/3) * c.stride // some ids negative
	}
	// A table has a sort key (strata load --sort-key): the key's, or
	// other columns (one the queries partition on; strings, descending,
	// NULLs first).
	switch rng.IntN(3) {
	case 0:
		for _, name := range c.pk {
			c.sortKey = append(c.sortKey, columnar.SortColumn{Name: name})
		}
	case 1:
		c.sortKey = columnar.SortKey{{Name: "g"}, {Name: "id"}}
	default:
		c.sortKey = columnar.SortKey{{Name: "u", Desc: true, NullsFirst: true}, {Name: "x"}}
	}
	return c
}

// keyedChangesDifferential runs iterations random cases: the table made
// by changes over a load, queried before any mergeout, after a partial
// one and after a full one, compared with the reference evaluator and,
// with pg, with PostgreSQL.
func keyedChangesDifferential(t *testing.T, seed uint64, iterations, bigEvery, queries int, pg bool) *kcTally {
	parallelSmall(t)
	rng := rand.New(rand.NewPCG(seed, 31))
	tally := &kcTally{}
	for it := range iterations {
		big := it%bigEvery == bigEvery-1
		c := randomKCCase(rng, it, big)
		label := fmt.Sprintf("iteration %d (%s)", it, c)
		st := c.generate(rng)
		root := t.TempDir()
		tbl, empty := c.table(t, filepath.Join(root, "empty"))
		// The load (version 0) and the batches, as the walwriter writes them.
		var load []*kcEvent
		for kid, r := range st.load {
			load = append(load, &kcEvent{kid: kid, op: messages.OpInsert, row: r})
		}
		live := &kcLive{}
		live.dirs = append(live.dirs, filepath.Join(root, "load"))
		live.held = append(live.held, c.writeBatch(t, tbl, live.dirs[0], load))
		for b, events := range st.batches {
			d := filepath.Join(root, fmt.Sprintf("wal-%d", b))
			live.held = append(live.held, c.writeBatch(t, tbl, d, events))
			live.dirs = append(live.dirs, d)
		}
		if rng.IntN(3) == 0 {
			live.dirs, live.held = append(live.dirs, empty), append(live.held, nil)
		}
		order := rng.Perm(len(live.dirs))
		shuffled := &kcLive{}
		for _, i := range order {
			shuffled.dirs, shuffled.held = append(shuffled.dirs, live.dirs[i]), append(shuffled.held, live.held[i])
		}
		live = shuffled

		k := &kcChecker{c: c, st: st, ref: st.refTable(), spill: big, tally: tally}
		if pg {
			psqlScript(t, c.pgScript(st))
			// PostgreSQL's table is the model's current rows.
			out := psql(t, "SELECT id, g, x, f, t, s, c, d - DATE '1970-01-01', u, k, n FROM "+kcTable+" ORDER BY id", "")
			rows := pgRows(t, out, len(kcFields))
			if len(rows) != k.ref.n {
				t.Fatalf("%s: postgres has %d rows, the model %d", label, len(rows), k.ref.n)
			}
			for r, id := range k.ref.cols["id"] {
				for c, f := range kcFields[1:] {
					if val := rows[id.i][c]; !pgEqual(val, k.ref.cols[f.Name][r]) {
						t.Fatalf("%s: postgres id %d column %s: %q, the model %+v", label, id.i, f.Name, val, short(k.ref.cols[f.Name][r]))
					}
				}
			}
		}
		nq := queries
		if big {
			nq = 2
		}
		for range nq {
			kq := randomKCQuery(t, rng, c)
			k.queries = append(k.queries, kq)
			var pgRes map[int64][]string
			if pg {
				pgRes = pgRows(t, psql(t, kq.sql, ""), 1+len(kq.calls))
				tally.pgQueries++
			}
			k.pg = append(k.pg, pgRes)
			var want []map[int64]refVal
			if kept := k.ref.filtered(kq.where); kept.n <= refMaxRows {
				if !refOverflows(kept, kq.calls) {
					ids := kept.cols["id"]
					for _, w := range kq.calls {
						m := map[int64]refVal{}
						for r, v := range refWindow(kept, w) {
							m[ids[r].i] = v
						}
						want = append(want, m)
					}
					tally.refChecks++
				}
			} else {
				want = k.plainWant(t, kq)
				tally.plainChecks++
			}
			k.want = append(k.want, want)
		}

		// Before any mergeout.
		k.check(t, label+", before mergeout", live)
		// A partial mergeout (markers kept): a random subset of two or
		// more containers, sometimes all of them; then a batch of old
		// events applied again (a WAL replayed), sometimes.
		if len(live.dirs) >= 2 {
			var idx []int
			if rng.IntN(4) == 0 {
				idx = rng.Perm(len(live.dirs))
			} else {
				idx = rng.Perm(len(live.dirs))[:2+rng.IntN(len(live.dirs)-1)]
			}
			live = c.merge(t, live, idx, filepath.Join(root, "partial"), 0, rng)
		}
		if rng.IntN(2) == 0 {
			var again []*kcEvent
			for _, e := range st.events {
				if rng.IntN(6) == 0 {
					again = append(again, e)
				}
			}
			rng.Shuffle(len(again), func(i, j int) { again[i], again[j] = again[j], again[i] })
			if len(again) > 0 {
				d := filepath.Join(root, "replayed")
				live.held = append(live.held, c.writeBatch(t, tbl, d, again))
				live.dirs = append(live.dirs, d)
			}
		}
		k.check(t, label+", after a partial mergeout", live)
		// A full mergeout, markers dropped through the highest version.
		all := make([]int, len(live.dirs))
		for i := range all {
			all[i] = i
		}
		live = c.merge(t, live, all, filepath.Join(root, "full"), int64(len(st.events)), rng)
		if got := live.rows(); got != len(st.current) {
			t.Fatalf("%s: the full mergeout wrote %d rows, want the %d current", label, got, len(st.current))
		}
		k.check(t, label+", after a full mergeout", live)
	}
	if pg {
		psql(t, "DROP TABLE IF EXISTS "+kcTable, "")
	}
	t.Logf("%d cases: %d runs (%d spilling: %d spilled, %d refused for the grant; %d queries with less input than key table, not spilled; %d streamed sorted input), %d PostgreSQL queries, %d checked against the reference, %d against RunRecords",
		iterations, tally.runs, tally.spillRuns, tally.spilled, tally.refused, tally.unspillable, tally.sortedInput, tally.pgQueries, tally.refChecks, tally.plainChecks)
	if tally.spillRuns == 0 || tally.refused > tally.spillRuns/4 || tally.spilled < tally.spillRuns*2/3 || tally.unspillable > tally.spillRuns/4 {
		t.Errorf("of %d spilling runs, %d spilled and %d were refused for the grant; %d queries could not spill", tally.spillRuns, tally.spilled, tally.refused, tally.unspillable)
	}
	return tally
}

// TestKeyedChangesAgainstReference: the differential of changes, checked
// against the reference evaluator (and the model's rows) only.
func TestKeyedChangesAgainstReference(t *testing.T) {
	keyedChangesDifferential(t, 41, 6, 6, 2, false)
}

// TestAgainstPostgresKeyed: the differential of changes against
// PostgreSQL, as TestAgainstPostgres (STRATA_TEST_POSTGRES=1, psql on PATH,
// the PG* variables; `make test-postgres`). It creates and drops a table
// named strata_keyed_test. STRATA_TEST_POSTGRES_SEED=N draws its cases from
// seed N instead of 43.
func TestAgainstPostgresKeyed(t *testing.T) {
	if os.Getenv("STRATA_TEST_POSTGRES") != "1" {
		t.Skip("set STRATA_TEST_POSTGRES=1 and the PG* variables to compare with a PostgreSQL server")
	}
	iterations, bigEvery := 12, 12
	if s := os.Getenv("STRATA_TEST_POSTGRES_KEYED_ITERATIONS"); s != "" {
		iterations, _ = strconv.Atoi(s)
		bigEvery = 6
	}
	seed := uint64(43)
	if s := os.Getenv("STRATA_TEST_POSTGRES_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STRATA_TEST_POSTGRES_SEED=%q: %v", s, err)
		}
	}
	keyedChangesDifferential(t, seed, iterations, bigEvery, 3, true)
}
