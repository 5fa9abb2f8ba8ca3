package applier

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// Change is one change of a keyed table: its version, and either the key's
// new row or its deletion.
type Change struct {
	Version uint64
	Delete  bool
	Key     []byte   // the row encoding of the key columns' values
	Row     [][]byte // the new row's values (messages.SplitRow), one per column; nil for a delete
}

// Change checks a change event against the table and returns its change
// (without a version): its columns must be the table's, its row must
// decode to them, and its key must be the encoding of the row's key
// columns (of a delete: decode to the key columns' types). The error says
// which check failed; such an event is refused, never applied.
func (t *Table) Change(ev *messages.UpdateEvent) (Change, error) {
	if !slices.Equal(ev.Columns, t.types) {
		return Change{}, fmt.Errorf("columns %v do not match table %s's %v", ev.Columns, t.Name, t.types)
	}
	keyTypes := t.KeyTypes()
	if ev.IsDelete() {
		if _, err := messages.SplitRow(keyTypes, ev.Key); err != nil {
			return Change{}, fmt.Errorf("key does not encode the key columns (%v) of table %s: %v", keyTypes, t.Name, err)
		}
		return Change{Delete: true, Key: ev.Key}, nil
	}
	row, err := messages.SplitRow(t.types, ev.NewRow)
	if err != nil {
		return Change{}, fmt.Errorf("new_row: %v", err)
	}
	c := Change{Key: ev.Key, Row: row}
	if err := t.checkKey(c); err != nil {
		return Change{}, err
	}
	return c, nil
}

// checkKey checks that a row's key columns encode to its key.
func (t *Table) checkKey(c Change) error {
	want := make([]byte, 0, len(c.Key))
	for _, col := range t.keyIdx {
		v := c.Row[col]
		if v == nil {
			return fmt.Errorf("key column %q of table %s is NULL", t.Schema.Field(col).Name, t.Name)
		}
		want = binary.AppendUvarint(want, uint64(len(v))+1)
		want = append(want, v...)
	}
	if !bytes.Equal(want, c.Key) {
		return fmt.Errorf("key %x is not the encoding of the row's key columns (%x)", c.Key, want)
	}
	return nil
}

// Batch collects the changes of one table to be written as one container.
// Of several changes of a key it keeps the one of the highest version: the
// container holds one row per key.
type Batch struct {
	t       *Table
	byKey   map[string]int
	changes []Change
}

// NewBatch starts an empty batch of t's changes.
func (t *Table) NewBatch() *Batch { return &Batch{t: t, byKey: map[string]int{}} }

// Add adds c, unless the batch holds a change of its key of a higher
// version. c's slices must not change while the batch holds them.
func (b *Batch) Add(c Change) {
	if i, ok := b.byKey[string(c.Key)]; ok {
		if c.Version >= b.changes[i].Version {
			b.changes[i] = c
		}
		return
	}
	b.byKey[string(c.Key)] = len(b.changes)
	b.changes = append(b.changes, c)
}

// Len is the number of keys the batch changes.
func (b *Batch) Len() int { return len(b.changes) }

// Deletes is the number of keys the batch deletes.
func (b *Batch) Deletes() int {
	n := 0
	for _, c := range b.changes {
		if c.Delete {
			n++
		}
	}
	return n
}

// Record builds the batch's rows as one record batch of the table's
// schema, in the table's sort-key order: a row per key with its version,
// and a delete marker (key columns set, the others NULL, or zero where
// the column is not nullable) per deleted key.
func (b *Batch) Record(mem memory.Allocator) (arrow.RecordBatch, error) {
	t := b.t
	n := len(t.Schema.Fields())
	builders := make([]array.Builder, n)
	for i, f := range t.Schema.Fields() {
		builders[i] = array.NewBuilder(mem, f.Type)
		defer builders[i].Release()
	}
	isKey := make([]bool, n)
	for _, c := range t.keyIdx {
		isKey[c] = true
	}
	keyValues := make([][]byte, n)
	for _, c := range b.changes {
		vals := c.Row
		if c.Delete {
			kv, err := messages.SplitRow(t.KeyTypes(), c.Key)
			if err != nil {
				return nil, fmt.Errorf("table %s: key %x: %v", t.Name, c.Key, err)
			}
			clear(keyValues)
			for j, col := range t.keyIdx {
				keyValues[col] = kv[j]
			}
			vals = keyValues
		}
		for col := 0; col < n-2; col++ {
			f := t.Schema.Field(col)
			if c.Delete && !isKey[col] && !f.Nullable {
				builders[col].AppendEmptyValue()
				continue
			}
			if err := appendValue(builders[col], f.Type, vals[col]); err != nil {
				return nil, fmt.Errorf("table %s column %q: %w", t.Name, f.Name, err)
			}
		}
		if c.Version > math.MaxInt64 {
			return nil, fmt.Errorf("table %s: version %d out of range", t.Name, c.Version)
		}
		builders[n-2].(*array.Int64Builder).Append(int64(c.Version))
		builders[n-1].(*array.BooleanBuilder).Append(c.Delete)
	}
	cols := make([]arrow.Array, n)
	for i, bl := range builders {
		cols[i] = bl.NewArray()
		defer cols[i].Release()
	}
	if len(t.SortKey) > 0 && len(b.changes) > 1 {
		var err error
		if cols, err = sortColumns(mem, t, cols); err != nil {
			return nil, err
		}
		for _, c := range cols {
			defer c.Release()
		}
	}
	return array.NewRecordBatch(t.Schema, cols, int64(len(b.changes))), nil
}

// sortColumns returns cols permuted into the table's sort-key order.
func sortColumns(mem memory.Allocator, t *Table, cols []arrow.Array) ([]arrow.Array, error) {
	enc, err := columnar.NewKeyEncoder(t.Schema, t.SortKey)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	idx, _ := t.SortKey.Indices(t.Schema)
	keyCols := make([]arrow.Array, len(idx))
	for i, c := range idx {
		keyCols[i] = cols[c]
	}
	rows := cols[0].Len()
	// The rows' encoded keys back to back, row i's at buf[off[i]:off[i+1]].
	var buf []byte
	off := make([]int, rows+1)
	perm := make([]int, rows)
	for i := range rows {
		buf = enc.AppendRow(buf, keyCols, i)
		off[i+1] = len(buf)
		perm[i] = i
	}
	// Rows of equal keys keep their order: the same batch is the same
	// container.
	slices.SortFunc(perm, func(a, b int) int {
		if c := bytes.Compare(buf[off[a]:off[a+1]], buf[off[b]:off[b+1]]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make([]arrow.Array, len(cols))
	for i, c := range cols {
		if out[i], err = columnar.Take(mem, c, perm); err != nil {
			for _, o := range out[:i] {
				o.Release()
			}
			return nil, fmt.Errorf("table %s: sort: %w", t.Name, err)
		}
	}
	return out, nil
}

// appendValue appends one value of the row encoding (nil: NULL) to b.
func appendValue(b array.Builder, typ arrow.DataType, v []byte) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	i64 := func() int64 { return int64(binary.BigEndian.Uint64(v) ^ 1<<63) }
	inRange := func(x, lo, hi int64) error {
		if x < lo || x > hi {
			return fmt.Errorf("value %d out of the range of %s", x, typ)
		}
		return nil
	}
	switch bl := b.(type) {
	case *array.Int64Builder:
		bl.Append(i64())
	case *array.Int32Builder:
		x := i64()
		if err := inRange(x, math.MinInt32, math.MaxInt32); err != nil {
			return err
		}
		bl.Append(int32(x))
	case *array.Int16Builder:
		x := i64()
		if err := inRange(x, math.MinInt16, math.MaxInt16); err != nil {
			return err
		}
		bl.Append(int16(x))
	case *array.Int8Builder:
		x := i64()
		if err := inRange(x, math.MinInt8, math.MaxInt8); err != nil {
			return err
		}
		bl.Append(int8(x))
	case *array.Uint32Builder:
		x := i64()
		if err := inRange(x, 0, math.MaxUint32); err != nil {
			return err
		}
		bl.Append(uint32(x))
	case *array.Uint16Builder:
		x := i64()
		if err := inRange(x, 0, math.MaxUint16); err != nil {
			return err
		}
		bl.Append(uint16(x))
	case *array.Uint8Builder:
		x := i64()
		if err := inRange(x, 0, math.MaxUint8); err != nil {
			return err
		}
		bl.Append(uint8(x))
	case *array.Float64Builder:
		bl.Append(decodeFloat(v))
	case *array.Float32Builder:
		bl.Append(float32(decodeFloat(v)))
	case *array.BooleanBuilder:
		bl.Append(v[0] == 1)
	case *array.StringBuilder:
		bl.Append(string(v))
	case *array.LargeStringBuilder:
		bl.Append(string(v))
	case *array.BinaryBuilder:
		bl.Append(v)
	case *array.Date32Builder:
		bl.Append(arrow.Date32(int32(binary.BigEndian.Uint32(v) ^ 1<<31)))
	case *array.TimestampBuilder:
		bl.Append(arrow.Timestamp(i64()))
	default:
		return fmt.Errorf("type %s has no change-event row type", typ)
	}
	return nil
}

func decodeFloat(v []byte) float64 {
	bits := binary.BigEndian.Uint64(v)
	if bits&(1<<63) != 0 {
		bits ^= 1 << 63
	} else {
		bits = ^bits
	}
	return math.Float64frombits(bits)
}

// WriteOptions configure Batch.Write.
type WriteOptions struct {
	Compression columnar.Compression
	NoSync      bool // tests only
}

// Write writes the batch as the container dir (columnar.ContainerDir of
// the table's projection and id), committed atomically, and returns its
// manifest.
func (b *Batch) Write(dir, id string, opts WriteOptions) (*columnar.Manifest, error) {
	rec, err := b.Record(memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	w, err := columnar.Create(dir, columnar.WriterOptions{Table: b.t.Name, Projection: b.t.Projection, ID: id,
		Schema: b.t.Schema, SortKey: b.t.SortKey, PrimaryKey: b.t.PrimaryKey, Compression: opts.Compression, NoSync: opts.NoSync})
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		w.Abort()
		return nil, err
	}
	return w.Commit()
}

// Changes returns the batch's changes, one per key, in no order.
func (b *Batch) Changes() []Change { return b.changes }
