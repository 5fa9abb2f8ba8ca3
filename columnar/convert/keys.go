package convert

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// Keyed imports (ImportOptions.PrimaryKey): see the package doc, # Primary
// keys.

// ErrNullKey is wrapped by the error refusing a NULL in a primary key
// column.
var ErrNullKey = errors.New("NULL in a primary key column")

// A DuplicateKeyError refuses a keyed import in which two rows have the
// same primary key. It names the first such row in input order (the
// first row whose key an earlier row already had) and that earlier row.
// It wraps columnar.ErrDuplicateKey.
type DuplicateKeyError struct {
	Columns []string // the primary key
	Values  []string // the duplicate key's values, as CSV writes them (text quoted)
	// Row and First are the 1-based input rows (in input order, header
	// not counted) of the duplicate and of the earlier row with its key;
	// Line and FirstLine their CSV lines (1-based, the header being line
	// 1), 0 for other inputs.
	Row, First      int64
	Line, FirstLine int
}

func (e *DuplicateKeyError) Error() string {
	key := "(" + strings.Join(e.Columns, ", ") + ")=(" + strings.Join(e.Values, ", ") + ")"
	if e.Line > 0 {
		return fmt.Sprintf("duplicate primary key %s: line %d repeats line %d", key, e.Line, e.FirstLine)
	}
	return fmt.Sprintf("duplicate primary key %s: row %d repeats row %d", key, e.Row, e.First)
}

func (e *DuplicateKeyError) Unwrap() error { return columnar.ErrDuplicateKey }

// KeyCheckStats is what an import's primary key check did: the keys it
// checked, in how many runs (one per container), the bytes of its
// temporary file, and the time it took beyond writing the containers
// (encoding and sorting each container's keys, writing its run, merging
// the runs).
type KeyCheckStats struct {
	Keys     int64
	Runs     int
	RunBytes int64
	Elapsed  time.Duration
}

// rowLiner says which line of its input a row (0-based, in input order)
// starts on: the CSV source.
type rowLiner interface{ rowLine(row int64) int }

// rowLines maps the rows of a CSV input to their lines in a few bytes
// however many rows there are: a run of rows whose line is row+delta is
// one entry, and a new run starts only where a row spans lines or a blank
// line is skipped.
type rowLines struct {
	from  []int64 // first row of each run
	delta []int64 // its line minus its row
}

func (l *rowLines) add(row int64, line int) {
	d := int64(line) - row
	if n := len(l.delta); n == 0 || l.delta[n-1] != d {
		l.from = append(l.from, row)
		l.delta = append(l.delta, d)
	}
}

func (l *rowLines) line(row int64) int {
	i := sort.Search(len(l.from), func(i int) bool { return l.from[i] > row }) - 1
	if i < 0 {
		return 0
	}
	return int(row + l.delta[i])
}

// checkKeyColumns checks the input schema against the primary key: no
// input column uses the change columns' prefix, and each key column is
// in the schema once and named once.
func checkKeyColumns(schema *arrow.Schema, pk []string) error {
	for _, f := range schema.Fields() {
		if columnar.IsChangeColumn(f.Name) {
			return fmt.Errorf("%w: column %q: names starting with _strata_ are reserved", columnar.ErrSchemaMismatch, f.Name)
		}
	}
	for i, name := range pk {
		if slices.Index(pk[:i], name) >= 0 {
			return fmt.Errorf("primary key: column %q named twice", name)
		}
		if len(schema.FieldIndices(name)) != 1 {
			return fmt.Errorf("%w: primary key column %q is not in the input (its columns: %s)", columnar.ErrSchemaMismatch, name, nameList(fieldNames(schema)))
		}
	}
	return nil
}

func fieldNames(schema *arrow.Schema) []string {
	names := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		names[i] = f.Name
	}
	return names
}

// KeyedSchema is the schema of a keyed table's containers made from rows
// of schema: the key columns not null, every other column nullable (a
// delete marker has them NULL), then the change columns.
func KeyedSchema(schema *arrow.Schema, pk []string) *arrow.Schema {
	fields := slices.Clone(schema.Fields())
	for i := range fields {
		fields[i].Nullable = !slices.Contains(pk, fields[i].Name)
	}
	fields = append(fields, columnar.ChangeFields()...)
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// keyCheck refuses NULL and duplicate primary keys in an import. Each
// container's keys are written, sorted, as a run to one temporary file
// (each entry: the normalized key, the row's input position and its row
// in the container); a k-way merge of the runs then finds equal keys
// across containers, holding one buffer per run. A key equal to its
// neighbour within a run stops the import after that container: the
// first duplicate in input order is then among the containers written.
type keyCheck struct {
	o      *ImportOptions
	in     *arrow.Schema // the input's
	out    *arrow.Schema // the containers'
	idx    []int         // the key columns' positions in both
	enc    *columnar.KeyEncoder
	prefix bool // the key's columns lead the sort key: a container's order is its run's
	liner  rowLiner

	f    *os.File
	w    *bufio.Writer
	off  int64
	runs []keyRun
	dup  bool // a run holds a key twice
	buf  []byte
	keys int64
	took time.Duration
}

// keyRun is one container's section of the run file.
type keyRun struct{ start, end int64 }

func newKeyCheck(schema *arrow.Schema, src batchSource, o *ImportOptions) (*keyCheck, error) {
	if err := checkKeyColumns(schema, o.PrimaryKey); err != nil {
		return nil, err
	}
	kc := &keyCheck{o: o, in: schema, out: KeyedSchema(schema, o.PrimaryKey)}
	kc.liner, _ = src.(rowLiner)
	for _, name := range o.PrimaryKey {
		kc.idx = append(kc.idx, schema.FieldIndices(name)[0])
	}
	// The runs are in the containers' order when the key's columns are the
	// sort key's first columns, in any order: rows of one key are then
	// adjacent, and the normalized keys of those sort-key columns order
	// the runs. Otherwise each run is sorted on the key's own.
	key := make(columnar.SortKey, len(o.PrimaryKey))
	for i, name := range o.PrimaryKey {
		key[i] = columnar.SortColumn{Name: name}
	}
	if len(o.SortKey) >= len(key) {
		lead := make([]string, len(key))
		for i, c := range o.SortKey[:len(key)] {
			lead[i] = c.Name
		}
		kc.prefix = true
		for _, name := range o.PrimaryKey {
			kc.prefix = kc.prefix && slices.Contains(lead, name)
		}
		if kc.prefix {
			key = o.SortKey[:len(key)]
			// Ordered as the sort key lists them: the encoder's columns.
			kc.idx = kc.idx[:0]
			for _, c := range key {
				kc.idx = append(kc.idx, schema.FieldIndices(c.Name)[0])
			}
		}
	}
	enc, err := columnar.NewKeyEncoder(schema, key)
	if err != nil {
		return nil, fmt.Errorf("primary key: %w", err)
	}
	kc.enc = enc
	f, err := os.CreateTemp(o.TempDir, "strata-keys-*")
	if err != nil {
		return nil, fmt.Errorf("primary key check: %w", err)
	}
	os.Remove(f.Name()) // gone with the last descriptor, however the import ends
	kc.f, kc.w = f, bufio.NewWriterSize(f, 1<<16)
	return kc, nil
}

func (kc *keyCheck) close() {
	if kc != nil && kc.f != nil {
		kc.f.Close()
	}
}

// where names input row (0-based) as an error does.
func (kc *keyCheck) line(row int64) int {
	if kc.liner == nil {
		return 0
	}
	return kc.liner.rowLine(row)
}

// checkNulls refuses a NULL in a key column of rec, whose first row is
// input row first (0-based), naming the first such row.
func (kc *keyCheck) checkNulls(rec arrow.RecordBatch, first int64) error {
	bad, col := -1, -1
	for _, c := range kc.idx {
		arr := rec.Column(c)
		if arr.NullN() == 0 {
			continue
		}
		for j := 0; j < arr.Len() && (bad < 0 || j < bad); j++ {
			if arr.IsNull(j) {
				bad, col = j, c
				break
			}
		}
	}
	if bad < 0 {
		return nil
	}
	row, name := first+int64(bad), kc.in.Field(col).Name
	if line := kc.line(row); line > 0 {
		return &CSVError{Name: kc.o.Name, Line: line, Column: name, Err: ErrNullKey}
	}
	return fmt.Errorf("row %d: column %q: %w", row+1, name, ErrNullKey)
}

// addRun writes the run of a container just written: keys are its key
// columns in input order, the k-th row being input row first+k, and
// perm[r] the input-order index of its row r.
func (kc *keyCheck) addRun(keys []arrow.Array, perm []int, first int64) error {
	start := time.Now()
	defer func() { kc.took += time.Since(start) }()
	n := len(perm)
	kc.keys += int64(n)
	var kb columnar.KeyBatch
	if err := kc.enc.EncodeBatch(&kb, keys, 0, n); err != nil {
		return fmt.Errorf("primary key: %w", err)
	}
	run := keyRun{start: kc.off}
	put := func(i, r int, prev []byte) ([]byte, error) {
		k := kb.Key(i)
		if prev != nil && bytes.Equal(prev, k) {
			kc.dup = true
		}
		kc.buf = binary.AppendUvarint(kc.buf[:0], uint64(len(k)))
		kc.buf = append(kc.buf, k...)
		kc.buf = binary.AppendUvarint(kc.buf, uint64(first)+uint64(i))
		kc.buf = binary.AppendUvarint(kc.buf, uint64(r))
		w, err := kc.w.Write(kc.buf)
		kc.off += int64(w)
		return k, err
	}
	var prev []byte
	var err error
	if kc.prefix {
		for r, i := range perm {
			if prev, err = put(i, r, prev); err != nil {
				return fmt.Errorf("primary key check: %w", err)
			}
		}
	} else {
		row := make([]int32, n) // input-order index -> row in the container
		for r, i := range perm {
			row[i] = int32(r)
		}
		// Sorted on each key's first 8 bytes, held beside its index, and
		// on the whole key only where those are equal.
		type ordered struct {
			head uint64
			i    int32
		}
		order := make([]ordered, n)
		var pad [8]byte
		for i := range order {
			k := kb.Key(i)
			head := k
			if len(k) < 8 {
				head = append(pad[:0:0], k...)
				head = append(head, pad[len(k):]...)
			}
			order[i] = ordered{head: binary.BigEndian.Uint64(head), i: int32(i)}
		}
		slices.SortFunc(order, func(a, b ordered) int {
			if a.head != b.head {
				if a.head < b.head {
					return -1
				}
				return 1
			}
			if c := bytes.Compare(kb.Key(int(a.i)), kb.Key(int(b.i))); c != 0 {
				return c
			}
			return int(a.i - b.i)
		})
		for _, o := range order {
			if prev, err = put(int(o.i), int(row[o.i]), prev); err != nil {
				return fmt.Errorf("primary key check: %w", err)
			}
		}
	}
	run.end = kc.off
	kc.runs = append(kc.runs, run)
	return nil
}

// keyCursor reads one run.
type keyCursor struct {
	r         *bufio.Reader
	container int
	key       []byte
	row       int64 // input row, 0-based
	crow      int64 // row in the container
}

func (c *keyCursor) next() (bool, error) {
	n, err := binary.ReadUvarint(c.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err == nil {
		c.key = slices.Grow(c.key[:0], int(n))[:n]
		_, err = io.ReadFull(c.r, c.key)
	}
	var row, crow uint64
	if err == nil {
		row, err = binary.ReadUvarint(c.r)
	}
	if err == nil {
		crow, err = binary.ReadUvarint(c.r)
	}
	if err != nil {
		return false, fmt.Errorf("primary key check: read the run of container %d: %w", c.container, err)
	}
	c.row, c.crow = int64(row), int64(crow)
	return true, nil
}

type cursorHeap []*keyCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].row < h[j].row
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*keyCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// keyRow is a row of the merge: its input row and where it is.
type keyRow struct {
	row, crow int64
	container int
}

// check merges the runs of the containers ms and returns the first
// duplicate in input order as a *DuplicateKeyError, nil if every key is
// unique. Each group of equal keys gives its earliest row and the one
// after it; the group whose second row is earliest is the first
// duplicate.
func (kc *keyCheck) check(ms []*columnar.Manifest) error {
	start := time.Now()
	defer func() {
		kc.took += time.Since(start)
		if s := kc.o.KeyStats; s != nil {
			*s = KeyCheckStats{Keys: kc.keys, Runs: len(kc.runs), RunBytes: kc.off, Elapsed: kc.took}
		}
		kc.o.Logger.Info("primary key checked", "rows", kc.keys, "runs", len(kc.runs), "bytes", kc.off, "elapsed", kc.took.Seconds())
	}()
	if err := kc.w.Flush(); err != nil {
		return fmt.Errorf("primary key check: %w", err)
	}
	// One buffer per run, within 32MiB together.
	size := min(1<<16, max(4<<10, (32<<20)/max(1, len(kc.runs))))
	h := make(cursorHeap, 0, len(kc.runs))
	for i, run := range kc.runs {
		c := &keyCursor{r: bufio.NewReaderSize(io.NewSectionReader(kc.f, run.start, run.end-run.start), size), container: i}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	var (
		group         []byte
		a, b          keyRow // the group's earliest two rows
		count         int
		found         bool
		first, second keyRow // of the first duplicate
		n             int
	)
	settle := func() {
		if count >= 2 && (!found || b.row < second.row) {
			found, first, second = true, a, b
		}
	}
	for h.Len() > 0 {
		if n++; n%(1<<16) == 0 {
			if err := kc.o.Context.Err(); err != nil {
				return err
			}
		}
		c := h[0]
		r := keyRow{row: c.row, crow: c.crow, container: c.container}
		switch {
		case count > 0 && bytes.Equal(c.key, group):
			// Across runs equal keys come out in input order (the heap
			// breaks ties on it), within a run in the container's order.
			count++
			switch {
			case r.row < a.row:
				a, b = r, a
			case count == 2 || r.row < b.row:
				b = r
			}
		default:
			settle()
			group = append(group[:0], c.key...)
			a, count = r, 1
		}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	settle()
	if !found {
		return nil
	}
	e := &DuplicateKeyError{Columns: kc.o.PrimaryKey, Row: second.row + 1, First: first.row + 1,
		Line: kc.line(second.row), FirstLine: kc.line(first.row)}
	vals, err := kc.values(ms[second.container], second.crow)
	if err != nil {
		return fmt.Errorf("%w (reading its values: %v)", e, err)
	}
	e.Values = vals
	return e
}

// values reads the key of row crow of container m, as CSV writes it.
func (kc *keyCheck) values(m *columnar.Manifest, crow int64) ([]string, error) {
	c, err := columnar.Open(columnar.ContainerDir(kc.o.DataDir, m.Table, m.Projection, m.ID), columnar.OpenOptions{Allocator: memory.DefaultAllocator})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cols := make([]int, len(kc.o.PrimaryKey))
	for i, name := range kc.o.PrimaryKey {
		cols[i] = kc.out.FieldIndices(name)[0]
	}
	br, err := c.OpenColumns(cols)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	rec, err := br.ReadBlock(int(crow / int64(m.BlockRows)))
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	j := int(crow % int64(m.BlockRows))
	vals := make([]string, len(cols))
	for i := range cols {
		arr := rec.Column(i)
		switch arr.(type) {
		case *array.String, *array.LargeString, *array.Binary, *array.LargeBinary:
			vals[i] = quoteValue(csvValue(arr, j))
		default:
			vals[i] = csvValue(arr, j)
		}
	}
	return vals, nil
}

// changeColumns returns the change columns of a block of n loaded rows:
// version 0, not deleted.
func changeColumns(mem memory.Allocator, n int) (version, deleted arrow.Array) {
	vb := array.NewInt64Builder(mem)
	defer vb.Release()
	vb.AppendValues(make([]int64, n), nil)
	db := array.NewBooleanBuilder(mem)
	defer db.Release()
	db.AppendValues(make([]bool, n), nil)
	return vb.NewArray(), db.NewArray()
}
